"""Background work on the django-tasks database queue (``manage.py db_worker``)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.db import transaction
from django_tasks import task

from memory.search.tasks import embeddings_drain_enqueue

logger = logging.getLogger(__name__)

# Set inside ``entity_embeddings_collect``: the ids enqueue calls would have queued.
_collecting: ContextVar[list[int] | None] = ContextVar("entity_embeddings_collecting", default=None)


class WorkerLost(Exception):
    """Recorded on a task result whose worker died while running it (SIGKILL, a lost
    machine): django-tasks-db leaves such a result ``RUNNING`` for ever. Raised by no
    code: the executor's recovery records it (``services/executor.py``); it lives here so
    that the recorded exception path names the task module."""


def entity_embeddings_enqueue(entity_ids: list[int]) -> None:
    """Have these entities embedded once the current transaction commits (by the
    worker's drain, ``memory.search.tasks``; never for a rollback).

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
    """Collect the entity ids that services would queue for embedding, one task each,
    into the yielded list: a bulk writer (the entity import) embeds them itself, in
    batches. Ids of rows rolled back meanwhile may be in the list; computing skips them.
    """
    ids: list[int] = []
    token = _collecting.set(ids)
    try:
        yield ids
    finally:
        _collecting.reset(token)


@task()
def ingest_run_task(run_id: int) -> str:
    """Execute one ingest run (``memory.services.ingest.run_execute``); returns its outcome.

    Runs left ``running`` by a worker that died are failed first, so they can be retried.
    """
    # Imported here: the ingest services import this module (for the embedding task).
    from memory.services.ingest import run_execute, runs_recover_stale

    runs_recover_stale()
    return str(run_execute(run_id=run_id).outcome)


# Someone is watching an import's progress bar; embedding tasks can wait behind it.
IMPORT_PRIORITY = 10


@task(priority=IMPORT_PRIORITY)
def import_job_task(job_id: int) -> str:
    """Import one uploaded seeding file (``memory.services.import_jobs.import_job_execute``).

    Jobs left ``running`` by a worker that died are failed first, so they can be retried.
    """
    # Imported here: the import job services enqueue this task.
    from memory.services.import_jobs import import_job_execute, import_jobs_recover_stale

    import_jobs_recover_stale()
    return import_job_execute(job_id=job_id)


@task(priority=5)  # a curator waits on the page for it: before embedding work
def duplicates_scan_task(context_id: int) -> dict[str, object]:
    """Scan a context for duplicate entities (``duplicates_scan``) off the request path:
    at 100k entities the embedding neighbours alone take minutes. One scan per context
    at a time; a second request while one runs is answered by that one."""
    from memory.locks import DUPLICATE_SCAN_LOCK, executor_lock
    from memory.selectors.contexts import context_by_id
    from memory.services.duplicates import duplicates_scan

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


def duplicates_scan_enqueue(context_id: int) -> None:
    transaction.on_commit(lambda: duplicates_scan_task.enqueue(context_id))
