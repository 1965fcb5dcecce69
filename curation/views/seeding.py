"""Seeding canonical entities: one by form, or a CSV/JSONL file imported in the
background with a progress bar and a per-row report."""

from __future__ import annotations

import json

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST, require_safe

from curation.forms import EntitySeedForm, SeedUploadForm
from curation.views.access import (
    HtmxHttpRequest,
    _get_context_for_user,
    dashboard_view,
    polled,
    render_screen,
)
from memory.domain.access import ContextAccess
from memory.kernel.errors import Conflict, ValidationFailed
from memory.models import ImportJob, Role
from memory.selectors.import_jobs import import_job_get, import_job_list
from memory.selectors.registry import entity_names
from memory.services.entities.writes import entity_upsert
from memory.services.transfer.jobs import (
    import_job_create,
    import_job_current,
    import_job_retry,
    import_jobs_recover_stale,
)

TEMPLATE = "curation/seeding.html"
ERRORS_SHOWN = 100
REPORT_PAGE = 100


def _page(
    request: HtmxHttpRequest,
    access: ContextAccess,
    *,
    seed_form: EntitySeedForm | None = None,
    upload_form: SeedUploadForm | None = None,
    job: ImportJob | None = None,
    status: int = 200,
) -> HttpResponse:
    admin = access.has_role(Role.ADMIN)
    rows = (job.report or {}).get("rows", []) if job is not None else []
    errors = [r for r in rows if r["status"] == "error"]
    page = Paginator(rows, REPORT_PAGE).get_page(request.GET.get("page"))
    shown_ids = [r["entity_id"] for r in page if r.get("entity_id")]
    context = {
        "names": entity_names(access=access, entity_ids=shown_ids),
        "seed_form": seed_form or EntitySeedForm(initial={"type": "organisation"}),
        "upload_form": upload_form or SeedUploadForm(),
        "jobs": import_job_list(access=access) if admin and job is None else [],
        "job": job,
        "errors": errors[:ERRORS_SHOWN],
        "errors_hidden": max(len(errors) - ERRORS_SHOWN, 0),
        # Every row, a page at a time (a 50,000-row report is the download's job).
        "rows": page,
        "rows_total": len(rows),
    }
    partial = "job" if job is not None else None
    return render_screen(
        request, TEMPLATE, access, context, section="seed", partial=partial, status=status
    )


@require_safe
@dashboard_view
def seed(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    access = _get_context_for_user(request, ctx)
    if access.has_role(Role.ADMIN):  # the recent imports are listed: none stuck "running"
        import_jobs_recover_stale(context=access.context)
    return _page(request, access)


@require_POST
@dashboard_view
def seed_one(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    """Create (or mark canonical) one entity."""
    # entity_upsert checks write grants only; marking canonical entities is an admin's.
    access = _get_context_for_user(request, ctx, role=Role.ADMIN)
    form = EntitySeedForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            result = entity_upsert(
                access=access,
                name=data["name"],
                scope=data["scope"],
                type=data["type"],
                aliases=data["aliases"],
                identifiers=data["identifiers"],
                attributes=data["attributes"],
                seeded=True,
            )
        except (ValidationFailed, Conflict) as exc:
            form.add_error(None, exc.message)
        else:
            entity = result.entity
            verb = "Seeded" if result.created else f"Matched (by {result.matched_by})"
            messages.success(request, f"{verb} {entity.name}. {' '.join(result.warnings)}")
            return redirect("entity", access.context.slug, entity.pk)
    return _page(request, access, seed_form=form, status=400)


@require_POST
@dashboard_view
def seed_upload(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    """Keep the file on a new import job and start it; the job's page shows progress."""
    access = _get_context_for_user(request, ctx, role=Role.ADMIN)
    form = SeedUploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return _page(request, access, upload_form=form, status=400)
    upload = request.FILES.get("file")
    job = import_job_create(
        access=access,
        content=form.cleaned_data["file"],
        filename=getattr(upload, "name", "") or "",
        format=form.cleaned_data["format"] or None,
        scope_default=form.cleaned_data["scope_default"],
    )
    return redirect("seed-job", access.context.slug, job.pk)


@require_safe
@dashboard_view
def seed_job(request: HtmxHttpRequest, ctx: str, job_id: int) -> HttpResponse:
    """A job's progress (polled by htmx every second until it answers 286) and report."""
    access = _get_context_for_user(request, ctx, role=Role.ADMIN)
    job = import_job_current(access=access, job_id=job_id)
    if job.imports_a_memory:  # a whole memory's job has its own page
        return redirect("memory-job", access.context.slug, job.pk)
    return polled(request, _page(request, access, job=job), finished=job.finished)


@require_POST
@dashboard_view
def seed_job_retry(request: HtmxHttpRequest, ctx: str, job_id: int) -> HttpResponse:
    """Import a failed job's file again, as a new job; its page shows the progress."""
    access = _get_context_for_user(request, ctx, role=Role.ADMIN)
    retry = import_job_retry(access=access, job=import_job_get(access=access, job_id=job_id))
    messages.success(request, f"Import {job_id} retried as import {retry.pk}.")
    return redirect("seed-job", access.context.slug, retry.pk)


@require_safe
@dashboard_view
def seed_job_report(request: HtmxHttpRequest, ctx: str, job_id: int) -> HttpResponse:
    access = _get_context_for_user(request, ctx, role=Role.ADMIN)
    job = import_job_get(access=access, job_id=job_id)
    body = {
        "job": job.pk,
        "file": job.filename,
        "status": job.status,
        "error": job.error,
        "created": job.created_count,
        "matched": job.matched_count,
        "failed": job.failed_count,
        **(job.report or {}),
    }
    response = HttpResponse(json.dumps(body, indent=1), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="import-{job.pk}-report.json"'
    return response
