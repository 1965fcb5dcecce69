"""What a context holds, as the memory page shows it before an export or an import."""

from __future__ import annotations

from dataclasses import dataclass

from memory.domain.access import ContextAccess
from memory.models import Document, Entity, Fact, Item, Turn


@dataclass(frozen=True)
class MemoryHoldings:
    entities: int
    facts: int
    turns: int
    documents: int
    items: int

    @property
    def empty(self) -> bool:
        """Whether an import may go into the context (memory_import_check_empty)."""
        return not (self.entities or self.facts or self.turns or self.documents or self.items)


def memory_holdings(*, access: ContextAccess) -> MemoryHoldings:
    """Every row of each kind an export carries (merged entities and retracted facts
    too), as the import's emptiness check counts them: five counts."""
    context = access.context
    return MemoryHoldings(
        entities=Entity._default_manager.filter(context=context).count(),
        facts=Fact._default_manager.filter(context=context).count(),
        turns=Turn._default_manager.filter(context=context).count(),
        documents=Document._default_manager.filter(context=context).count(),
        items=Item._default_manager.filter(context=context).count(),
    )
