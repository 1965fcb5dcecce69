"""Import jobs of a context: seeding files, as the seeding page shows them, and whole
memories, as the memory page does."""

from __future__ import annotations

from memory.domain.access import ContextAccess
from memory.kernel.errors import NotFound
from memory.models import MEMORY_IMPORT_FORMATS, ImportJob


def import_job_list(
    *, access: ContextAccess, memories: bool = False, limit: int = 10
) -> list[ImportJob]:
    """The context's recent seeding jobs, or with ``memories`` its whole-memory imports,
    without their file text (one query)."""
    jobs = ImportJob.objects.filter(context=access.context)
    if memories:
        jobs = jobs.filter(format__in=MEMORY_IMPORT_FORMATS)
    else:
        jobs = jobs.exclude(format__in=MEMORY_IMPORT_FORMATS)
    return list(
        jobs.select_related("created_by")
        .defer("content", "report")
        .order_by("-created_at", "-id")[:limit]
    )


def import_job_get(*, access: ContextAccess, job_id: int) -> ImportJob:
    job = (
        ImportJob.objects.filter(context=access.context, pk=job_id)
        .select_related("created_by")
        .defer("content")
        .first()
    )
    if job is None:
        raise NotFound(f"import {job_id} not found", code="import_not_found")
    return job
