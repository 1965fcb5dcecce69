"""Background work on the django-tasks database queue (``manage.py db_worker``).

Each task is a thin wrapper that hands its work to a service. Services queue these tasks
by their dotted path through ``memory.infra.queueing`` and never import this module, so the
imports run one way: tasks → services (docs/decisions/0065).
"""

from __future__ import annotations

import logging
from typing import Any

from django_tasks import task

from memory.infra.locks import DUPLICATE_SCAN_LOCK, executor_lock
from memory.infra.queueing import (
    EMBEDDINGS_DRAIN_TASK,
    WorkerLost,  # noqa: F401  (task results failed earlier name it here)
    embeddings_watchdog_ensure,
    task_enqueue,
)
from memory.selectors.contexts import context_by_id
from memory.services.duplicates.finder import duplicates_refit, duplicates_scan
from memory.services.ingest.run import run_execute, runs_recover_stale
from memory.services.transfer.jobs import import_job_execute, import_jobs_recover_stale
from memory.services.vectors import embedding_backlog, embeddings_drain

logger = logging.getLogger(__name__)

# A drain yields the worker after this long (queued ingest runs go next) and queues its
# own continuation.
DRAIN_SECONDS = 30.0


@task()
def ingest_run_task(run_id: int) -> str:
    """Execute one ingest run (``memory.services.ingest.run.run_execute``); returns its outcome.

    Runs left ``running`` by a worker that died are failed first, so they can be retried.
    """
    runs_recover_stale()
    return str(run_execute(run_id=run_id).outcome)


# Someone is watching an import's progress bar; embedding tasks can wait behind it.
IMPORT_PRIORITY = 10


@task(priority=IMPORT_PRIORITY)
def import_job_task(job_id: int) -> str:
    """Import one uploaded file: a seeding file or a whole memory
    (``memory.services.transfer.jobs.import_job_execute``).

    Jobs left ``running`` by a worker that died are failed first, so they can be retried.
    """
    import_jobs_recover_stale()
    return import_job_execute(job_id=job_id)


@task(priority=5)  # a curator waits on the page for it: before embedding work
def duplicates_scan_task(context_id: int) -> dict[str, object]:
    """Scan a context for duplicate entities (``duplicates_scan``) off the request path:
    at 100k entities the embedding neighbours alone take minutes. One scan per context
    at a time; a second request while one runs is answered by that one."""
    with executor_lock(DUPLICATE_SCAN_LOCK, context_id) as held:
        if not held:
            return {"skipped": "a scan of this context is already running"}
        report = duplicates_scan(context=context_by_id(context_id=context_id))
    logger.info(
        "duplicates scan of context %s: %s entities, %s pairs (%s new) in %s s",
        context_id, report.entities, report.pairs, report.new, report.seconds,
    )  # fmt: skip
    return {"entities": report.entities, "pairs": report.pairs, "stored": report.stored,
            "new": report.new, "seconds": report.seconds}  # fmt: skip


@task()
def duplicates_refit_task(context_id: int) -> dict[str, object]:
    """Re-estimate a context's duplicate weights once it has doubled
    (``duplicates_refit``), queued by the check that found it due. Skipped while a scan
    of the context runs: the scan re-estimates on all its entities."""
    with executor_lock(DUPLICATE_SCAN_LOCK, context_id) as held:
        if not held:
            return {"skipped": "a scan of this context is running"}
        return {"refitted": duplicates_refit(context_id)}


@task()
def embeddings_drain_task() -> dict[str, Any]:
    """Embed the rows still without a vector (``memory.services.vectors.embeddings_drain``)
    for up to ``DRAIN_SECONDS``, then queue the rest as a continuation."""
    if not any(embedding_backlog().values()):
        return {"written": 0}
    embeddings_watchdog_ensure()
    report = embeddings_drain(seconds=DRAIN_SECONDS)
    if not report.finished and not report.skipped:
        task_enqueue(EMBEDDINGS_DRAIN_TASK)
    return {
        "written": report.written,
        "model_calls": report.model_calls,
        "seconds": round(report.seconds, 3),
        "finished": report.finished,
        "skipped": report.skipped,
    }
