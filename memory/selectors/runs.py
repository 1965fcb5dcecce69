"""Ingest runs, limited to the caller's read grants (a run is as visible as its scope)."""

from __future__ import annotations

from django.db.models import OuterRef, QuerySet, Subquery
from django.db.models.functions import Substr

from memory.domain.access import ContextAccess
from memory.kernel.errors import NotFound
from memory.models import Run, Turn

# What a run's listing shows (the API's run and the runs page); the heavy columns (input,
# prompt, outputs) stay in the database.
RUN_FIELDS = (
    "id",
    "scope",
    "mode",
    "source",
    "outcome",
    "error",
    "summary",
    "prompt_tokens",
    "completion_tokens",
    "attempts",
    "retry_of",
    "created_by",
    "created_at",
    "started_at",
    "finished_at",
    "retracted_at",
)


RUN_TEXT_CHARS = 140  # of a turn's text in the list


def runs_visible(*, access: ContextAccess) -> QuerySet[Run]:
    return Run.objects.filter(access.grants.read_q(), context=access.context)


def run_list(
    *, access: ContextAccess, outcome: str | None = None, mode: str | None = None
) -> QuerySet[Run]:
    """Newest first, without the heavy columns, the creator joined in, and the start of
    its turn's text and the turn's thread (the turn keeps the text redacted; one query)."""
    turn = Turn.objects.filter(run=OuterRef("pk")).order_by("pk")
    start = turn.annotate(start=Substr("text", 1, RUN_TEXT_CHARS)).values("start")[:1]
    runs = (
        runs_visible(access=access)
        .select_related("created_by")
        # Of the creator, the name alone.
        .only("context_id", *RUN_FIELDS, "created_by__username")
        .annotate(
            turn_text=Subquery(start),
            turn_thread=Subquery(turn.values("thread")[:1]),
        )
    )
    if outcome:
        runs = runs.filter(outcome=outcome)
    if mode:
        runs = runs.filter(mode=mode)
    return runs.order_by("-created_at", "-id")


def run_get(*, access: ContextAccess, run_id: int) -> Run:
    run = runs_visible(access=access).select_related("created_by").filter(pk=run_id).first()
    if run is None:
        raise NotFound(f"run {run_id} not found", code="run_not_found")
    return run
