"""Upkeep of the predicate usage log that the vocabulary gatherer reads.

Triggers on ``memory_fact`` append one delta row per (context, scope, kind, predicate) and
statement (see ``PredicateUsage``). Folding the deltas of a scope into one row per group
keeps the gatherer's sums short; it is safe next to concurrent writers because it only
deletes and re-inserts the rows its own snapshot saw.
"""

from __future__ import annotations

from django.db import connection, transaction

from memory.models import Context

# Fold a scope's deltas once they outnumber its groups by this much.
COMPACT_SLACK = 200
_LOCK_NAMESPACE = 0x4D44_0002  # pg_advisory_xact_lock(namespace, context id)


def vocabulary_usage_compact(*, context: Context, scopes: list[str], force: bool = False) -> int:
    """Fold the usage deltas of ``scopes`` (all of them when ``force``, else only the
    scopes with more than COMPACT_SLACK surplus rows). Returns the rows removed."""
    if not scopes:
        return 0
    with transaction.atomic(), connection.cursor() as cursor:
        # One folder per context at a time; another one running means ours is not needed.
        cursor.execute(
            "SELECT pg_try_advisory_xact_lock(%s, %s)", [_LOCK_NAMESPACE, context.pk % 2**31]
        )
        row = cursor.fetchone()
        if not row or not row[0]:
            return 0
        if not force:
            cursor.execute(
                """
                SELECT scope FROM memory_predicateusage
                WHERE context_id = %s AND scope = ANY(%s)
                GROUP BY scope
                HAVING count(*) - count(DISTINCT (kind, predicate_id)) > %s
                """,
                [context.pk, scopes, COMPACT_SLACK],
            )
            scopes = [r[0] for r in cursor.fetchall()]
            if not scopes:
                return 0
        cursor.execute(
            """
            WITH gone AS (
                DELETE FROM memory_predicateusage
                WHERE context_id = %s AND scope = ANY(%s)
                RETURNING context_id, scope, kind, predicate_id, used, live, last_used_at
            ), folded AS (
                INSERT INTO memory_predicateusage
                    (context_id, scope, kind, predicate_id, used, live, last_used_at)
                SELECT context_id, scope, kind, predicate_id, sum(used), sum(live),
                       max(last_used_at)
                FROM gone
                GROUP BY context_id, scope, kind, predicate_id
                HAVING sum(used) <> 0 OR sum(live) <> 0
                RETURNING 1
            )
            SELECT (SELECT count(*) FROM gone) - (SELECT count(*) FROM folded)
            """,
            [context.pk, scopes],
        )
        removed = cursor.fetchone()
    return int(removed[0]) if removed else 0
