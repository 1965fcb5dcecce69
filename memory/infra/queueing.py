"""How services queue background work, without importing the task modules.

The tasks (``memory/tasks.py``) call services; services queue tasks. So that the import
graph keeps one direction (tasks → services → this module), a service names a task by
its dotted path and this module looks it up when the work is queued
(docs/decisions/0065). Every path below is checked to resolve to a task by the tests.

Writers do not queue per-row embedding work. After a commit that left rows without a
vector, ``embeddings_drain_enqueue`` queues one drain (unless one is already waiting), and
the drain (``memory.services.vectors.embeddings_drain``) embeds every waiting row of every
context in large batches. While it works, a watchdog drain waits ``WATCHDOG_SECONDS`` in
the queue: if the worker is killed mid-drain, the restarted worker runs the watchdog and
carries on — no ``manage.py reembed`` needed.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string
from django_tasks import TaskResult
from django_tasks.base import Task

INGEST_RUN_TASK = "memory.tasks.ingest_run_task"
IMPORT_JOB_TASK = "memory.tasks.import_job_task"
DUPLICATES_SCAN_TASK = "memory.tasks.duplicates_scan_task"
EMBEDDINGS_DRAIN_TASK = "memory.tasks.embeddings_drain_task"
DUPLICATES_REFIT_TASK = "memory.tasks.duplicates_refit_task"
ITEMS_SWEEP_TASK = "memory.tasks.items_sweep_task"
TASK_PATHS = (
    INGEST_RUN_TASK,
    IMPORT_JOB_TASK,
    DUPLICATES_SCAN_TASK,
    EMBEDDINGS_DRAIN_TASK,
    DUPLICATES_REFIT_TASK,
    ITEMS_SWEEP_TASK,
)

WATCHDOG_SECONDS = 120

# Set inside ``entity_embeddings_collect``: the ids enqueue calls would have queued.
_collecting: ContextVar[list[int] | None] = ContextVar("entity_embeddings_collecting", default=None)


class WorkerLost(Exception):
    """Recorded on a task result whose worker died while running it (SIGKILL, a lost
    machine): django-tasks-db leaves such a result ``RUNNING`` for ever. Raised by no
    code: the executor's recovery records it (``services/executor.py``)."""


def queued_task(path: str) -> Task[Any, Any]:
    """The task object at ``path`` (one of the ``*_TASK`` names above)."""
    task: Task[Any, Any] = import_string(path)
    return task


def task_enqueue(path: str, *args: Any) -> TaskResult[Any]:
    """Queue the task at ``path`` now (the caller is past its commit)."""
    return queued_task(path).enqueue(*args)


def task_enqueue_on_commit(path: str, *args: Any) -> None:
    """Queue the task at ``path`` once the current transaction commits (never for a
    rollback)."""
    transaction.on_commit(lambda: task_enqueue(path, *args))


def _db_queue() -> bool:
    backend = str(settings.TASKS["default"]["BACKEND"])
    return backend.startswith("django_tasks_db.")


def _enqueue_unless_waiting(path: str, *args: Any) -> None:
    """Queue the task at ``path`` now, unless the database queue already holds one with
    the same arguments ready to run."""
    if _db_queue() and _waiting_in_db_queue(path, list(args)):
        return
    task_enqueue(path, *args)


def _waiting_in_db_queue(path: str, args: list[Any]) -> bool:
    """Whether the database queue holds a task at ``path`` with ``args`` ready to run
    (``DBTaskResult.objects.ready()``'s condition). One plain statement: every write
    asks after its commit, and compiling the queryset cost more than running it."""
    from django.db import connection
    from django_tasks_db.models import DBTaskResult, get_date_max

    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT EXISTS (SELECT 1 FROM {DBTaskResult._meta.db_table} "  # noqa: S608
            "WHERE task_path = %s AND status = 'READY' AND args_kwargs -> 'args' = %s::jsonb "
            "AND (run_after = %s OR run_after <= %s))",
            [path, json.dumps(args), get_date_max(), timezone.now()],
        )
        row = cursor.fetchone()
    return bool(row[0])


