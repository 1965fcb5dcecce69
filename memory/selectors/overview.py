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
from memory.selectors.usage import drift_is_visible, predicate_forms, predicate_usage
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
    open_drift = sum(
        1
        for pk, status in status_of.items()
        if status == PredicateStatus.OBSERVED and drift_is_visible(usage.get(pk))
    )
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
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(n=Count("id"))
        .values_list("day", "n")
    )
    series = [start + timedelta(days=offset) for offset in range(days)]
    return [DriftDay(day, new.get(day, 0), resolved.get(day, 0)) for day in series]


# --- registry -------------------------------------------------------------------------


def registry_rows(
    *,
    access: ContextAccess,
    status: str | None,
    category: str | None = None,
    ids: list[int] | None = None,
) -> list[Predicate]:
    """Registry rows with ``fact_count``: observations of the caller's visible current
    facts, from the usage log (queries: predicates; aliases; usage)."""
    rows = predicate_list(context=access.context, status=status, category=category)
    predicates = list(rows if ids is None else rows.filter(pk__in=ids))
    usage = predicate_usage(access=access, predicate_ids=[p.pk for p in predicates])
    for predicate in predicates:
        use = usage.get(predicate.pk)
        predicate.fact_count = use.live if use else 0  # type: ignore[attr-defined]
    return predicates


def registry_row(*, access: ContextAccess, predicate: Predicate) -> Predicate:
    """One registry row again, after an alias or flag change (queries: it; its usage)."""
    return registry_rows(access=access, status=None, ids=[predicate.pk])[0]


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
    """Observations of the visible facts stored under ``predicate`` (not retracted)."""
    use = predicate_usage(access=access, predicate_ids=[predicate.pk]).get(predicate.pk)
    return use.used if use else 0


# --- conflicts ------------------------------------------------------------------------


def conflict_rows(*, access: ContextAccess, status: str | None) -> QuerySet[ConflictRecord]:
    """Conflicts with both facts and their object entities joined (one query)."""
    return conflict_list(access=access, status=status).select_related(
        "current_fact__object", "contested_fact__object"
    )


# --- entities -------------------------------------------------------------------------


def entity_fact_counts(*, access: ContextAccess, entity_ids: list[int]) -> dict[int, int]:
    """Visible current facts per subject, for one page of entities (one query).

    ``entity_ids`` come from the caller's own lists of this context, so the context filter
    is left out: with an all-scopes grant the count is an index-only scan of
    fact_subject_predicate (subject, predicate, status), even for hubs with thousands.
    """
    rows = (
        Fact.objects.filter(
            access.grants.read_q(), subject_id__in=entity_ids, status=FactStatus.CURRENT
        )
        .values("subject_id")
        .annotate(n=Count("*"))
        .values_list("subject_id", "n")
    )
    return dict(rows)


def _current_facts(access: ContextAccess) -> QuerySet[Fact]:
    return facts_visible(access=access).filter(status=FactStatus.CURRENT)


def entity_timeline(
    *, access: ContextAccess, entity: Entity, limit: int = 100, offset: int = 0
) -> list[tuple[Fact, Fact | None]]:
    """The entity's facts that stopped being current (superseded, expired, retracted,
    contested), newest first from the ``offset``-th, each with the fact that replaced it
    if any (queries: the facts; their successors)."""
    facts = list(
        facts_visible(access=access)
        # Listed rather than "not current", so fact_subject_recent finds them directly.
        .filter(subject=entity, status__in=[s for s in FactStatus if s != FactStatus.CURRENT])
        .select_related("predicate", "object")
        .order_by("-recorded_at", "-id")[offset : offset + limit]
    )
    successors = {
        f.supersedes_id: f
        for f in facts_visible(access=access)
        .filter(supersedes_id__in=[f.pk for f in facts])
        .select_related("object")
    }
    return [(fact, successors.get(fact.pk)) for fact in facts]


# (other entity's id, name, type, canonical predicate): one edge of the neighbourhood.
Edge = tuple[int, str, str, str]


def entity_edges(
    *, access: ContextAccess, entity: Entity, outgoing: int, incoming: int
) -> tuple[list[Edge], list[Edge]]:
    """The newest ``outgoing`` current relations from ``entity`` and ``incoming`` to it,
    as plain tuples (one query: both newest-first index reads in a UNION ALL)."""
    relations = (
        _current_facts(access).filter(kind=FactKind.RELATION).order_by("-recorded_at", "-id")
    )
    # The subject column tells the halves apart: an out-edge's is the entity, an in-edge's
    # the other end (a self-loop looks like an out-edge and is no neighbour anyway).
    out = relations.filter(subject=entity).values_list(
        "subject_id", "object_id", "object__name", "object__type", "predicate__name"
    )[:outgoing]
    into = relations.filter(object=entity).values_list(
        "subject_id", "subject_id", "subject__name", "subject__type", "predicate__name"
    )[:incoming]
    edges: tuple[list[Edge], list[Edge]] = ([], [])
    for subject_id, other_id, name, type_, predicate in out.union(into, all=True):
        edges[0 if subject_id == entity.pk else 1].append((other_id, name, type_, predicate))
    return edges


def entity_incoming(
    *, access: ContextAccess, entity: Entity, limit: int = 50, offset: int = 0
) -> list[tuple[int, int, str, str]]:
    """Current relation facts pointing at ``entity``, newest first from the
    ``offset``-th, as (fact id, subject id, subject name, predicate as written)."""
    return list(
        _current_facts(access)
        .filter(object=entity, kind=FactKind.RELATION)
        .order_by("-recorded_at", "-id")
        .values_list("pk", "subject_id", "subject__name", "raw_predicate")[offset : offset + limit]
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
