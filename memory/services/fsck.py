"""Consistency checks over a context, reported (never repaired silently)."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Exists, F, OuterRef, Q

from memory.domain.access import ContextAccess
from memory.kernel.errors import ValidationFailed
from memory.models import (
    Entity,
    Fact,
    FactStatus,
    FactTrust,
    Predicate,
    PredicateStatus,
    Role,
    fact_live_q,
)
from memory.selectors.duplicates import duplicate_cluster_page
from memory.services.duplicates.finder import duplicates_scan

CHECKS = ("duplicates", "orphans", "vocabulary", "validity")
SAMPLE = 20


def fsck_run(*, access: ContextAccess, checks: list[str]) -> dict[str, Any]:
    access.require_role(Role.CURATOR)
    unknown = sorted(set(checks) - set(CHECKS))
    if unknown or not checks:
        raise ValidationFailed(
            f"checks must be among {', '.join(CHECKS)}",
            code="invalid_checks",
            details={"unknown": unknown},
        )
    report: dict[str, Any] = {}
    if "duplicates" in checks:
        report["duplicates"] = _duplicates(access)
    if "orphans" in checks:
        report["orphans"] = _orphans(access)
    if "vocabulary" in checks:
        report["vocabulary"] = _vocabulary(access)
    if "validity" in checks:
        report["validity"] = _validity(access)
    return report


def _duplicates(access: ContextAccess) -> dict[str, Any]:
    scan = duplicates_scan(context=access.context)
    # Every open cluster is counted; only the best SAMPLE are loaded to be shown.
    clusters, total = duplicate_cluster_page(access=access, limit=SAMPLE)
    return {
        "entities_scanned": scan.entities,
        "candidate_pairs": scan.pairs,
        "new_pairs": scan.new,
        "seconds": scan.seconds,
        "by_method": scan.by_method,
        "clusters": total,
        "top": [
            {
                "members": [{"id": m.pk, "name": m.name, "type": m.type} for m in c.members],
                "score": c.score,
                "methods": c.methods,
            }
            for c in clusters
        ],
    }


def _orphans(access: ContextAccess) -> dict[str, Any]:
    facts = Fact.objects.filter(access.grants.read_q(), context=access.context)
    on_merged = facts.filter(
        Q(subject__merged_into__isnull=False) | Q(object__merged_into__isnull=False)
    )
    # An older value written after the current one is history: superseded by no fact,
    # it ended before it was recorded or before a later value of its slot began.
    later_in_slot = Fact.objects.filter(
        subject=OuterRef("subject"),
        predicate=OuterRef("predicate"),
        scope=OuterRef("scope"),
        valid_from__gt=OuterRef("valid_from"),
    ).exclude(status=FactStatus.RETRACTED)
    superseded_dangling = facts.filter(
        status=FactStatus.SUPERSEDED, superseded_by__isnull=True, single_valued=True
    ).exclude(Q(valid_until__lte=F("recorded_at")) | Q(Exists(later_in_slot)))
    lonely = (
        Entity.objects.filter(
            access.grants.read_q(), context=access.context, merged_into__isnull=True
        )
        .annotate(n=Count("facts_as_subject") + Count("facts_as_object"))
        .filter(n=0)
    )
    return {
        "facts_on_merged_entities": on_merged.count(),
        "facts_on_merged_entities_sample": list(on_merged.values_list("pk", flat=True)[:SAMPLE]),
        "superseded_without_successor": superseded_dangling.count(),
        "entities_without_facts": lonely.count(),
    }


def _validity(access: ContextAccess) -> dict[str, Any]:
    """No stored interval ends before it begins; a single-valued slot holds at most one
    current value (docs/decisions/0120)."""
    facts = Fact.objects.filter(access.grants.read_q(), context=access.context)
    inverted = facts.filter(valid_until__lt=F("valid_from"))
    crowded = (
        facts.filter(fact_live_q(), single_valued=True, trust=FactTrust.TRUSTED)
        .values("subject", "predicate", "scope")
        .annotate(n=Count("pk"))
        .filter(n__gt=1)
    )
    return {
        "inverted_intervals": inverted.count(),
        "inverted_intervals_sample": list(inverted.values_list("pk", flat=True)[:SAMPLE]),
        "slots_with_several_current_values": crowded.count(),
    }


def _vocabulary(access: ContextAccess) -> dict[str, Any]:
    facts = Fact.objects.filter(
        access.grants.read_q(), context=access.context, status=FactStatus.CURRENT
    )
    total = facts.count()
    registered = facts.filter(predicate__status=PredicateStatus.REGISTERED).count()
    observed = Predicate.objects.filter(context=access.context, status=PredicateStatus.OBSERVED)
    return {
        "current_facts": total,
        "registered_share": round(registered / total, 4) if total else 1.0,
        "observed_predicates": observed.count(),
        "observed_sample": list(observed.order_by("name").values_list("name", flat=True)[:SAMPLE]),
    }
