"""Import jobs: an uploaded file kept on an ``ImportJob`` and imported by a task that
reports its progress, under the executor lifecycle (services/executor.py).

Two kinds share the one lifecycle — queue, claim, run as the uploader, succeed or fail,
recover from a dead worker, retry — and differ only in what they import (``_Kind``):
a seeding file of entities (CSV/JSONL, ``entities_import``, whose batches commit as
they go) or a whole memory (formats ``memory``, ``mem0`` and ``graphiti``,
``memory_import``, one transaction into an empty context).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from memory.domain.access import ContextAccess, context_access_resolve
from memory.infra.locks import IMPORT_JOB_LOCK
from memory.infra.queueing import IMPORT_JOB_TASK, task_enqueue
from memory.kernel.errors import DomainError, ValidationFailed
from memory.models import MEMORY_IMPORT_FORMATS, Context, ImportJob, ImportJobStatus, Role
from memory.selectors.import_jobs import import_job_get
from memory.services.executor import (
    Lifecycle,
    executor_claim,
    executor_recover_stale,
    executor_retry_check,
)
from memory.services.transfer.format import FORMAT
from memory.services.transfer.importer import memory_import, memory_import_check_empty
from memory.services.transfer.peers import foreign_lines
from memory.services.transfer.seeding import ImportFormat, entities_import

logger = logging.getLogger(__name__)

PROGRESS_INTERVAL_SECONDS = 0.25
# A whole memory's file is kept on the job row and read whole by the task: a larger
# memory is imported from the shell (``manage.py import_memory``), which streams it.
MAX_MEMORY_IMPORT_BYTES = 256 * 1024 * 1024

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


# --- queueing -----------------------------------------------------------------------------


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
    return _job_queue(
        access,
        filename=filename[:255],
        format=format or "",
        scope_default=scope_default,
        content=content,
        size_bytes=len(content.encode()),
    )


def memory_import_job_create(*, access: ContextAccess, content: str, format: str) -> ImportJob:
    """Check what can be checked at once (admin, an empty context, the file's first
    line) and queue the import of a whole memory; the task starts once this transaction
    commits."""
    access.require_role(Role.ADMIN)
    if format not in MEMORY_IMPORT_FORMATS:
        raise ValidationFailed(
            f"format must be one of {', '.join(MEMORY_IMPORT_FORMATS)}", code="invalid_format"
        )
    memory_import_check_empty(access.context)
    if not content.strip():
        raise ValidationFailed("the file is empty", code="invalid_export")
    size = len(content.encode())
    if size > MAX_MEMORY_IMPORT_BYTES:
        raise ValidationFailed(
            f"the file is {size:,} bytes; an upload holds at most {MAX_MEMORY_IMPORT_BYTES:,} "
            "(import a larger memory with manage.py import_memory)",
            code="file_too_large",
        )
    if format == "memory" and f'"{FORMAT}"' not in content[:2_000].split("\n", 1)[0]:
        raise ValidationFailed(
            "the first line is not the header of a memory export", code="invalid_export"
        )
    with transaction.atomic():
        return _job_queue(
            access,
            filename=f"memory.{format}",
            format=format,
            content=content,
            size_bytes=size,
            total=content.count("\n") + 1,
        )


def _job_queue(access: ContextAccess, **fields: Any) -> ImportJob:
    """A pending job of the uploader's, queued once the caller's transaction commits."""
    job = ImportJob.objects.create(
        context=access.context,
        created_by=access.user if getattr(access.user, "is_authenticated", False) else None,
        **fields,
    )
    transaction.on_commit(lambda: _enqueue(job.pk))
    return job


def _enqueue(job_id: int) -> None:
    """Queue the job's task, keeping its task id for the job page."""
    result = task_enqueue(IMPORT_JOB_TASK, job_id)
    ImportJob.objects.filter(pk=job_id).update(task_id=str(result.id)[:64])


# --- running ------------------------------------------------------------------------------


