"""Write transactions that PostgreSQL may break, run again (docs/decisions/0119).

PostgreSQL breaks a lock cycle by aborting one of the transactions in it (``deadlock
detected``) and, under stricter isolation, refuses a transaction that could not be
serialized. Either way it rolls the transaction back as a whole and advises running it
again. Writers take entity rows in one order, so a cycle needs a path that does not (a
row found only after the first locks, an undo); the few that remain are run again here,
inside the request, a few times after a short jittered pause, and only then refused with
:class:`WriteContention` — 503 with ``Retry-After`` — never a 500.

A transaction inside a caller's transaction is not run again on its own: the abort undid
the caller's work too, so only the outermost one can repeat it.
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from psycopg.errors import DeadlockDetected, SerializationFailure

from memory.kernel.errors import ServiceUnavailable

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

# The first pause is at most this long, doubling with each attempt; jittered so that the
# transactions that met in a cycle do not meet again at once.
BACKOFF_SECONDS = 0.05
RETRY_AFTER_SECONDS = 1  # what a client is told to wait once the attempts are spent


class WriteContention(ServiceUnavailable):
    """Concurrent writes kept breaking this one; nothing of it was stored."""

    code = "write_contention"
    retry_after = RETRY_AFTER_SECONDS


def write_conflicted(exc: BaseException) -> bool:
    """Whether PostgreSQL rolled the transaction back for a deadlock or a serialization
    failure (Django's error carries psycopg's as its cause)."""
    return isinstance(exc, DatabaseError) and isinstance(
        exc.__cause__, DeadlockDetected | SerializationFailure
    )


def write_contention(exc: BaseException) -> WriteContention:
    """The refusal a face answers for such an error (when it reached it unretried)."""
    reason = "a deadlock" if isinstance(exc.__cause__, DeadlockDetected) else "a conflict"
    return WriteContention(
        f"concurrent writes to the same rows broke this write ({reason}); nothing of it "
        f"was stored: send it again in {RETRY_AFTER_SECONDS} s",
        details={"retry_after_seconds": RETRY_AFTER_SECONDS},
    )


def transaction_retried(work: Callable[[], T], *, what: str) -> T:
    """Run ``work`` in ``transaction.atomic()``; if PostgreSQL breaks the transaction
    (deadlock, serialization failure), run it again, up to ``MEMORY_WRITE_ATTEMPTS`` in
    all, then raise :class:`WriteContention`. Inside a caller's transaction it is a plain
    nested ``atomic`` (a savepoint): the caller's outermost block is the one to repeat."""
    if connection.in_atomic_block:
        with transaction.atomic():
            return work()
    attempts = max(1, int(settings.MEMORY_WRITE_ATTEMPTS))
    for attempt in range(1, attempts + 1):
        try:
            with transaction.atomic():
                return work()
        except DatabaseError as exc:
            if not write_conflicted(exc):
                raise
            if attempt == attempts:
                logger.warning("%s: broken %s times by concurrent writes; refused", what, attempt)
                raise write_contention(exc) from exc
            logger.info("%s: broken by concurrent writes (attempt %s), run again", what, attempt)
            time.sleep(random.uniform(0, BACKOFF_SECONDS * 2**attempt))
    raise AssertionError("unreachable: the last attempt returns or raises")


def write_transaction(fn: Callable[P, T]) -> Callable[P, T]:
    """``@transaction.atomic`` for a service a request calls: the same block, run again
    when PostgreSQL breaks it (see :func:`transaction_retried`)."""

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        return transaction_retried(lambda: fn(*args, **kwargs), what=fn.__qualname__)

    return run
