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
from memory.domain.screening import text_redact
from memory.kernel.errors import Conflict, PermissionDenied, ServiceUnavailable
from memory.models import Role, Run, RunOutcome
from memory.models.run import FINISHED_WRITING
from memory.selectors.runs import run_get, run_list
from memory.services.ingest.retract import run_retract, run_retract_preview
from memory.services.ingest.run import run_enqueue, run_retry

PAGE_SIZE = 50
OUTCOMES = ("all", *RunOutcome.values)


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True) if value else ""


# Payload keys the run keeps for itself: the caller's grants and role when it was accepted
# (shown in words in the header, not as JSON a reader might take for input).
PRIVATE_PAYLOAD = ("grants", "role")


def _stage_label(key: str) -> str:
    """``resolve_ms`` → "Resolve"; ``total_ms`` → "Total"."""
    return key.removesuffix("_ms").replace("_", " ").capitalize()


def _timings(timings: dict[str, Any] | None) -> list[tuple[str, Any]]:
    """Stages in the order they ran (as stored), the total last."""
    items = [(k, v) for k, v in (timings or {}).items() if k != "total_ms"]
    if timings and "total_ms" in timings:
        items.append(("total_ms", timings["total_ms"]))
    return [(_stage_label(k), v) for k, v in items]


def _count(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


def _n(value: Any) -> int:
    """A result entry's size: a list's length, or a count some results store instead."""
    if isinstance(value, list):
        return len(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _lists(result: dict[str, Any] | None) -> dict[str, Any]:
    """The result's entries the page lists row by row (lists only; counts are in the
    sentence)."""
    if not isinstance(result, dict):
        return {}
    return {k: v for k, v in result.items() if isinstance(v, list) or k == "preview"}


def run_status_words(outcome: str, result: dict[str, Any] | None) -> str:
    """The outcome as a person says it: "succeeded with 2 unresolved items"."""
    unresolved = _n((result or {}).get("unresolved"))
    warnings = _n((result or {}).get("warnings"))
    if outcome in FINISHED_WRITING and (unresolved or warnings):
        parts = []
        if unresolved:
            parts.append(_count(unresolved, "item not written", "items not written"))
        if warnings:
            parts.append(_count(warnings, "warning", "warnings"))
        return "succeeded with " + " and ".join(parts)
    return {"pending": "waiting for a worker", "running": "running"}.get(outcome, outcome)


def result_sentence(result: dict[str, Any] | None) -> str:
    """One sentence of what the run wrote."""
    if not isinstance(result, dict) or not result:
        return ""
    parts = []
    created, matched = _n(result.get("entities_created")), _n(result.get("entities_matched"))
    if created or matched:
        parts.append(f"{_count(created, 'entity', 'entities')} created, {matched:,} matched")
    facts = _n(result.get("facts_created"))
    again = _n(result.get("facts_reobserved"))
    superseded = _n(result.get("facts_superseded"))
    fact_text = _count(facts, "fact", "facts") + " written"
    if again:
        fact_text += f", {again:,} seen again"
    if superseded:
        fact_text += f", {superseded:,} superseded"
    parts.append(fact_text)
    for key, one, many in (
        ("new_predicates", "new predicate", "new predicates"),
        ("conflicts", "conflict", "conflicts"),
        ("merges", "merge", "merges"),
        ("unresolved", "item not written", "items not written"),
    ):
        n = _n(result.get(key))
        if n:
            parts.append(_count(n, one, many))
    sentence = "; ".join(parts) + "."
    return (
        ("Preview (nothing kept): " + sentence) if result.get("preview") else sentence.capitalize()
    )


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


def _can_retract(access: Any, run: Run) -> bool:
    return (
        access.has_role(Role.CURATOR)
        and access.grants.can_write(run.scope)
        and run.retracted_at is None
        and run.outcome in FINISHED_WRITING
        and run.mode != "preview"
    )


@require_safe
@dashboard_view
def run_detail(request: HtmxHttpRequest, ctx: str, run_id: int) -> HttpResponse:
    access = _get_context_for_user(request, ctx)
    run = run_get(access=access, run_id=run_id)
    return _run_page(request, access, run)


def _run_page(
    request: HtmxHttpRequest, access: Any, run: Run, retract: dict[str, Any] | None = None
) -> HttpResponse:
    turn = run.turns.first()
    context = {
        "run": run,
        # The raw text, secrets and all, is for admins; others read it as its turn keeps it.
        "input_text": run.input_text
        if access.has_role(Role.ADMIN)
        else text_redact(run.input_text),
        "turn_flags": turn.flags if turn is not None else [],
        "payload": _pretty(
            {
                k: v
                for k, v in (run.input_payload or {}).items()
                if k not in PRIVATE_PAYLOAD and v is not None
            }
        ),
        "acted_as": (run.input_payload or {}).get("role", ""),
        "parsed": _pretty(run.parsed_output),
        "result": _pretty(run.result),
        "report": _lists(run.result),
        "status_words": run_status_words(run.outcome, run.result),
        "result_sentence": result_sentence(run.result),
        "timings": _timings(run.timings),
        "can_retry": run.outcome == RunOutcome.FAILED and access.has_role(Role.CURATOR),
        "can_retract": _can_retract(access, run),
        "retract": retract,
    }
    return render_screen(
        request,
        "curation/run.html",
        access,
        context,
        section="runs",
        partial="retract" if retract is not None else None,
    )


@require_POST
@dashboard_view
def run_retract_view(request: HtmxHttpRequest, ctx: str, run_id: int) -> HttpResponse:
    """``preview=1``: what retracting would change (htmx: the preview partial); otherwise
    retract, and say so with an Undo."""
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    run = run_get(access=access, run_id=run_id)
    try:
        if request.POST.get("preview"):
            plan = run_retract_preview(access=access, run=run)
            return _run_page(request, access, run, retract=plan.as_dict())
        plan, event = run_retract(access=access, run=run)
    except Conflict as exc:
        return error_response(request, 409, exc.message)
    except PermissionDenied as exc:
        return error_response(request, 403, exc.message)
    messages.success(
        request, event.summary[:1].upper() + event.summary[1:] + ".", extra_tags=f"undo:{event.pk}"
    )
    return redirect("run", access.context.slug, run.pk)


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
