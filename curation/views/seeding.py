"""Seeding canonical entities: one by form, or a CSV/JSONL file imported in the
background with a progress bar and a per-row report."""

from __future__ import annotations

import json

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST, require_safe

from curation.forms import EntitySeedForm, SeedUploadForm
from curation.models import ImportJob
from curation.selectors import import_job_get, import_job_list
from curation.services import import_job_create
from curation.views.access import (
    HtmxHttpRequest,
    _get_context_for_user,
    dashboard_view,
    render_screen,
    wants_partial,
)
from memory.access import ContextAccess
from memory.errors import Conflict, ValidationFailed
from memory.models import Role
from memory.services.entities import entity_upsert

TEMPLATE = "curation/seeding.html"
REPORT_ROWS_SHOWN = 2000
# htmx stops polling when the answer has this status (and still swaps it in).
STOP_POLLING = 286


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
    context = {
        "seed_form": seed_form or EntitySeedForm(initial={"type": "organisation"}),
        "upload_form": upload_form or SeedUploadForm(),
        "jobs": import_job_list(access=access) if admin and job is None else [],
        "job": job,
        "errors": [r for r in rows if r["status"] == "error"][:REPORT_ROWS_SHOWN],
        "rows": rows[:REPORT_ROWS_SHOWN],
        "rows_hidden": max(len(rows) - REPORT_ROWS_SHOWN, 0),
    }
    partial = "job" if job is not None else None
    return render_screen(
        request, TEMPLATE, access, context, section="seed", partial=partial, status=status
    )


@require_safe
@dashboard_view
def seed(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    return _page(request, _get_context_for_user(request, ctx))


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
    job = import_job_get(access=access, job_id=job_id)
    response = _page(request, access, job=job)
    if job.finished and wants_partial(request):
        response.status_code = STOP_POLLING
    return response


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
