"""How much each predicate is used, read from the usage log instead of counting facts.

``PredicateUsage`` holds deltas per (context, scope, kind, predicate) that statement-level
triggers on ``memory_fact`` append for every writer, so summing a context's rows (a few
thousand, however many facts) gives exact per-predicate figures in milliseconds where a
``COUNT`` over a million facts takes seconds. The figures count *observations*: a fact
re-observed three times counts three (``observed_count``), which is what "how much is
this predicate used" means; pages that show them say so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from django.db.models import Max, Sum

from memory.domain.access import ContextAccess
from memory.infra.replicas import read_connection
from memory.models import Context, Fact, FactStatus, FactTrust, PredicateUsage


@dataclass(frozen=True)
class PredicateUse:
    live: int = 0  # observations of current facts the caller may read
    used: int = 0  # ... of facts not retracted the caller may read
    used_anywhere: int = 0  # ... of facts not retracted, in any scope
    last_used_at: datetime | None = None  # latest sighting the caller may read


def predicate_usage(
    *, access: ContextAccess, predicate_ids: list[int] | None = None
) -> dict[int, PredicateUse]:
    """Per predicate id, its use within the caller's read grants (one query)."""
    rows = PredicateUsage.objects.filter(context=access.context)
    if predicate_ids is not None:
        rows = rows.filter(predicate_id__in=predicate_ids)
    if not access.grants.items:
        return {}
    # An empty Q is a grant on "*": no filter at all (Django cannot compile an empty one).
    visible = access.grants.read_q() or None
    totals = rows.values("predicate_id").annotate(
        live_sum=Sum("live", filter=visible),
        used_sum=Sum("used", filter=visible),
        used_all=Sum("used"),
        last=Max("last_used_at", filter=visible),
    )
    return {
        row["predicate_id"]: PredicateUse(
            live=row["live_sum"] or 0,
            used=row["used_sum"] or 0,
            used_anywhere=row["used_all"] or 0,
            last_used_at=row["last"],
        )
        for row in totals
    }


@dataclass(frozen=True)
class RejectedUse:
    """Observations of rejected claims (not retracted): the caller's, and in any scope."""

    used: int = 0
    used_anywhere: int = 0


def rejected_claims_usage(
    *, access: ContextAccess, predicate_ids: list[int]
) -> dict[int, RejectedUse]:
    """Per predicate id, what its rejected claims count in ``predicate_usage`` (one
    query through the partial index ``fact_rejected``: curators reject few claims)."""
    if not predicate_ids or not access.grants.items:
        return {}
    visible = access.grants.read_q() or None
    rows = (
        Fact.objects.filter(
            context=access.context, trust=FactTrust.REJECTED, predicate_id__in=predicate_ids
        )
        .exclude(status=FactStatus.RETRACTED)
        .values("predicate_id")
        .annotate(seen=Sum("observed_count", filter=visible), anywhere=Sum("observed_count"))
    )
    return {
        row["predicate_id"]: RejectedUse(used=row["seen"] or 0, used_anywhere=row["anywhere"])
        for row in rows
    }


def drift_use(use: PredicateUse | None, rejected: RejectedUse | None) -> PredicateUse | None:
    """An observed predicate's use with its rejected claims set aside: a claim curators
    rejected is no use of a word (the prompt already leaves such words out)."""
    if use is None or rejected is None:
        return use
    return replace(
        use, used=use.used - rejected.used, used_anywhere=use.used_anywhere - rejected.used_anywhere
    )


def drift_is_visible(use: PredicateUse | None, rejected: RejectedUse | None = None) -> bool:
    """The drift rule: an observed predicate is listed when the caller can see some use
    of it by a claim not rejected, or when it has no facts anywhere (refused in strict
    mode: registry-wide); not when rejected claims are all that use it."""
    if rejected is not None and rejected.used_anywhere:
        kept = drift_use(use, rejected)
        return kept is not None and kept.used > 0
    return use is None or use.used > 0 or use.used_anywhere == 0


# Distinct raw forms per registered predicate: a skip scan of fact_predicate (context,
# predicate, status, raw_predicate), one index probe per form, not a scan of the facts.
_FORMS_SQL = """
SELECT p.id, (
    WITH RECURSIVE forms(raw) AS (
        (SELECT f.raw_predicate FROM memory_fact f
         WHERE f.context_id = p.context_id AND f.predicate_id = p.id AND f.status = 'current'
         ORDER BY f.raw_predicate LIMIT 1)
        UNION ALL
        SELECT (SELECT f.raw_predicate FROM memory_fact f
                WHERE f.context_id = p.context_id AND f.predicate_id = p.id
                  AND f.status = 'current' AND f.raw_predicate > forms.raw
                ORDER BY f.raw_predicate LIMIT 1)
        FROM forms WHERE forms.raw IS NOT NULL
    )
    SELECT count(raw) FROM forms
)
FROM memory_predicate p
WHERE p.context_id = %s AND p.status = 'registered'
"""


def predicate_forms(*, context: Context) -> dict[int, int]:
    """How many distinct raw forms the current facts of each registered predicate were
    written in (``worksAt``, ``works_at``…), context-wide like the registry itself."""
    with read_connection().cursor() as cursor:
        cursor.execute(_FORMS_SQL, [context.pk])
        return {pk: forms for pk, forms in cursor.fetchall() if forms}
