"""The review queue: pending facts grouped by the turn they came from, with the turn's
text, speaker, time and flags, each fact's reason and, for a single value, the trusted
value it would replace."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import QuerySet

from memory.domain.access import ContextAccess
from memory.models import Fact, FactStatus, FactTrust, Turn
from memory.selectors.facts import facts_visible

REVIEW_PAGE = 100  # pending facts on one page of the queue


@dataclass
class ReviewItem:
    fact: Fact
    replaces: Fact | None  # the trusted value a pending single value would replace


@dataclass
class ReviewGroup:
    turn: Turn | None  # None: facts written directly (POST facts), not from a turn
    items: list[ReviewItem] = field(default_factory=list)


def pending_facts(*, access: ContextAccess) -> QuerySet[Fact]:
    return facts_visible(access=access).filter(trust=FactTrust.PENDING)


def pending_count(*, access: ContextAccess) -> int:
    """Pending facts the caller may read (the partial index fact_pending)."""
    return pending_facts(access=access).count()


def review_queue(*, access: ContextAccess, limit: int = REVIEW_PAGE) -> list[ReviewGroup]:
    """The oldest pending facts first, grouped by turn (queries: the facts with their
    subject, object, predicate and turn; the trusted values they would replace)."""
    facts = list(
        pending_facts(access=access)
        .select_related("subject", "object", "predicate", "turn")
        .defer("turn__embedding")
        .order_by("recorded_at", "id")[:limit]
    )
    replaced = _replaced(facts)
    groups: dict[int | None, ReviewGroup] = {}
    for fact in facts:
        group = groups.setdefault(fact.turn_id, ReviewGroup(turn=fact.turn))
        slot = (fact.subject_id, fact.predicate_id, fact.scope)
        group.items.append(ReviewItem(fact=fact, replaces=replaced.get(slot)))
    return list(groups.values())


def _replaced(facts: list[Fact]) -> dict[tuple[int, int, str], Fact]:
    single = [f for f in facts if f.single_valued and f.status == FactStatus.CURRENT]
    if not single:
        return {}
    held = Fact.objects.filter(
        subject_id__in={f.subject_id for f in single},
        predicate_id__in={f.predicate_id for f in single},
        status=FactStatus.CURRENT,
        trust=FactTrust.TRUSTED,
        single_valued=True,
    ).select_related("object")
    return {(f.subject_id, f.predicate_id, f.scope): f for f in held}
