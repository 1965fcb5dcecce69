"""The predicate registry as its pages and the API read it: rows with their usage counts
(one definition for both faces), the registry file export, a predicate's facts, and what
the registry screens need beyond the rows."""

from __future__ import annotations

from typing import Any

from django.db.models import Count
from django.utils import timezone

from memory.domain.access import ContextAccess
from memory.models import AuditEvent, Context, Entity, Fact, FactStatus, Predicate, PredicateStatus
from memory.models.predicate import EDITABLE_FIELDS, PredicateAlias
from memory.selectors.facts import facts_visible
from memory.selectors.predicates import predicate_list
from memory.selectors.usage import predicate_usage

REGISTRY_FORMAT = "memory-desk-registry"
REGISTRY_VERSION = 1


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
    predicates_usage_attach(access=access, predicates=predicates)
    return predicates


def predicates_usage_attach(*, access: ContextAccess, predicates: list[Predicate]) -> None:
    """Set each predicate's ``fact_count``: observations of the caller's visible current
    facts, from the usage log (one query). The one definition of a predicate's count, for
    the registry page and the API's predicates alike."""
    usage = predicate_usage(access=access, predicate_ids=[p.pk for p in predicates])
    for predicate in predicates:
        use = usage.get(predicate.pk)
        predicate.fact_count = use.live if use else 0  # type: ignore[attr-defined]


def registry_row(*, access: ContextAccess, predicate: Predicate) -> Predicate:
    """One registry row again, after an alias or flag change (queries: it; its usage)."""
    return registry_rows(access=access, status=None, ids=[predicate.pk])[0]


def registry_export_data(*, context: Context) -> dict[str, Any]:
    """The registered predicates with every editable field and their aliases, in the shape
    ``memory.services.registry.file.registry_file_parse`` reads back (two queries)."""
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


def predicate_aliases(*, predicate: Predicate) -> list[PredicateAlias]:
    """The predicate's aliases by name; ``inverse`` marks one that reads it backwards."""
    return list(predicate.alias_set.order_by("alias"))


def predicate_fact_count(*, access: ContextAccess, predicate: Predicate) -> int:
    """Observations of the visible facts stored under ``predicate`` (not retracted)."""
    use = predicate_usage(access=access, predicate_ids=[predicate.pk]).get(predicate.pk)
    return use.used if use else 0


def subjects_with_several_values(*, access: ContextAccess, predicate: Predicate) -> int:
    """How many subjects (among the facts the caller can read) hold more than one current
    value of ``predicate``: what turning single-valued on leaves for a curator to settle,
    since the flag rules new writes and supersedes nothing already stored."""
    return (
        Fact.objects.filter(
            access.grants.read_q(),
            context=access.context,
            predicate=predicate,
            status=FactStatus.CURRENT,
        )
        .values("subject_id")
        .annotate(values=Count("id"))
        .filter(values__gt=1)
        .count()
    )


def predicate_last_update(*, access: ContextAccess, predicate: Predicate) -> AuditEvent | None:
    """The newest edit of ``predicate`` (its audit event carries the undo)."""
    return (
        AuditEvent.objects.filter(
            context=access.context, action="predicate_update", target_id=predicate.name
        )
        .order_by("-pk")
        .first()
    )


def entity_names(*, access: ContextAccess, entity_ids: list[int]) -> dict[int, str]:
    """Names of the readable entities among ``entity_ids`` (one query), for reports that
    store ids."""
    if not entity_ids:
        return {}
    return dict(
        Entity.objects.filter(
            access.grants.read_q(), context=access.context, pk__in=entity_ids
        ).values_list("pk", "name")
    )
