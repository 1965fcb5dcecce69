"""Runs: each ingest with its input, the exact prompt, raw and parsed output and outcome;
retry a failed run."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST, require_safe

from curation.views.access import (
    HtmxHttpRequest,
    _get_context_for_user,
    dashboard_view,
    error_response,
    render_screen,
)
from memory.errors import ServiceUnavailable
from memory.models import Role, RunOutcome
from memory.selectors.runs import run_get, run_list
from memory.services.ingest import run_enqueue, run_retry

PAGE_SIZE = 50
OUTCOMES = ("all", *RunOutcome.values)


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True) if value else ""


@require_safe
@dashboard_view
def runs(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    """One page of runs, newest first (queries: count; the page with creators joined)."""
    access = _get_context_for_user(request, ctx)
    shown = request.GET.get("outcome", "all")
    shown = shown if shown in OUTCOMES else "all"
    rows = run_list(access=access, outcome=None if shown == "all" else shown)
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    context = {"page": page, "shown": shown, "outcomes": OUTCOMES}
    return render_screen(
        request, "curation/runs.html", access, context, section="runs", partial="rows"
    )


@require_safe
@dashboard_view
def run_detail(request: HtmxHttpRequest, ctx: str, run_id: int) -> HttpResponse:
    access = _get_context_for_user(request, ctx)
    run = run_get(access=access, run_id=run_id)
    context = {
        "run": run,
        "payload": _pretty({k: v for k, v in (run.input_payload or {}).items() if k != "grants"}),
        "parsed": _pretty(run.parsed_output),
        "result": _pretty(run.result),
        "timings": sorted((run.timings or {}).items()),
        "can_retry": run.outcome == RunOutcome.FAILED and access.has_role(Role.CURATOR),
    }
    return render_screen(request, "curation/run.html", access, context, section="runs")


@require_POST
@dashboard_view
def run_retry_view(request: HtmxHttpRequest, ctx: str, run_id: int) -> HttpResponse:
    """A new pending run with the failed run's input, queued for the worker."""
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    try:
        retry = run_retry(access=access, run=run_get(access=access, run_id=run_id))
    except ServiceUnavailable as exc:  # an llm run and no chat model configured now
        return error_response(request, 503, exc.message)
    run_enqueue(run=retry)
    messages.success(request, f"Run {run_id} retried as run {retry.pk}.")
    return redirect("run", access.context.slug, retry.pk)