def _enqueue_once_on_commit(path: str, *args: Any) -> None:
    """Queue the task at ``path`` once the current transaction commits (nothing for a
    rollback), unless one with the same arguments is waiting by then.

    Once per transaction: the queue look-up is a statement, and a write may ask from
    several writers. A hook already registered stands for this one, because Django drops
    a hook only with a savepoint rolled back that is still open here, which would drop
    this one's too."""
    connection = transaction.get_connection()
    if connection.in_atomic_block and any(
        isinstance(hook[1], partial)
        and hook[1].func is _enqueue_unless_waiting
        and hook[1].args == (path, *args)
        for hook in connection.run_on_commit
    ):
        return
    transaction.on_commit(partial(_enqueue_unless_waiting, path, *args))


def duplicates_refit_enqueue(context_id: int) -> None:
    """Queue a re-estimate of the context's duplicate weights once the current
    transaction commits, unless one is already queued: every check finds it due until it
    has run."""
    _enqueue_once_on_commit(DUPLICATES_REFIT_TASK, context_id)


def _sweep_waiting() -> bool:
    from django_tasks_db.models import DBTaskResult

    return DBTaskResult.objects.filter(task_path=ITEMS_SWEEP_TASK, status="READY").exists()


def items_sweep_enqueue(*, run_after: dt.datetime) -> None:
    """Have the task worker delete expired items at ``run_after`` (after the current
    transaction commits), unless a sweep is already waiting: each sweep queues the next
    one for the earliest expiry left. Only on the database queue: a backend that runs
    tasks at once cannot wait for an expiry."""
    if not _db_queue():
        return

    def enqueue() -> None:
        if not _sweep_waiting():
            queued_task(ITEMS_SWEEP_TASK).using(run_after=run_after).enqueue()

    transaction.on_commit(enqueue)


# --- the embedding drain -------------------------------------------------------------------


def _watchdog_waiting() -> bool:
    """Whether a drain waits in the queue to run after now (a watchdog)."""
    from django_tasks_db.models import DBTaskResult, get_date_max

    # "no run_after" is stored as the largest date
    return (
        DBTaskResult.objects.filter(
            task_path=EMBEDDINGS_DRAIN_TASK, status="READY", run_after__gt=timezone.now()
        )
        .exclude(run_after=get_date_max())
        .exists()
    )


def embeddings_watchdog_ensure() -> None:
    """Make sure a drain waits ``WATCHDOG_SECONDS`` in the queue (called by a drain that
    starts with work to do)."""
    if _db_queue() and _watchdog_waiting():
        return
    run_after = timezone.now() + dt.timedelta(seconds=WATCHDOG_SECONDS)
    queued_task(EMBEDDINGS_DRAIN_TASK).using(run_after=run_after).enqueue()


def embeddings_drain_enqueue() -> None:
    """Queue a drain once the current transaction commits (nothing for a rollback),
    unless one is waiting to run by then."""
    _enqueue_once_on_commit(EMBEDDINGS_DRAIN_TASK)


def entity_embeddings_enqueue(entity_ids: list[int]) -> None:
    """Have these entities embedded once the current transaction commits (by the
    worker's drain; never for a rollback).

    Inside ``entity_embeddings_collect`` the ids are collected for the caller instead.
    """
    ids = list(dict.fromkeys(entity_ids))
    collecting = _collecting.get()
    if collecting is not None:
        collecting.extend(ids)
    elif ids:
        embeddings_drain_enqueue()


@contextmanager
def entity_embeddings_collect() -> Iterator[list[int]]:
    """Collect the entity ids that services would queue for embedding into the yielded
    list: a bulk writer (the entity import) embeds them itself, in batches. Ids of rows
    rolled back meanwhile may be in the list; computing skips them.
    """
    ids: list[int] = []
    token = _collecting.set(ids)
    try:
        yield ids
    finally:
        _collecting.reset(token)
