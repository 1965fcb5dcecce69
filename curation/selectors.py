"""Read-only aggregates the dashboard needs beyond memory's selectors.

Everything here is limited to the caller's read grants the same way memory's selectors are
(``access.grants.read_q``); registry rows (predicates, aliases) are context-wide.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from django.db.models import Count, Q, QuerySet
from django.db.models.functions import TruncDate
from django.utils import timezone

from curation.models import ImportJob
from memory.access import ContextAccess
from memory.errors import NotFound
from memory.models import (
    AuditEvent,
    Context,
    Document,
    DuplicateCandidate,
    DuplicateStatus,
    Entity,
    Fact,
    FactKind,
    FactStatus,
    Predicate,
    PredicateAlias,
    PredicateStatus,
)
from memory.models import Conflict as ConflictRecord
from memory.selectors.curation import conflict_list
from memory.selectors.entities import entities_visible
from memory.selectors.facts import facts_visible
from memory.selectors.predicates import predicate_list
from memory.services.predicates import EDITABLE_FIELDS

DRIFT_RESOLUTIONS = ("drift_alias", "drift_reject")
REGISTRY_FORMAT = "memory-desk-registry"
REGISTRY_VERSION = 1
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
        """(aliases + open drift) per registered predicate: how many other forms each
        concept attracts on average."""
        return (self.aliases + self.observed) / self.registered if self.registered else None


@dataclass(frozen=True)
class DriftDay:
    day: date
    new: int  # predicates first seen that day (not registered when seen)
    resolved: int  # drift items aliased, promoted or rejected that day


def overview_read(*, access: ContextAccess) -> tuple[OverviewCounts, VocabularyHealth]:
    """Counts and vocabulary health (queries: entities; facts; documents; predicates by
    status; open drift; aliases; most varied concepts; conflicts; duplicates)."""
    context = access.context
    entities = entities_visible(access=access).filter(merged_into__isnull=True).count()
    facts = _current_facts(access).aggregate(
        total=Count("id"),
        registered=Count("id", filter=Q(predicate__status=PredicateStatus.REGISTERED)),
    )
    documents = Document.objects.filter(access.grants.read_q(), context=context).count()
    statuses = Predicate.objects.filter(context=context).aggregate(
        registered=Count("id", filter=Q(status=PredicateStatus.REGISTERED)),
    )
    open_drift = _open_drift_count(access)
    aliases = PredicateAlias.objects.filter(
        context=context, predicate__status=PredicateStatus.REGISTERED
    ).count()
    varied = (
        _current_facts(access)
        .filter(predicate__status=PredicateStatus.REGISTERED)
        .values("predicate__name")
        .annotate(forms=Count("raw_predicate", distinct=True), n=Count("id"))
        .filter(forms__gt=1)
        .order_by("-forms", "-n", "predicate__name")[:TOP_VARIED]
    )
    counts = OverviewCounts(
        entities=entities,
        facts=facts["total"],
        documents=documents,
        registered=statuses["registered"],
        open_drift=open_drift,
        open_conflicts=conflict_list(access=access).count(),
        open_duplicates=_open_duplicates(access).count(),
    )
    health = VocabularyHealth(
        facts=facts["total"],
        facts_on_registered=facts["registered"],
        registered=statuses["registered"],
        aliases=aliases,
        observed=open_drift,
        most_varied=[VariedConcept(v["predicate__name"], v["forms"], v["n"]) for v in varied],
    )
    return counts, health


def _current_facts(access: ContextAccess) -> QuerySet[Fact]:
    return facts_visible(access=access).filter(status=FactStatus.CURRENT)


def _open_drift_count(access: ContextAccess) -> int:
    """Observed predicates the drift page would list (the visibility rule of
    ``memory.selectors.drift.drift_list``: some visible fact, or no facts at all), counted
    in one query instead of loading every drift fact for the examples."""
    visible = access.grants.read_q("facts__scope")
    return (
        Predicate.objects.filter(context=access.context, status=PredicateStatus.OBSERVED)
        .annotate(visible_facts=Count("facts", filter=visible), all_facts=Count("facts"))
        .filter(Q(visible_facts__gt=0) | Q(all_facts=0))
        .count()
    )


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
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(n=Count("id"))
        .values_list("day", "n")
    )
    series = [start + timedelta(days=offset) for offset in range(days)]
    return [DriftDay(day, new.get(day, 0), resolved.get(day, 0)) for day in series]


# --- registry -------------------------------------------------------------------------


def registry_rows(
    *, access: ContextAccess, status: str | None, category: str | None = None
) -> QuerySet[Predicate]:
    """Registry rows with ``fact_count``: the caller's visible current facts (queries:
    predicates with counts; their aliases)."""
    visible = access.grants.read_q("facts__scope") & Q(facts__status=FactStatus.CURRENT)
    return predicate_list(context=access.context, status=status, category=category).annotate(
        fact_count=Count("facts", filter=visible)
    )


def registry_export_data(*, context: Context) -> dict[str, Any]:
    """The registered predicates with every editable field and their aliases, in the shape
    ``curation.services.registry_file_parse`` reads back (two queries)."""
    predicates = predicate_list(context=context, status=PredicateStatus.REGISTERED)
    return {
        "format": REGISTRY_FORMAT,
        "version": REGISTRY_VERSION,
        "context": context.slug,
        "exported_at": timezone.now().isoformat(),
        "predicates": [
            {
                "name": p.name,
                **{field: getattr(p, field) for field in EDITABLE_FIELDS},
                "aliases": sorted(a.alias for a in p.alias_set.all()),
            }
            for p in predicates
        ],
    }


def registry_categories(*, context: Context) -> list[str]:
    return list(
        Predicate.objects.filter(context=context, status=PredicateStatus.REGISTERED)
        .order_by("category")
        .values_list("category", flat=True)
        .distinct()
    )


def registered_names(*, context: Context) -> list[str]:
    return list(
        Predicate.objects.filter(context=context, status=PredicateStatus.REGISTERED)
        .order_by("name")
        .values_list("name", flat=True)
    )


def predicate_facts(*, access: ContextAccess, predicate: Predicate, limit: int = 50) -> list[Fact]:
    """The newest visible facts stored under ``predicate`` (any status but retracted)."""
    return list(
        facts_visible(access=access)
        .filter(predicate=predicate)
        .exclude(status=FactStatus.RETRACTED)
        .select_related("subject", "object")
        .order_by("-recorded_at", "-id")[:limit]
    )


def predicate_alias_names(*, predicate: Predicate) -> list[str]:
    return list(predicate.alias_set.order_by("alias").values_list("alias", flat=True))


def predicate_fact_count(*, access: ContextAccess, predicate: Predicate) -> int:
    return (
        facts_visible(access=access)
        .filter(predicate=predicate)
        .exclude(status=FactStatus.RETRACTED)
        .count()
    )


# --- conflicts ------------------------------------------------------------------------


def conflict_rows(*, access: ContextAccess, status: str | None) -> QuerySet[ConflictRecord]:
    """Conflicts with both facts and their object entities joined (one query)."""
    return conflict_list(access=access, status=status).select_related(
        "current_fact__object", "contested_fact__object"
    )


# --- entities -------------------------------------------------------------------------


def entity_fact_counts(*, access: ContextAccess, entity_ids: list[int]) -> dict[int, int]:
    """Visible current facts per subject, for one page of entities (one query)."""
    rows = (
        _current_facts(access)
        .filter(subject_id__in=entity_ids)
        .values("subject_id")
        .annotate(n=Count("id"))
        .values_list("subject_id", "n")
    )
    return dict(rows)


def entity_incoming(*, access: ContextAccess, entity: Entity, limit: int = 50) -> list[Fact]:
    """Current relation facts pointing at ``entity`` (its in-edges), newest first."""
    return list(
        _current_facts(access)
        .filter(object=entity, kind=FactKind.RELATION)
        .select_related("subject", "object", "predicate")
        .order_by("-recorded_at", "-id")[:limit]
    )


def entity_types_present(*, access: ContextAccess) -> list[str]:
    return list(
        entities_visible(access=access)
        .filter(merged_into__isnull=True)
        .order_by("type")
        .values_list("type", flat=True)
        .distinct()
    )


# --- import jobs ----------------------------------------------------------------------


def import_job_list(*, access: ContextAccess, limit: int = 10) -> list[ImportJob]:
    """The context's recent import jobs without their file text (one query)."""
    return list(
        ImportJob.objects.filter(context=access.context)
        .select_related("created_by")
        .defer("content", "report")
        .order_by("-created_at", "-id")[:limit]
    )


def import_job_get(*, access: ContextAccess, job_id: int) -> ImportJob:
    job = (
        ImportJob.objects.filter(context=access.context, pk=job_id)
        .select_related("created_by")
        .defer("content")
        .first()
    )
    if job is None:
        raise NotFound(f"import {job_id} not found", code="import_not_found")
    return job
