"""Session-level PostgreSQL advisory locks that say "someone is executing this".

An executor holds ``(namespace, key)`` for as long as it works on a record; PostgreSQL
releases it when the executor's process or connection dies. So a record marked as
executing whose lock anyone can take has no executor left: recovery fails it with a
reason and its input is kept for a retry (``memory.services.executor``, for ingest runs
and import jobs alike).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from django.db import DatabaseError, connection

# Namespaces in use: 0x4D44_0002 usage compaction (per context), and:
RUN_LOCK = 0x4D44_0001  # (namespace, run id) while an ingest run executes
IMPORT_JOB_LOCK = 0x4D44_0003
DUPLICATE_SCAN_LOCK = 0x4D44_0004  # (namespace, context id): one scan per context at a time
EMBEDDING_DRAIN_LOCK = 0x4D44_0005  # (namespace, context id or 0): one embedding drain at a time


@contextlib.contextmanager
def executor_lock(
    namespace: int, key: int, *, take: Callable[[list[int]], bool] | None = None
) -> Iterator[bool]:
    """Try to take the lock; yields whether it is held, releases it on the way out.

    ``take``: the caller's own statement that tries the lock (``pg_try_advisory_lock``
    with the two arguments it is given) together with its first work, one round trip
    instead of two; it returns whether the lock was taken."""
    args = [namespace, key % 2**31]
    try:
        held = (take or _try_lock)(args)
    except BaseException:
        # The statement may have taken the lock before it failed (a session lock
        # outlives its statement): give it back, as the block's end would have.
        _unlock(args)
        raise
    try:
        yield held
    finally:
        if held:
            _unlock(args)


def _try_lock(args: list[int]) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", args)
        row = cursor.fetchone()
    return bool(row and row[0])


def _unlock(args: list[int]) -> None:
    # A dead connection has already released it; a lock not held is a no-op.
    with contextlib.suppress(DatabaseError), connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_unlock(%s, %s)", args)
