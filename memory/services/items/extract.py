"""Extraction from items: a put that extracts (``extract: true``, or the context's
``item_extract`` when the put does not say) sends the item's indexed text through ingest
as a turn (the chat model extracts facts, which pass the trust gate like any other
turn's); the item keeps the run and the turn. Overwriting or deleting the item takes
back what it extracted: the facts a value stated go with it.

What is taken back is found through the turn, which the facts point to: its run (the
latest retry of the run, if it was retried) is retracted as a whole (``run_retract``).
An item imported from a memory export has its turn but no run (runs stay with the
installation that ran them): its turn's facts are retracted instead. A run still waiting
for the worker when its item changes is failed (it never writes); one already executing
is retracted when it finishes only if the item is written again.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection

from memory.domain.access import ContextAccess
from memory.domain.namespaces import ITEM_REF_PREFIX
from memory.kernel.errors import Conflict
from memory.models import Fact, FactStatus, Run, RunOutcome, Turn
from memory.services.facts.retraction import facts_retract
from memory.services.ingest.retract import run_retract
from memory.services.ingest.run import run_create, run_enqueue
from memory.services.ingest.turns import TurnFields

ITEM_SOURCE = "item"
FAILED_BEFORE_IT_RAN = "its item was overwritten or deleted before it ran"
# Refusals of run_retract that mean there is nothing (more) to take back now.
_NOTHING_TO_TAKE = ("nothing_to_retract", "already_retracted", "run_not_finished")


def item_ref(scope: str, key: str) -> str:
    """The turn's ``ref``: which item it came from."""
    return f"{ITEM_REF_PREFIX}{scope}#{key}"[:200]


def extract_wanted(*, access: ContextAccess, asked: bool | None) -> bool:
    """Whether a put extracts: as it asks, else as its context's ``item_extract`` says."""
    return access.context.item_extract if asked is None else asked


def item_extract(*, access: ContextAccess, item_id: int, scope: str, key: str, text: str) -> Run:
    """Accept the item's text as a turn for extraction (in the caller's transaction)."""
    run = run_create(
        access=access,
        text=text,
        scope=scope,
        infer="llm",
        source=ITEM_SOURCE,
        turn=TurnFields(ref=item_ref(scope, key)),
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memory_item SET run_id = %s, "
            "turn_id = (SELECT id FROM memory_turn WHERE run_id = %s ORDER BY id LIMIT 1) "
            "WHERE id = %s",
            [run.pk, run.pk, item_id],
        )
    run_enqueue(run=run)
    return run


@dataclass(frozen=True)
class TakenBack:
    """What taking back one item's extraction did: the audit event of the retraction (its
    undo brings the facts back), or the run failed before it ran."""

    audit_event_id: int | None = None
    failed_run_id: int | None = None
    facts: int = 0


def item_extraction_take_back(
    *, access: ContextAccess, run_id: int | None, turn_id: int | None
) -> TakenBack:
    """Take back what one item's extraction wrote (in the caller's transaction)."""
    run = _run_of(run_id, turn_id)
    if run is None:
        return _turn_facts_retract(access, turn_id)
    if run.outcome == RunOutcome.PENDING:
        run.outcome = RunOutcome.FAILED
        run.error = FAILED_BEFORE_IT_RAN
        run.save(update_fields=["outcome", "error"])
        return TakenBack(failed_run_id=run.pk)
    try:
        plan, event = run_retract(access=access, run=run)
    except Conflict as refused:
        if refused.code not in _NOTHING_TO_TAKE:
            raise
        return TakenBack()
    return TakenBack(
        audit_event_id=event.pk, facts=len(plan.facts_retracted) + len(plan.facts_deleted)
    )


def item_extractions_take_back(
    *, access: ContextAccess, extractions: list[tuple[int | None, int | None]]
) -> None:
    """Take back what the extractions ``(run_id, turn_id)`` of overwritten or deleted
    items wrote."""
    for run_id, turn_id in sorted(set(extractions), key=lambda e: (e[0] or 0, e[1] or 0)):
        item_extraction_take_back(access=access, run_id=run_id, turn_id=turn_id)


def _run_of(run_id: int | None, turn_id: int | None) -> Run | None:
    """The run that wrote the turn's facts, locked: the turn's (a retry takes the turn
    over), else the item's own."""
    current = None
    if turn_id is not None:
        current = Turn.objects.filter(pk=turn_id).values_list("run_id", flat=True).first()
    wanted = current or run_id
    if wanted is None:
        return None
    return Run.objects.select_for_update().filter(pk=wanted).first()


def _turn_facts_retract(access: ContextAccess, turn_id: int | None) -> TakenBack:
    if turn_id is None:
        return TakenBack()
    ids = list(
        Fact.objects.filter(context=access.context, turn_id=turn_id)
        .exclude(status=FactStatus.RETRACTED)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    if not ids:
        return TakenBack()
    done = facts_retract(access=access, fact_ids=ids, what=f"turn {turn_id}")
    return TakenBack(audit_event_id=done.audit_event_id, facts=len(done.changed))
