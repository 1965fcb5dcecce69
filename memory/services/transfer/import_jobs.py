"""A memory import as a background job with progress (the API's ``POST import``): the
file is kept on an ``ImportJob`` (format ``memory``, ``mem0`` or ``graphiti``) and read by
the import task under the executor lifecycle of seeding jobs (``import_jobs``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import asdict

from django.db import transaction
from django.utils import timezone

from memory.domain.access import ContextAccess, context_access_resolve
from memory.infra.queueing import IMPORT_JOB_TASK, task_enqueue
from memory.kernel.errors import DomainError, ValidationFailed
from memory.models import MEMORY_IMPORT_FORMATS, ImportJob, ImportJobStatus, Role
from memory.services.transfer.format import FORMAT
from memory.services.transfer.importer import (
    Progress,
    memory_import,
    memory_import_check_empty,
)
from memory.services.transfer.peers import foreign_lines

logger = logging.getLogger(__name__)

# The file is kept on the job row and read whole by the task: a larger memory is
# imported from the shell (``manage.py import_memory``), which streams it.
MAX_MEMORY_IMPORT_BYTES = 256 * 1024 * 1024


def memory_file_lines(content: str, format: str) -> Iterator[str]:
    """The export lines of an uploaded file: itself, or a mem0/Graphiti export read
    into them."""
    if format == "memory":
        return iter(content.splitlines())
    return foreign_lines(content, format)


def memory_import_job_create(*, access: ContextAccess, content: str, format: str) -> ImportJob:
    """Check what can be checked at once (admin, an empty context, the file's first
    line) and queue the import; the task starts once this transaction commits."""
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
        job = ImportJob.objects.create(
            context=access.context,
            created_by=access.user if getattr(access.user, "is_authenticated", False) else None,
            filename=f"memory.{format}",
            format=format,
            content=content,
            size_bytes=size,
            total=content.count("\n") + 1,
        )
        transaction.on_commit(lambda: _enqueue(job.pk))
    return job


def memory_import_job_run(
    job: ImportJob, *, progress: Progress, fail: Callable[[ImportJob, str], str]
) -> str:
    """Import the job's file as its uploader (checked again now)."""
    assert job.created_by is not None
    try:
        access = context_access_resolve(user=job.created_by, slug=job.context.slug)
        report = memory_import(
            access=access,
            lines=memory_file_lines(job.content, job.format),
            total_lines=job.total,
            on_progress=progress,
        )
    except DomainError as exc:
        return fail(job, exc.message)
    except Exception:
        logger.exception("memory import job %s stopped", job.pk)
        fail(job, "the import stopped on an internal error; nothing was written")
        raise
    ImportJob.objects.filter(pk=job.pk).update(
        status=ImportJobStatus.SUCCEEDED,
        done=report.lines,
        total=report.lines,
        created_count=sum(report.counts.values()),
        report={"format": job.format, "notes": report.notes, "rows": []} | asdict(report),
        finished_at=timezone.now(),
    )
    return ImportJobStatus.SUCCEEDED


def _enqueue(job_id: int) -> None:
    """Queue the job on the seeding import's task (memory.services.transfer.seeding_jobs runs both
    kinds, by format), keeping its task id for the job page."""
    result = task_enqueue(IMPORT_JOB_TASK, job_id)
    ImportJob.objects.filter(pk=job_id).update(task_id=str(result.id)[:64])
