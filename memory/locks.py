"""Session-level PostgreSQL advisory locks that say "someone is executing this".

An executor holds ``(namespace, key)`` for as long as it works on a record; PostgreSQL
releases it when the executor's process or connection dies. So a record marked as
executing whose lock anyone can take has no executor left: recovery fails it with a
reason and its input is kept for a retry. (Ingest runs do the same with their own
lock in ``memory.services.ingest``.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.db import DatabaseError, connection

# Namespaces in use: 0x4D44_0001 ingest runs, 0x4D44_0002 usage compaction (per context).
IMPORT_JOB_LOCK = 0x4D44_0003
DUPLICATE_SCAN_LOCK = 0x4D44_0004  # (namespace, context id): one scan per context at a time
EMBEDDING_DRAIN_LOCK = 0x4D44_0005  # (namespace, context id or 0): one embedding drain at a time


@contextlib.contextmanager
def executor_lock(namespace: int, key: int) -> Iterator[bool]:
    """Try to take the lock; yields whether it is held, releases it on the way out."""
    args = [namespace, key % 2**31]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", args)
        row = cursor.fetchone()
    held = bool(row and row[0])
    try:
        yield held
    finally:
        if held:
            # A dead connection has already released it.
            with contextlib.suppress(DatabaseError), connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", args)
