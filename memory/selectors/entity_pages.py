"""What an entity's pages read beyond the entity itself: fact counts for a list page, the
timeline of replaced values, and the edges of its neighbourhood picture."""

from __future__ import annotations

from django.db.models import Count, QuerySet

from memory.domain.access import ContextAccess
from memory.models import Entity, Fact, FactKind, FactStatus
from memory.selectors.entities import entities_visible
from memory.selectors.facts import facts_visible


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
