"""A whole memory in and out (admins): the export downloaded, and an export — or a mem0
or Graphiti one — imported into this context while it is empty, by a background job
with a progress bar."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST, require_safe

from curation.forms import MemoryImportForm
from curation.views.access import (
    HtmxHttpRequest,
    _get_context_for_user,
    dashboard_view,
    polled,
    render_screen,
)
from memory.domain.access import ContextAccess
from memory.kernel.errors import Conflict, NotFound, ValidationFailed
from memory.models import ImportJob, Role
from memory.selectors.import_jobs import import_job_get, import_job_list
from memory.selectors.memory_transfer import memory_holdings
from memory.services.transfer.export import memory_export_lines
from memory.services.transfer.format import KINDS
from memory.services.transfer.jobs import (
    import_job_current,
    import_job_retry,
    import_jobs_recover_stale,
    memory_import_job_create,
)

TEMPLATE = "curation/memory.html"


def _page(
    request: HtmxHttpRequest,
    access: ContextAccess,
    *,
    form: MemoryImportForm | None = None,
    job: ImportJob | None = None,
    status: int = 200,
) -> HttpResponse:
    """Queries: the four counts and the recent imports, or the one job shown (whose page
    htmx polls every second: it shows neither)."""
    context = {
        "holdings": memory_holdings(access=access) if job is None else None,
        "form": form or MemoryImportForm(),
        "jobs": import_job_list(access=access, memories=True) if job is None else [],
        "job": job,
        "imported": _imported(job),
    }
    partial = "job" if job is not None else None
    return render_screen(
        request, TEMPLATE, access, context, section="memory", partial=partial, status=status
    )


def _imported(job: ImportJob | None) -> list[tuple[str, int]]:
    """A finished job's rows by kind, in the order an export lists them (the report's
    JSON keeps them in the database's order)."""
    counts = ((job.report or {}).get("counts") or {}) if job is not None else {}
    return [(kind.name, counts[kind.name]) for kind in KINDS if kind.name in counts]


@require_safe
@dashboard_view
def memory(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    access = _get_context_for_user(request, ctx, role=Role.ADMIN)
    import_jobs_recover_stale(context=access.context)  # none listed stuck "running"
    return _page(request, access)


@require_safe
@dashboard_view
def memory_export_download(request: HtmxHttpRequest, ctx: str) -> StreamingHttpResponse:
    """The export, streamed as the API's ``GET export`` streams it."""
    access = _get_context_for_user(request, ctx, role=Role.ADMIN)
    response = StreamingHttpResponse(
        memory_export_lines(access=access), content_type="application/x-ndjson"
    )
    response["Content-Disposition"] = f'attachment; filename="{ctx}.memory.jsonl"'
    return response


@require_POST
@dashboard_view
def memory_import_upload(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    """Keep the file on a new job and start it; the job's page shows its progress."""
    access = _get_context_for_user(request, ctx, role=Role.ADMIN)
    form = MemoryImportForm(request.POST, request.FILES)
    if not form.is_valid():
        return _page(request, access, form=form, status=400)
    try:
        job = memory_import_job_create(
            access=access, content=form.cleaned_data["file"], format=form.cleaned_data["format"]
        )
    except (ValidationFailed, Conflict) as exc:
        form.add_error("file" if isinstance(exc, ValidationFailed) else None, exc.message)
        return _page(request, access, form=form, status=exc.status)
    return redirect("memory-job", access.context.slug, job.pk)


def _memory_import(job: ImportJob) -> ImportJob:
    """``job``, if it imports a whole memory: a seeding file's job has its own page."""
    if not job.imports_a_memory:
        raise NotFound(f"memory import {job.pk} not found", code="import_not_found")
    return job


@require_safe
@dashboard_view
def memory_job(request: HtmxHttpRequest, ctx: str, job_id: int) -> HttpResponse:
    """A job's progress (polled by htmx every second until it answers 286) and report."""
    access = _get_context_for_user(request, ctx, role=Role.ADMIN)
    job = _memory_import(import_job_current(access=access, job_id=job_id))
    return polled(request, _page(request, access, job=job), finished=job.finished)


@require_POST
@dashboard_view
def memory_job_retry(request: HtmxHttpRequest, ctx: str, job_id: int) -> HttpResponse:
    access = _get_context_for_user(request, ctx, role=Role.ADMIN)
    job = _memory_import(import_job_get(access=access, job_id=job_id))
    retry = import_job_retry(access=access, job=job)
    messages.success(request, f"Import {job_id} retried as import {retry.pk}.")
    return redirect("memory-job", access.context.slug, retry.pk)
