"""The embedding worker's task: ``@task`` wrappers and how writers queue them.

Writers do not queue per-row work. After a commit that left rows without a vector,
``embeddings_drain_enqueue`` queues one drain (unless one is already waiting), and the
drain (``memory.services.vectors.embeddings_drain``) embeds every waiting row of every
context in large batches. A drain yields the worker after ``DRAIN_SECONDS`` (queued
ingest runs go next) and queues its own continuation. While it works, a watchdog drain
waits ``WATCHDOG_SECONDS`` in the queue: if the worker is killed mid-drain, the
restarted worker runs the watchdog and carries on — no ``manage.py reembed`` needed.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django_tasks import task

DRAIN_SECONDS = 30.0
WATCHDOG_SECONDS = 120


@task()
def embeddings_drain_task() -> dict[str, Any]:
    from memory.services.vectors import embedding_backlog, embeddings_drain

    if not any(embedding_backlog().values()):
        return {"written": 0}
    _watchdog_ensure()
    report = embeddings_drain(seconds=DRAIN_SECONDS)
    if not report.finished and not report.skipped:
        embeddings_drain_task.enqueue()
    return {
        "written": report.written,
        "model_calls": report.model_calls,
        "seconds": round(report.seconds, 3),
        "finished": report.finished,
        "skipped": report.skipped,
    }


def _db_queue() -> bool:
    backend = str(settings.TASKS["default"]["BACKEND"])
    return backend.startswith("django_tasks_db.")


def _drains_waiting(*, later: bool) -> bool:
    """Whether a drain is queued to run now (or, with ``later``, a watchdog after now)."""
    from django_tasks_db.models import DBTaskResult, get_date_max

    queued = DBTaskResult.objects.filter(task_path=embeddings_drain_task.module_path)
    if later:  # "no run_after" is stored as the largest date
        return (
            queued.filter(status="READY", run_after__gt=timezone.now())
            .exclude(run_after=get_date_max())
            .exists()
        )
    return queued.ready().exists()


def _watchdog_ensure() -> None:
    if _db_queue() and _drains_waiting(later=True):
        return
    run_after = timezone.now() + dt.timedelta(seconds=WATCHDOG_SECONDS)
    embeddings_drain_task.using(run_after=run_after).enqueue()


def _enqueue_now() -> None:
    if _db_queue() and _drains_waiting(later=False):
        return
    embeddings_drain_task.enqueue()


def embeddings_drain_enqueue() -> None:
    """Queue a drain once the current transaction commits (nothing for a rollback)."""
    transaction.on_commit(_enqueue_now)
