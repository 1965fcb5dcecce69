"""Item lifetimes: reads refresh them, the task worker sweeps what has expired.

An item written with a ``ttl`` expires that many minutes after its last write or
refreshing read. Reads never return an expired item whether or not the sweep has run;
the sweep only reclaims the rows.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection, transaction

from memory.infra.queueing import items_sweep_enqueue
from memory.services.items.writes import items_delete_ids

SWEEP_BATCH = 1000


def items_touch(*, item_ids: Sequence[int]) -> None:
    """Start the lifetime of these items again (a refreshing read). An item that has
    already expired stays expired."""
    if not item_ids:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memory_item SET expires_at = now() + make_interval(secs => ttl_minutes * 60) "
            "WHERE id = ANY(%s) AND ttl_minutes IS NOT NULL AND expires_at > now()",
            [sorted(item_ids)],
        )


def items_sweep() -> dict[str, object]:
    """Delete every expired item, a batch at a time; queue the next sweep for the
    earliest expiry still ahead, if any."""
    deleted = 0
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "SELECT id FROM memory_item WHERE expires_at IS NOT NULL AND expires_at <= now() "
                "ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED",
                [SWEEP_BATCH],
            )
            ids = [row[0] for row in cursor.fetchall()]
            items_delete_ids(ids)
        deleted += len(ids)
        if len(ids) < SWEEP_BATCH:
            break
    with connection.cursor() as cursor:
        cursor.execute("SELECT min(expires_at) FROM memory_item WHERE expires_at IS NOT NULL")
        (next_expiry,) = cursor.fetchone()
    if next_expiry is not None:
        # Queued by a running sweep: the check for a waiting one does not see itself.
        items_sweep_enqueue(run_after=next_expiry)
    return {"deleted": deleted, "next": next_expiry.isoformat() if next_expiry else None}
