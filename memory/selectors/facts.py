"""Fact reads. Every query is limited to the caller's read grants."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import F, FloatField, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.utils import timezone

from memory.access import ContextAccess
from memory.models import Entity, Fact, FactStatus
from memory.selectors.predicates import predicate_canonicalize

RANK_HALF_LIFE_DAYS = 90.0
RANK_MIN_CONFIDENCE = 0.2


def facts_visible(*, access: ContextAccess) -> QuerySet[Fact]:
    return Fact.objects.filter(access.grants.read_q(), context=access.context)


def _current_at(at: datetime) -> Q:
    """Facts the store held as current at ``at`` (contested facts never were)."""
    held = Q(status=FactStatus.CURRENT) | (
        Q(status__in=[FactStatus.SUPERSEDED, FactStatus.EXPIRED, FactStatus.RETRACTED])
        & Q(status_changed_at__gt=at)
    )
    return (
        held
        & Q(recorded_at__lte=at)
        & (Q(valid_from__isnull=True) | Q(valid_from__lte=at))
        & (Q(valid_until__isnull=True) | Q(valid_until__gt=at))
    )


def fact_list(
    *,
    access: ContextAccess,
    subject: Entity | None = None,
    predicate: str | None = None,
    object: Entity | None = None,
    kind: str | None = None,
    scope: str | None = None,
    as_of: datetime | None = None,
    include_superseded: bool = False,
) -> QuerySet[Fact]:
    """Facts matching the filters; ``predicate`` in any form (``worksAt`` → ``works_at``)."""
    facts = facts_visible(access=access)
    if subject is not None:
        facts = facts.filter(subject=subject)
    if object is not None:
        facts = facts.filter(object=object)
    if predicate:
        canonical = predicate_canonicalize(context=access.context, name=predicate).canonical
        facts = facts.filter(predicate__name=canonical)
    if kind:
        facts = facts.filter(kind=kind)
    if scope:
        facts = facts.filter(scope=scope)
    if as_of is not None:
        facts = facts.filter(_current_at(as_of))
    elif not include_superseded:
        facts = facts.filter(_current_at(timezone.now()))
    return facts.select_related("subject", "object", "predicate").order_by("-recorded_at", "-id")


def fact_history(
    *, access: ContextAccess, subject: Entity, predicate: str | None = None
) -> list[Fact]:
    """Every fact about ``subject`` oldest first, with its supersession links."""
    facts = fact_list(access=access, subject=subject, predicate=predicate, include_superseded=True)
    return list(facts.order_by("recorded_at", "id"))


@dataclass(frozen=True)
class RankedFact:
    fact: Fact
    score: float


def fact_rank_score(fact: Fact, *, now: datetime) -> float:
    """confidence × 0.5^(age_days/90) × ranking_weight × (0.3 + 1.4 × importance).

    Age counts from the last time the fact was seen, so re-observation keeps it fresh.
    """
    age_days = max((now - fact.last_seen_at).total_seconds() / 86400.0, 0.0)
    decay = 0.5 ** (age_days / RANK_HALF_LIFE_DAYS)
    return fact.confidence * decay * fact.predicate.ranking_weight * (0.3 + 1.4 * fact.importance)


def entity_facts_ranked(
    *, access: ContextAccess, entity: Entity, limit: int = 50, now: datetime | None = None
) -> list[RankedFact]:
    """An entity's current facts (as subject), best first; confidence under 0.2 dropped."""
    now = now or timezone.now()
    # The same score in SQL picks the best ``limit`` rows, so an entity with thousands of
    # facts does not load them all; Python scores and orders the few it gets.
    rank = RawSQL(
        # float8 throughout: extract() answers numeric, whose power() is slow.
        "memory_fact.confidence * (0.3 + 1.4 * memory_fact.importance) * power(0.5::float8, "
        "greatest(extract(epoch from (%s - memory_fact.last_seen_at))::float8 / 86400.0, 0) "
        "/ %s)",
        (now, RANK_HALF_LIFE_DAYS),
        output_field=FloatField(),
    )
    facts = (
        fact_list(access=access, subject=entity)
        .filter(confidence__gte=RANK_MIN_CONFIDENCE)
        .annotate(rank=rank * F("predicate__ranking_weight"))
        .order_by("-rank", "-id")[:limit]
    )
    ranked = [RankedFact(fact=f, score=fact_rank_score(f, now=now)) for f in facts]
    ranked.sort(key=lambda r: (-r.score, -r.fact.pk))
    return ranked
