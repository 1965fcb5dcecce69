"""Fact reads. Every query is limited to the caller's read grants."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import (
    Case,
    CharField,
    DurationField,
    Exists,
    ExpressionWrapper,
    F,
    FloatField,
    Func,
    OuterRef,
    Q,
    QuerySet,
    Value,
    When,
)
from django.db.models.expressions import Combinable
from django.db.models.functions import Greatest, Power
from django.utils import timezone

from memory.domain.access import ContextAccess
from memory.domain.predicate_names import predicate_normalize
from memory.kernel.errors import NotFound
from memory.models import Conflict as ConflictRecord
from memory.models import Entity, Fact, FactStatus, FactTrust, Predicate, PredicateStatus
from memory.selectors.predicates import predicate_canonicalize

RANK_HALF_LIFE_DAYS = 90.0
RANK_MIN_CONFIDENCE = 0.2
CONTESTED_AT_WRITE = timedelta(seconds=1)


def facts_visible(*, access: ContextAccess) -> QuerySet[Fact]:
    return Fact.objects.filter(access.grants.read_q(), context=access.context)


def fact_get(*, access: ContextAccess, fact_id: int) -> Fact:
    """The fact ``fact_id`` if the caller may read it, with its subject, object, predicate
    and creator joined; NotFound otherwise (a fact out of the caller's grants is not
    told apart from one that does not exist)."""
    fact = (
        facts_visible(access=access)
        .select_related("subject", "object", "predicate", "created_by")
        .filter(pk=fact_id)
        .first()
    )
    if fact is None:
        raise NotFound(f"fact {fact_id} not found", code="fact_not_found")
    return fact


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
    """Facts the store held as current at ``at``, read from each fact's own times: it was
    recorded by then and valid then; it still is current and became so by then (a
    contested fact made current later has ``status_changed_at`` after ``at``), or it left
    "current" after ``at``; it was not contested then (a contested fact that was retracted
    or superseded later left a conflict record open at ``at``); and no fact that
    supersedes it was itself current then (a superseded fact restored later is current
    again, but was not while its successor held the slot)."""
    became_current_by_then = Q(status=FactStatus.CURRENT) & (
        Q(status_changed_at__isnull=True) | Q(status_changed_at__lte=at)
    )
    left_current_after = Q(
        status__in=[FactStatus.SUPERSEDED, FactStatus.EXPIRED, FactStatus.RETRACTED],
        status_changed_at__gt=at,
    )
    # A write that loses its collision records the conflict with the fact (a moment
    # after it): such a fact was contested from the start.
    conflict_began = Q(created_at__lte=at) | Q(
        created_at__lte=OuterRef("recorded_at") + CONTESTED_AT_WRITE
    )
    contested_then = Exists(
        ConflictRecord.objects.filter(conflict_began, contested_fact=OuterRef("pk")).filter(
            Q(resolved_at__isnull=True) | Q(resolved_at__gt=at)
        )
    )
    successor_held_then = Exists(
        Fact.objects.filter(supersedes=OuterRef("pk"), recorded_at__lte=at).filter(
            Q(status=FactStatus.CURRENT)
            | Q(
                status__in=[FactStatus.SUPERSEDED, FactStatus.EXPIRED, FactStatus.RETRACTED],
                status_changed_at__gt=at,
            )
        )
    )
    return (
        (became_current_by_then | left_current_after)
        & Q(recorded_at__lte=at)
        & (Q(valid_from__isnull=True) | Q(valid_from__lte=at))
        & (Q(valid_until__isnull=True) | Q(valid_until__gt=at))
        & ~Q(contested_then)
        & ~Q(successor_held_then)
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

    Read backwards, the ends swap: through an inverse alias (``employs`` of ``works_at``)
    ``subject=X`` finds the ``works_at`` facts whose object is X, and through a registered
    inverse pair (``manages`` / ``reports_to``) ``manages`` with ``subject=X`` also finds
    the ``reports_to`` facts whose object is X. Each fact read backwards carries
    ``read_through_inverse`` (the name it was asked by) so the caller can say so."""
    facts = facts_visible(access=access).filter(
        trust_q(include_pending=include_pending, include_rejected=include_superseded)
    )
    if predicate:
        readings = _predicate_readings(access, predicate)
        asked = predicate_normalize(predicate)
        match = Q(pk__in=[])
        for name, backwards in readings:
            ends = (object, subject) if backwards else (subject, object)
            match |= Q(predicate__name=name) & _ends_q(*ends)
        facts = facts.filter(match)
        backwards_names = [name for name, backwards in readings if backwards]
        if backwards_names:
            facts = facts.annotate(
                read_through_inverse=Case(
                    When(predicate__name__in=backwards_names, then=Value(asked)),
                    default=Value(""),
                    output_field=CharField(),
                )
            )
    else:
        facts = facts.filter(_ends_q(subject, object))
    if kind:
        facts = facts.filter(kind=kind)
    if scope:
        facts = facts.filter(scope=scope)
    if as_of is not None:
        # Every fact answered was current at ``as_of``: that is the status it had then.
        facts = facts.filter(_current_at(as_of)).annotate(
            status_then=Value(FactStatus.CURRENT.value, output_field=CharField())
        )
    elif not include_superseded:
        facts = facts.filter(_current_at(timezone.now()))
    return facts.select_related("subject", "object", "predicate").order_by("-recorded_at", "-id")


def _predicate_readings(access: ContextAccess, predicate: str) -> list[tuple[str, bool]]:
    """The stored predicates ``predicate`` reads, each with whether it reads it backwards:
    its canonical name (backwards through an inverse alias) and, when that is registered
    with a registered ``inverse``, the inverse read the other way round."""
    resolved = predicate_canonicalize(context=access.context, name=predicate)
    readings = [(resolved.canonical, resolved.inverse)]
    known = resolved.predicate
    if resolved.registered and known is not None and known.inverse:
        partner = (
            Predicate.objects.filter(
                context=access.context, name=known.inverse, status=PredicateStatus.REGISTERED
            )
            .exclude(pk=known.pk)
            .values_list("name", flat=True)
            .first()
        )
        if partner is not None:
            readings.append((partner, not resolved.inverse))
    return readings


def _ends_q(subject: Entity | None, object: Entity | None) -> Q:
    ends = Q()
    if subject is not None:
        ends &= Q(subject=subject)
    if object is not None:
        ends &= Q(object=object)
    return ends


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
