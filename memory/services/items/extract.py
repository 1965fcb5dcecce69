"""Extraction from items: a put with ``extract: true`` sends the item's indexed text
through ingest as a turn (the chat model extracts facts, which pass the trust gate like
any other turn's), and the run is kept on the item. Overwriting or deleting the item
takes back what its run wrote (``run_retract``): the facts a value stated go with it.

A run still waiting for the worker when its item changes is failed instead (it never
writes); one already executing is retracted when it finishes only if the item is written
again.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from memory.domain.access import ContextAccess
from memory.kernel.errors import Conflict
from memory.models import Run, RunOutcome
from memory.services.ingest.retract import run_retract
from memory.services.ingest.run import run_create, run_enqueue
from memory.services.ingest.turns import TurnFields

ITEM_SOURCE = "item"


def item_ref(scope: str, key: str) -> str:
    """The turn's ``ref``: which item it came from."""
    return f"item:{scope}#{key}"[:200]


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
        cursor.execute("UPDATE memory_item SET run_id = %s WHERE id = %s", [run.pk, item_id])
    run_enqueue(run=run)
    return run


def item_runs_take_back(*, access: ContextAccess, run_ids: Sequence[int]) -> None:
    """Take back what these runs of overwritten or deleted items wrote."""
    for run in Run.objects.select_for_update().filter(pk__in=sorted(set(run_ids))):
        if run.outcome == RunOutcome.PENDING:
            run.outcome = RunOutcome.FAILED
            run.error = "its item was overwritten or deleted before it ran"
            run.save(update_fields=["outcome", "error"])
            continue
        try:
            run_retract(access=access, run=run)
        except Conflict as refused:
            if refused.code not in ("nothing_to_retract", "already_retracted", "run_not_finished"):
                raise
