"""Entity import jobs: a stored upload (CSV/JSONL seeding file), run by a task that
reports its progress, under the executor lifecycle (services/executor.py)."""

from __future__ import annotations

import logging
import time
from dataclasses import asdict
from typing import Any

from django.db import transaction
from django.utils import timezone

from memory.domain.access import ContextAccess, context_access_resolve
from memory.infra.locks import IMPORT_JOB_LOCK
from memory.infra.queueing import IMPORT_JOB_TASK, task_enqueue
from memory.kernel.errors import DomainError
from memory.models import MEMORY_IMPORT_FORMATS, Context, ImportJob, ImportJobStatus, Role
from memory.selectors.import_jobs import import_job_get
from memory.services.executor import (
    Lifecycle,
    executor_claim,
    executor_recover_stale,
    executor_retry_check,
)
from memory.services.transfer.seeding import ImportFormat, entities_import

logger = logging.getLogger(__name__)

PROGRESS_INTERVAL_SECONDS = 0.25
IMPORT_JOB_LIFECYCLE = Lifecycle(
    model=ImportJob,
    lock_namespace=IMPORT_JOB_LOCK,
    state_field="status",
    pending=ImportJobStatus.PENDING,
    running=ImportJobStatus.RUNNING,
    failed=ImportJobStatus.FAILED,
    task_path=IMPORT_JOB_TASK,
    noun="import",
    not_failed_code="import_not_failed",
)


@transaction.atomic
def import_job_create(
    *,
    access: ContextAccess,
    content: str,
    filename: str = "",
    format: ImportFormat | None = None,
    scope_default: str = "",
) -> ImportJob:
    """Keep an uploaded seeding file and queue its import (admin). The task starts once
    this transaction commits."""
    access.require_role(Role.ADMIN)
    job = ImportJob.objects.create(
        context=access.context,
        created_by=access.user if getattr(access.user, "is_authenticated", False) else None,
        filename=filename[:255],
        format=format or "",
        scope_default=scope_default,
        content=content,
        size_bytes=len(content.encode()),
    )
    transaction.on_commit(lambda: _enqueue(job.pk))
    return job


def _enqueue(job_id: int) -> None:
    result = task_enqueue(IMPORT_JOB_TASK, job_id)
    ImportJob.objects.filter(pk=job_id).update(task_id=str(result.id)[:64])


