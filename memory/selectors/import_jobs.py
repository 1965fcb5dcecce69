"""Entity import jobs of a context, as the seeding page shows them."""

from __future__ import annotations

from memory.access import ContextAccess
from memory.errors import NotFound
from memory.models import ImportJob


def import_job_list(*, access: ContextAccess, limit: int = 10) -> list[ImportJob]:
    """The context's recent import jobs without their file text (one query)."""
    return list(
        ImportJob.objects.filter(context=access.context)
        .select_related("created_by")
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
