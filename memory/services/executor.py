"""One executor lifecycle for background records (ingest runs, entity import jobs):
claim, lock, recover stale, retry.

- *claim*: the executor takes the record's session advisory lock (``memory.infra.locks``) and
  moves it from pending to running in one conditional UPDATE, so a second delivery of the
  task finds it claimed and does nothing;
- *lock*: it holds that lock for as long as it works; PostgreSQL releases it when the
  executor's process or connection dies;
- *recover stale*: a record marked running whose lock anyone can take has no executor
  left: it is failed with a reason (its input kept), and the dead worker's task result too;
- *retry*: only a failed record is retried, as a new record (``retry_of``) with its input.

Each kind of record states its fields once in a ``Lifecycle``; this module does the rest.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, models
from django.utils import timezone
from django_tasks import TaskResultStatus

from memory.infra.locks import executor_lock
from memory.infra.pg_rows import instance_select
from memory.infra.queueing import WorkerLost
from memory.kernel.errors import Conflict


@dataclass(frozen=True)
class Lifecycle:
    model: type[models.Model]
    lock_namespace: int
    state_field: str  # "outcome" on runs, "status" on import jobs
    pending: str
    running: str
    failed: str
    task_path: str  # the record's task (memory.infra.queueing's name for it)
    noun: str  # "run", "import": for the retry refusal
    not_failed_code: str
    counted_on_claim: tuple[str, ...] = ()  # integer columns each claim adds one to
    lost_fields: dict[str, Any] = field(default_factory=dict)  # more fields when lost


def executor_identity() -> str:
    """host:pid of this process, stored on what it executes (for people; liveness is
    judged from the advisory lock, never from this)."""
    return f"{socket.gethostname()[:80]}:{os.getpid()}"


@dataclass(frozen=True)
class Claim:
    """Whether this process executes the record and, when it does, the record as the
    claim left it (its ``related`` foreign keys loaded), read by the claim itself."""

    claimed: bool
    record: Any = None


@contextmanager
def executor_claim(
    lifecycle: Lifecycle, pk: int, *, related: tuple[str, ...] = ()
) -> Iterator[Claim]:
    """Lock and claim record ``pk``; yields the ``Claim``. The lock is held until the
    block ends, so the executor must work inside it."""
    claim = Claim(False)

    def lock_and_claim(lock: list[int]) -> bool:
        nonlocal claim
        held, claim = _lock_and_claim(lifecycle, pk, lock, related)
        return held

    with executor_lock(lifecycle.lock_namespace, pk, take=lock_and_claim) as held:
        yield claim if held else Claim(False)


def _lock_and_claim(
    lifecycle: Lifecycle, pk: int, lock: list[int], related: tuple[str, ...]
) -> tuple[bool, Claim]:
    """Try the record's lock and, only if it is taken, move the record from pending to
    running: whether the lock was taken, and the claim (with the record as the claim
    left it). One plain statement (every run is claimed): the lock is tried once, in a
    CTE the claim reads, and the claimed row comes back from the UPDATE with the rows it
    points at joined, so the executor needs no read of its own."""
    meta = lifecycle.model._meta
    state = meta.get_field(lifecycle.state_field).column  # type: ignore[union-attr]
    counted = "".join(f", {c} = {c} + 1" for c in lifecycle.counted_on_claim)
    select = instance_select(lifecycle.model, related)
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH lock AS (SELECT pg_try_advisory_lock(%s, %s) AS held), claimed AS ("  # noqa: S608  (names from the model)
            f" UPDATE {meta.db_table} SET {state} = %s, started_at = %s, worker = %s{counted}"
            f" FROM lock WHERE lock.held AND {meta.pk.column} = %s AND {state} = %s"
            f" RETURNING {meta.db_table}.*"
            f") SELECT lock.held, {select.columns} FROM lock"
            f" LEFT JOIN claimed t0 ON true {select.joins}",
            [*lock, lifecycle.running, timezone.now(), executor_identity(), pk, lifecycle.pending],
        )
        held, *row = cursor.fetchone()
    record = select.build(row)  # None when nothing was claimed (the join found no row)
    return bool(held), Claim(record is not None, record)


def executor_recover_stale(
    lifecycle: Lifecycle,
    running: models.QuerySet[Any],
    *,
    reason: Callable[[dict[str, Any]], str],
    fields: tuple[str, ...] = ("worker",),
) -> int:
    """Fail the records of ``running`` left running by an executor that died; return how
    many. ``reason`` words the error from each record's ``fields``."""
    state = lifecycle.state_field
    manager = lifecycle.model._default_manager
    recovered = 0
    for row in running.filter(**{state: lifecycle.running}).values("pk", *fields):
        with executor_lock(lifecycle.lock_namespace, row["pk"]) as held:
            if not held:
                continue  # alive: its executor holds the lock
            error = reason(row)
            failed = manager.filter(pk=row["pk"], **{state: lifecycle.running}).update(
                **{state: lifecycle.failed},
                finished_at=timezone.now(),
                error=error,
                **lifecycle.lost_fields,
            )
            if failed:  # and its task result, instead of "running" for ever
                _task_results_fail_lost(
                    task_path=lifecycle.task_path, args=[row["pk"]], reason=error
                )
            recovered += failed
    return recovered


def executor_retry_check(
    lifecycle: Lifecycle, record: models.Model, *, recover: Callable[[list[int]], int]
) -> None:
    """Refuse (409) to retry a record that has not failed, after ``recover`` has failed it
    if its executor died."""
    recover([record.pk])
    record.refresh_from_db()
    state = getattr(record, lifecycle.state_field)
    if state != lifecycle.failed:
        raise Conflict(
            f"{lifecycle.noun} {record.pk} is {state}; only failed {lifecycle.noun}s can be "
            "retried",
            code=lifecycle.not_failed_code,
        )


def _task_results_fail_lost(*, task_path: str, args: list[Any], reason: str) -> int:
    """Mark failed the ``RUNNING`` results of the task at ``task_path`` called with
    ``args`` — for a caller that has just proved their executor dead (its advisory lock
    was free) — through the library's own ``set_failed``: status, finish time, exception
    path and text. Returns how many."""
    from django_tasks_db.models import DBTaskResult

    lost = DBTaskResult.objects.filter(
        task_path=task_path,
        status=TaskResultStatus.RUNNING,
        args_kwargs__args=args,
    )
    count = 0
    for result in lost:
        result.set_failed(WorkerLost(reason))
        count += 1
    return count
