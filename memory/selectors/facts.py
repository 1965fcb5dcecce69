"""Fact reads. Every query is limited to the caller's read grants."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import (
    DurationField,
    ExpressionWrapper,
    F,
    FloatField,
    Func,
    Q,
    QuerySet,
    Value,
)
from django.db.models.expressions import Combinable
from django.db.models.functions import Greatest, Power
from django.utils import timezone

from memory.access import ContextAccess
from memory.models import Entity, Fact, FactStatus, FactTrust
from memory.predicate_names import predicate_normalize
from memory.selectors.predicates import predicate_canonicalize

RANK_HALF_LIFE_DAYS = 90.0
RANK_MIN_CONFIDENCE = 0.2


def facts_visible(*, access: ContextAccess) -> QuerySet[Fact]:
    return Fact.objects.filter(access.grants.read_q(), context=access.context)


def trust_q(*, include_pending: bool = False, include_rejected: bool = False) -> Q:
    """What agents are told: trusted facts; pending ones when asked for (each marked);
    rejected ones only in history."""
    trusts = [FactTrust.TRUSTED]
    if include_pending:
        trusts.append(FactTrust.PENDING)
    if include_rejected:
        trusts.append(FactTrust.REJECTED)
    return Q(trust__in=trusts) if len(trusts) > 1 else Q(trust=FactTrust.TRUSTED)


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
    include_pending: bool = False,
) -> QuerySet[Fact]:
    """Facts matching the filters; ``predicate`` in any form (``worksAt`` → ``works_at``).

    Trusted facts only, unless ``include_pending``; rejected ones only with
    ``include_superseded`` (history).

    Through an inverse alias (``employs`` of ``works_at``) the ends swap: ``subject=X``
    finds the ``works_at`` facts whose object is X, and each fact carries
    ``read_through_inverse`` (the name it was asked by) so the caller can say so."""
    facts = facts_visible(access=access).filter(
        trust_q(include_pending=include_pending, include_rejected=include_superseded)
    )
    through_inverse = ""
    if predicate:
        resolved = predicate_canonicalize(context=access.context, name=predicate)
        facts = facts.filter(predicate__name=resolved.canonical)
        if resolved.inverse:
            through_inverse = predicate_normalize(predicate)
            subject, object = object, subject
            facts = facts.annotate(read_through_inverse=Value(through_inverse))
    if subject is not None:
        facts = facts.filter(subject=subject)
    if object is not None:
        facts = facts.filter(object=object)
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
    facts = fact_list(
        access=access,
        subject=subject,
        predicate=predicate,
        include_superseded=True,
        include_pending=True,
    )
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


class _EpochSeconds(Func):
    """``extract(epoch from interval)`` in float8: extract() answers numeric, whose power()
    cost ~80 ms over a hub's 3k facts."""

    template = "extract(epoch from %(expressions)s)::float8"
    output_field = FloatField()


def _rank(now: datetime) -> Combinable:
    """fact_rank_score in SQL (same formula, float8 throughout)."""
    age = ExpressionWrapper(Value(now) - F("last_seen_at"), output_field=DurationField())
    age_days = Greatest(_EpochSeconds(age) / Value(86400.0), Value(0.0))
    decay = Power(Value(0.5), age_days / Value(RANK_HALF_LIFE_DAYS))
    weight = Value(0.3) + Value(1.4) * F("importance")
    return F("confidence") * weight * decay * F("predicate__ranking_weight")


def entity_facts_ranked(
    *,
    access: ContextAccess,
    entity: Entity,
    limit: int = 50,
    offset: int = 0,
    now: datetime | None = None,
    include_pending: bool = False,
) -> list[RankedFact]:
    """An entity's current facts (as subject), best first, from the ``offset``-th;
    confidence under 0.2 dropped. One query, however many facts the entity has."""
    now = now or timezone.now()
    # The same score in SQL picks the page's rows over narrow rows (fact and predicate
    # weight only); only those few are joined to their object and loaded (joining first
    # cost a hub with 3k facts 3k entity lookups before the sort). Python scores and
    # orders the few it gets.
    best = (
        fact_list(access=access, subject=entity, include_pending=include_pending)
        .filter(confidence__gte=RANK_MIN_CONFIDENCE)
        .annotate(rank=_rank(now))
        .order_by("-rank", "-id")
        .values("pk")[offset : offset + limit]
    )
    ranked = []
    for fact in Fact.objects.filter(pk__in=best).select_related("object", "predicate"):
        fact.subject = entity  # every one is about it: no join, no copy of it per row
        ranked.append(RankedFact(fact=fact, score=fact_rank_score(fact, now=now)))
    ranked.sort(key=lambda r: (-r.score, -r.fact.pk))
    return ranked