class _ProgressWriter:
    """``on_progress`` for an import: writes done/total to the job row at most a few
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
    kind = _kind(job.format)
    try:
        access = context_access_resolve(user=job.created_by, slug=job.context.slug)
        finished = kind.run(job, access, _ProgressWriter(job.pk))
    except DomainError as exc:
        return _fail(job, exc.message)
    except Exception:
        logger.exception("%s job %s stopped", kind.noun, job.pk)
        _fail(job, f"the import stopped on an internal error; {kind.left_by_an_error}")
        raise
    ImportJob.objects.filter(pk=job.pk).update(
        status=ImportJobStatus.SUCCEEDED, finished_at=timezone.now(), **finished
    )
    return ImportJobStatus.SUCCEEDED


def _fail(job: ImportJob, message: str) -> str:
    ImportJob.objects.filter(pk=job.pk).update(
        status=ImportJobStatus.FAILED, error=message, finished_at=timezone.now()
    )
    return ImportJobStatus.FAILED


# --- recovery and retry -------------------------------------------------------------------


def import_jobs_recover_stale(
    *, context: Context | None = None, job_ids: list[int] | None = None
) -> int:
    """Fail the jobs left ``running`` by a worker that died; return how many.

    A running job whose advisory lock we can take has no executor. Its file stays on the
    job for a retry; the batches a seeding import committed stay too (retrying matches
    those rows instead of duplicating them). The dead worker's task result is failed too.
    Called when a worker picks up an import task, when a job or its page is looked at,
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
        reason=lambda job: _kind(job["format"]).stale_reason(job),
        fields=("worker", "done", "total", "format"),
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
    retry = _kind(job.format).retry(access, job)
    ImportJob.objects.filter(pk=retry.pk).update(retry_of=job)
    retry.retry_of = job
    return retry


# --- the two kinds ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Kind:
    """What differs between importing a seeding file and importing a whole memory."""

    noun: str  # in the worker's log
    # The import as the uploader, reporting progress; returns the finished job's fields.
    run: Callable[[ImportJob, ContextAccess, _ProgressWriter], dict[str, Any]]
    left_by_an_error: str  # what an internal error leaves behind, for the job page
    stale_reason: Callable[[dict[str, Any]], str]  # the job's worker, done and total
    retry: Callable[[ContextAccess, ImportJob], ImportJob]  # a new job with the file


def _kind(format: str) -> _Kind:
    return _MEMORY if format in MEMORY_IMPORT_FORMATS else _SEEDING


def _seeding_run(
    job: ImportJob, access: ContextAccess, progress: _ProgressWriter
) -> dict[str, Any]:
    report = entities_import(
        access=access,
        content=job.content,
        format=job.format or None,  # type: ignore[arg-type]
        scope_default=job.scope_default or None,
        seeded=True,
        on_progress=progress,
        embed_now=True,  # this is the worker: embed each batch rather than queue it
    )
    return {
        "done": report.total,
        "total": report.total,
        "created_count": report.created,
        "matched_count": report.matched,
        "failed_count": report.failed,
        "report": {
            "format": report.format,
            "notes": report.notes,
            "rows": [asdict(row) for row in report.rows],
        },
    }


def _seeding_stale_reason(job: dict[str, Any]) -> str:
    return (
        f"the worker importing this file ({job['worker'] or 'unknown'}) stopped after "
        f"{job['done']:,} of {job['total']:,} rows; those rows are stored, the rest are not. "
        "Retry to import the file again: rows already stored are matched, not duplicated."
    )


def _seeding_retry(access: ContextAccess, job: ImportJob) -> ImportJob:
    return import_job_create(
        access=access,
        content=job.content,
        filename=job.filename,
        format=job.format or None,  # type: ignore[arg-type]
        scope_default=job.scope_default,
    )


def _memory_run(job: ImportJob, access: ContextAccess, progress: _ProgressWriter) -> dict[str, Any]:
    report = memory_import(
        access=access,
        lines=_memory_file_lines(job.content, job.format),
        total_lines=job.total,
        on_progress=progress,
    )
    return {
        "done": report.lines,
        "total": report.lines,
        "created_count": sum(report.counts.values()),
        "report": {"format": job.format, "notes": report.notes, "rows": []} | asdict(report),
    }


def _memory_file_lines(content: str, format: str) -> Iterator[str]:
    """The export lines of an uploaded file: itself, or a mem0/Graphiti export read
    into them."""
    if format == "memory":
        return iter(content.splitlines())
    return foreign_lines(content, format)


def _memory_stale_reason(job: dict[str, Any]) -> str:
    # One transaction: whatever it had read died with the worker.
    return (
        f"the worker importing this memory ({job['worker'] or 'unknown'}) stopped after "
        f"reading {job['done']:,} of {job['total']:,} lines; an import writes the whole "
        "memory or nothing, so nothing was written. Retry to import the file again."
    )


def _memory_retry(access: ContextAccess, job: ImportJob) -> ImportJob:
    return memory_import_job_create(access=access, content=job.content, format=job.format)


_SEEDING = _Kind(
    noun="import",
    run=_seeding_run,
    left_by_an_error="the file is kept on this job",
    stale_reason=_seeding_stale_reason,
    retry=_seeding_retry,
)
_MEMORY = _Kind(
    noun="memory import",
    run=_memory_run,
    left_by_an_error="nothing was written",
    stale_reason=_memory_stale_reason,
    retry=_memory_retry,
)
