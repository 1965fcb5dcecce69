"""Which existing entity a written name means when an entity bears exactly that name.

A write that states facts names its entities by text (an ingest run's mentions, POST
facts with ``{"name": …}``). An entity whose name *is* that text — case and spacing set
aside — is what the writer means, in any scope the writer may read, before any match by
normalized key: "Globex Corporation" means the entity named so in ``org/globex``, not
"Globex" of the writer's own scope, which merely shares its key ``globex``; "Hannah
Ortiz" written into ``org/acme`` means the person of that name in ``org/globex`` rather
than a second Hannah Ortiz (docs/decisions/0125).

The rule, best first:
1. type — a name written with a type takes an entity of that type only; a name written
   without one takes any type, typed entities before ``other`` ones (``other`` is an
   entity nobody typed), and is ambiguous when two typed entities of different types
   bear it;
2. scope — the write's own scope and its ancestors (nearest first), then a scope the
   writer may write to, then one it may only read;
3. the oldest entity (lowest id): an unrelated edit never changes what a name means.

Two callers share it: the ingest plan (``services/ingest/entity_resolution.py``) with the
candidates its one key statement reads, and ``entity_exact_name_find`` for a single write.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memory.domain.access import ContextAccess
from memory.domain.entity_names import entity_name_folded, entity_normalize_key
from memory.kernel.errors import ValidationFailed
from memory.kernel.scopes import Grants
from memory.models import Entity, EntityType


@dataclass(frozen=True)
class NamedEntity:
    """What the rule reads of a live entity the writer may read."""

    id: int
    type: str
    scope: str
    name: str


def exact_name_pick(
    *,
    name: str,
    type_: str | None,
    candidates: Iterable[NamedEntity],
    lineage: Sequence[str],
    grants: Grants,
) -> NamedEntity | None:
    """The entity ``name`` (written with ``type_``, or None) means among ``candidates``
    (live entities the writer may read, of any name), by the module's rule; None when
    none bears the name. ``lineage``: the write scope and its ancestors, nearest first.
    Raises ValidationFailed ``ambiguous_entity`` for an untyped name two typed entities
    of different types bear."""
    folded = entity_name_folded(name)
    named = [c for c in candidates if entity_name_folded(c.name) == folded]
    if type_ is not None:
        named = [c for c in named if c.type == type_]
    elif len(typed := {c.type for c in named if c.type != EntityType.OTHER}) > 1:
        raise ValidationFailed(
            f"{name!r} names existing entities of types {' and '.join(sorted(typed))}; "
            "give subject_type/object_type",
            code="ambiguous_entity",
        )
    if not named:
        return None
    nearness = {scope: i for i, scope in enumerate(lineage)}

    def rank(c: NamedEntity) -> tuple[bool, int, int, int]:
        if c.scope in nearness:
            place = (0, nearness[c.scope])
        else:
            place = (1 if grants.can_write(c.scope) else 2, 0)
        return (c.type == EntityType.OTHER, *place, c.id)

    return min(named, key=rank)


def entity_exact_name_find(
    *, access: ContextAccess, name: str, type_: str | None, lineage: Sequence[str]
) -> Entity | None:
    """The live entity ``name`` means for a single write (one query: the entities the
    caller may read whose key is the name's, through the key index), or None."""
    key = entity_normalize_key(name)
    if not key:
        return None
    rows = (
        Entity.objects.filter(
            access.grants.read_q(),
            context=access.context,
            normalized_key=key,
            merged_into__isnull=True,
        )
        .defer("embedding")
        .order_by("pk")
    )
    entities = {e.pk: e for e in rows[:200]}
    picked = exact_name_pick(
        name=name,
        type_=type_,
        candidates=[NamedEntity(e.pk, e.type, e.scope, e.name) for e in entities.values()],
        lineage=lineage,
        grants=access.grants,
    )
    return entities[picked.id] if picked is not None else None
