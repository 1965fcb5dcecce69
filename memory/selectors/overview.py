"""The overview page's aggregates: counts, vocabulary health and the drift series.

Everything here is limited to the caller's read grants the same way the other selectors
are (``access.grants.read_q``); registry rows (predicates, aliases) are context-wide.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from django.db.models import Case, Count, Func, IntegerField, Q, QuerySet, Sum, Value, When
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import TruncDate
from django.utils import timezone

from memory.domain.access import ContextAccess
from memory.models import (
    AuditEvent,
    Document,
    DuplicateCandidate,
    DuplicateStatus,
    Predicate,
    PredicateAlias,
    PredicateStatus,
)
from memory.selectors.curation import conflict_list
from memory.selectors.entities import entities_visible
from memory.selectors.usage import (
    drift_is_visible,
    predicate_forms,
    predicate_usage,
    rejected_claims_usage,
)

DRIFT_RESOLUTIONS = ("drift_alias", "drift_alias_bulk", "drift_reject")
TOP_VARIED = 5


# --- overview -------------------------------------------------------------------------


@dataclass(frozen=True)
class OverviewCounts:
    entities: int
    facts: int
    documents: int
    registered: int
    open_drift: int
    open_conflicts: int
    open_duplicates: int


@dataclass(frozen=True)
class VariedConcept:
    name: str
    forms: int  # distinct raw predicates written for it
    facts: int


@dataclass(frozen=True)
class VocabularyHealth:
    facts: int
    facts_on_registered: int
    registered: int
    aliases: int
    observed: int
    most_varied: list[VariedConcept]

    @property
    def registered_share(self) -> float | None:
        return self.facts_on_registered / self.facts if self.facts else None

    @property
    def variants_per_concept(self) -> float | None:
        """Open drift forms per registered predicate: the other spellings no curator has
        resolved yet. Resolving drift lowers it (an alias is a resolved spelling: counted
        in ``aliases``, not here)."""
        return self.observed / self.registered if self.registered else None


@dataclass(frozen=True)
class DriftDay:
    day: date
    new: int  # predicates first seen that day (not registered when seen)
    resolved: int  # drift items aliased, promoted or rejected that day


def overview_read(*, access: ContextAccess) -> tuple[OverviewCounts, VocabularyHealth]:
    """Counts and vocabulary health (queries: entities; predicate usage; predicates;
    documents; aliases; raw forms; conflicts; duplicates).

    Fact figures come from the usage log (``memory.selectors.usage``): observations of
    current facts, exact and fast, where counting a million facts took seconds.
    """
    context = access.context
    entities = entities_visible(access=access).filter(merged_into__isnull=True).count()
    usage = predicate_usage(access=access)
    status_of = dict(Predicate.objects.filter(context=context).values_list("pk", "status"))
    names = dict(
        Predicate.objects.filter(context=context, status=PredicateStatus.REGISTERED).values_list(
            "pk", "name"
        )
    )
    facts = sum(use.live for pk, use in usage.items() if pk in status_of)
    on_registered = sum(use.live for pk, use in usage.items() if pk in names)
    observed = [pk for pk, status in status_of.items() if status == PredicateStatus.OBSERVED]
    rejected = rejected_claims_usage(access=access, predicate_ids=observed)
    open_drift = sum(1 for pk in observed if drift_is_visible(usage.get(pk), rejected.get(pk)))
    aliases = PredicateAlias.objects.filter(
        context=context, predicate__status=PredicateStatus.REGISTERED
    ).count()
    forms = predicate_forms(context=context)
    varied = sorted(
        (
            VariedConcept(names[pk], n, usage[pk].live)
            for pk, n in forms.items()
            if n > 1 and pk in names and pk in usage and usage[pk].live > 0
        ),
        key=lambda v: (-v.forms, -v.facts, v.name),
    )
    counts = OverviewCounts(
        entities=entities,
        facts=facts,
        documents=Document.objects.filter(access.grants.read_q(), context=context).count(),
        registered=len(names),
        open_drift=open_drift,
        open_conflicts=conflict_list(access=access).count(),
        open_duplicates=_open_duplicates(access).count(),
    )
    health = VocabularyHealth(
        facts=facts,
        facts_on_registered=on_registered,
        registered=len(names),
        aliases=aliases,
        observed=open_drift,
        most_varied=varied[:TOP_VARIED],
    )
    return counts, health


def _open_duplicates(access: ContextAccess) -> QuerySet[DuplicateCandidate]:
    """Open candidate pairs whose two entities the caller may both read."""
    return DuplicateCandidate.objects.filter(
        access.grants.read_q("entity_a__scope"),
        access.grants.read_q("entity_b__scope"),
        context=access.context,
        status=DuplicateStatus.OPEN,
    )


def drift_series(
    *, access: ContextAccess, days: int = 30, today: date | None = None
) -> list[DriftDay]:
    """New and resolved drift per day over the last ``days`` days, oldest first (queries:
    first sightings; resolutions). Registry-wide, like the registry itself; an item aliased
    away leaves the registry, so its sighting shows only while it was open."""
    today = today or timezone.localdate()
    start = today - timedelta(days=days - 1)
    since = datetime.combine(start, time.min, tzinfo=timezone.get_current_timezone())
    new = dict(
        Predicate.objects.filter(context=access.context, first_seen_at__gte=since)
        .annotate(day=TruncDate("first_seen_at"))
        .values("day")
        .annotate(n=Count("id"))
        .values_list("day", "n")
    )
    resolved = dict(
        AuditEvent.objects.filter(
            Q(action__in=DRIFT_RESOLUTIONS)
            | Q(action="predicate_register", before__status=PredicateStatus.OBSERVED),
            context=access.context,
            created_at__gte=since,
            undone_at__isnull=True,
        )
        .annotate(
            day=TruncDate("created_at"),
            # A bulk alias is one event resolving several items.
            items=Case(
                When(
                    action="drift_alias_bulk",
                    then=Func(KeyTransform("aliases", "after"), function="jsonb_array_length"),
                ),
                default=Value(1),
                output_field=IntegerField(),
            ),
        )
        .values("day")
        .annotate(n=Sum("items"))
        .values_list("day", "n")
    )
    series = [start + timedelta(days=offset) for offset in range(days)]
    return [DriftDay(day, new.get(day, 0), resolved.get(day, 0)) for day in series]