class _ProgressWriter:
    """``on_progress`` for entities_import: writes done/total to the job row at most a few
    times a second (and always for the first and last row), each write its own commit."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        self.written_at: float | None = None

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        due = self.written_at is None or now - self.written_at >= PROGRESS_INTERVAL_SECONDS
        if due or done == total:
            ImportJob.objects.filter(pk=self.job_id).update(done=done, total=total)
            self.written_at = now


def import_job_execute(*, job_id: int) -> str:
    """Run a pending job once (a second delivery of the task finds it claimed); returns
    the job's final status. The uploader's access is checked again now, not at upload.

    The executor holds the job's advisory lock throughout, so a job left ``running`` by a
    worker that died can be told from one still importing (``import_jobs_recover_stale``).
    """
    with executor_claim(IMPORT_JOB_LIFECYCLE, job_id, related=("context", "created_by")) as claim:
        if not claim.claimed:  # another worker is importing it, or it is done
            return str(ImportJob.objects.values_list("status", flat=True).get(pk=job_id))
        return _import(claim.record)


def _import(job: ImportJob) -> str:
    if job.created_by is None:
        return _fail(job, "the user who uploaded this file no longer exists")
    if job.imports_a_memory:
        from memory.services.transfer.import_jobs import memory_import_job_run

        return memory_import_job_run(job, progress=_ProgressWriter(job.pk), fail=_fail)
    try:
        access = context_access_resolve(user=job.created_by, slug=job.context.slug)
        report = entities_import(
            access=access,
            content=job.content,
            format=job.format or None,  # type: ignore[arg-type]
            scope_default=job.scope_default or None,
            seeded=True,
            on_progress=_ProgressWriter(job.pk),
            embed_now=True,  # this is the worker: embed each batch rather than queue it
        )
    except DomainError as exc:
        return _fail(job, exc.message)
    except Exception:
        logger.exception("import job %s stopped", job.pk)
        _fail(job, "the import stopped on an internal error; the file is kept on this job")
        raise
    ImportJob.objects.filter(pk=job.pk).update(
        status=ImportJobStatus.SUCCEEDED,
        done=report.total,
        total=report.total,
        created_count=report.created,
        matched_count=report.matched,
        failed_count=report.failed,
        report={
            "format": report.format,
            "notes": report.notes,
            "rows": [asdict(row) for row in report.rows],
        },
        finished_at=timezone.now(),
    )
    return ImportJobStatus.SUCCEEDED


def import_jobs_recover_stale(
    *, context: Context | None = None, job_ids: list[int] | None = None
) -> int:
    """Fail the jobs left ``running`` by a worker that died; return how many.

    A running job whose advisory lock we can take has no executor. Its file stays on the
    job for a retry; the batches it committed stay too (retrying matches those rows
    instead of duplicating them). The dead worker's task result is failed too. Called
    when a worker picks up an import task, when a job or the seeding page is looked at,
    and before a retry.
    """
    running = ImportJob.objects.all()
    if context is not None:
        running = running.filter(context=context)
    if job_ids is not None:
        running = running.filter(pk__in=job_ids)
    return executor_recover_stale(
        IMPORT_JOB_LIFECYCLE,
        running,
        reason=_stale_reason,
        fields=("worker", "done", "total", "format"),
    )


def _stale_reason(job: dict[str, Any]) -> str:
    worker = job["worker"] or "unknown"
    if job["format"] in MEMORY_IMPORT_FORMATS:  # one transaction: it died with the worker
        return (
            f"the worker importing this memory ({worker}) stopped after reading "
            f"{job['done']:,} of {job['total']:,} lines; an import writes the whole memory "
            "or nothing, so nothing was written. Retry to import the file again."
        )
    return (
        f"the worker importing this file ({worker}) stopped after {job['done']:,} of "
        f"{job['total']:,} rows; those rows are stored, the rest are not. Retry to import "
        "the file again: rows already stored are matched, not duplicated."
    )


def import_job_current(*, access: ContextAccess, job_id: int) -> ImportJob:
    """A job as its page shows it: failed first if it claims to be importing but its
    worker died."""
    job = import_job_get(access=access, job_id=job_id)
    if job.status == ImportJobStatus.RUNNING and import_jobs_recover_stale(job_ids=[job.pk]):
        job = import_job_get(access=access, job_id=job_id)
    return job


@transaction.atomic
def import_job_retry(*, access: ContextAccess, job: ImportJob) -> ImportJob:
    """A new pending job with a failed job's file (``retry_of`` links them), queued. A
    whole memory's is checked again as an upload is (the context must still be empty)."""
    access.require_role(Role.ADMIN)
    executor_retry_check(
        IMPORT_JOB_LIFECYCLE, job, recover=lambda ids: import_jobs_recover_stale(job_ids=ids)
    )
    if job.imports_a_memory:
        from memory.services.transfer.import_jobs import memory_import_job_create

        retry = memory_import_job_create(access=access, content=job.content, format=job.format)
    else:
        retry = import_job_create(
            access=access,
            content=job.content,
            filename=job.filename,
            format=job.format or None,  # type: ignore[arg-type]
            scope_default=job.scope_default,
        )
    ImportJob.objects.filter(pk=retry.pk).update(retry_of=job)
    retry.retry_of = job
    return retry


def _fail(job: ImportJob, message: str) -> str:
    ImportJob.objects.filter(pk=job.pk).update(
        status=ImportJobStatus.FAILED, error=message, finished_at=timezone.now()
    )
    return ImportJobStatus.FAILED
