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


def run_status_words(outcome: str, result: dict[str, Any] | None) -> str:
    """The outcome as a person says it: "succeeded with 2 unresolved items"."""
    unresolved = len((result or {}).get("unresolved") or [])
    if outcome == RunOutcome.SUCCEEDED and unresolved:
        return f"succeeded with {_count(unresolved, 'unresolved item', 'unresolved items')}"
    return {"pending": "waiting for a worker", "running": "running"}.get(outcome, outcome)


def result_sentence(result: dict[str, Any] | None) -> str:
    """One sentence of what the run wrote."""
    if not result:
        return ""
    parts = []
    created, matched = (
        len(result.get("entities_created") or []),
        len(result.get("entities_matched") or []),
    )
    if created or matched:
        parts.append(f"{_count(created, 'entity', 'entities')} created, {matched:,} matched")
    facts = len(result.get("facts_created") or [])
    again = len(result.get("facts_reobserved") or [])
    superseded = len(result.get("facts_superseded") or [])
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
        n = len(result.get(key) or [])
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


@require_safe
@dashboard_view
def run_detail(request: HtmxHttpRequest, ctx: str, run_id: int) -> HttpResponse:
    access = _get_context_for_user(request, ctx)
    run = run_get(access=access, run_id=run_id)
    context = {
        "run": run,
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
        "report": run.result or {},
        "status_words": run_status_words(run.outcome, run.result),
        "result_sentence": result_sentence(run.result),
        "timings": _timings(run.timings),
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
