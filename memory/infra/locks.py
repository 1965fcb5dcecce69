"""Locks: rows locked in one order, and session-level advisory locks.

**Row locks in one order** (docs/decisions/0119): every writer that locks rows of a table
to serialize its writes — entity rows above all: fact writes, merges, imports, the
embedding drain — takes them with :func:`rows_lock_ordered`, in ascending id, in one
statement. Two writers that each lock in this order can wait for each other but never in
a cycle. A writer that must not wait at all (the worker's drain) skips rows others hold.

**Advisory locks** say "someone is executing this". An executor holds ``(namespace, key)``
for as long as it works on a record; PostgreSQL releases it when the executor's process
or connection dies. So a record marked as executing whose lock anyone can take has no
executor left: recovery fails it with a reason and its input is kept for a retry
(``memory.services.executor``, for ingest runs and import jobs alike).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Literal

from django.db import DatabaseError, connection

from memory.infra.pg_arrays import int_array_literal

# FOR NO KEY UPDATE for writers that change rows but never their id, which is what a
# foreign key points at: a row that only points at a locked one is not held up
# (docs/decisions/0058). FOR UPDATE for deletes. FOR KEY SHARE keeps a row from being
# deleted while a row pointing at it is written.
LockStrength = Literal["NO KEY UPDATE", "UPDATE", "KEY SHARE"]


def rows_lock_ordered(
    table: str,
    ids: Iterable[int],
    *,
    columns: str = "id",
    strength: LockStrength = "NO KEY UPDATE",
    skip_locked: bool = False,
) -> list[tuple[Any, ...]]:
    """Lock the rows of ``table`` with these ids in ascending id order and return their
    ``columns`` (ids that do not exist are left out). ``skip_locked``: rows another
    transaction holds are left out instead of waited for."""
    wanted = sorted(set(ids))
    if not wanted:
        return []
    skip = " SKIP LOCKED" if skip_locked else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {columns} FROM {table} WHERE id = ANY(%s::bigint[]) "  # noqa: S608
            f"ORDER BY id FOR {strength}{skip}",
            [int_array_literal(wanted)],
        )
        return list(cursor.fetchall())


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
