"""Ingest runs: one accepted memory as a Run, from acceptance to its outcome. The API,
the task and ``manage.py ingest`` all go through ``run_create`` then ``run_execute``,
which calls ``memory_ingest`` (``memory.services.ingest.pipeline``) under the executor
lifecycle (services/executor.py).

Every accepted memory with a text (any mode but ``preview``) is kept as a searchable
**turn** (``memory.services.ingest.turns``), written with its run, with the caller's optional
``speaker``, ``said_at``, ``thread`` and ``ref``; the facts a run extracts point back to
its turn.

A request that is not acceptable (bad scope or grant, text too large, malformed triples,
no chat model for ``llm``: ``memory.services.ingest.acceptance``) is refused before a Run
exists. Once accepted, the input is never lost: a run that fails keeps it with its reason
and can be retried. All graph writes of a run happen in one transaction together with
the run's success record, so a run that fails — or whose process dies — leaves nothing
half-written.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import DatabaseError, transaction
from django.utils import timezone

from memory.domain.access import ContextAccess
from memory.infra.locks import RUN_LOCK
from memory.infra.pg import instance_insert, instance_read
from memory.infra.process import process_settle
from memory.infra.queueing import INGEST_RUN_TASK, task_enqueue_on_commit
from memory.infra.stages import StageClock
from memory.kernel.errors import DomainError
from memory.kernel.scopes import Grants, scope_validate
from memory.models import Context, Role, Run, RunOutcome
from memory.services.executor import (
    Lifecycle,
    executor_claim,
    executor_recover_stale,
    executor_retry_check,
)
from memory.services.ingest.acceptance import ingest_input_check
from memory.services.ingest.pipeline import memory_ingest
from memory.services.ingest.report import ingest_log
from memory.services.ingest.turns import TurnFields, turn_create, turn_move_to_run

logger = logging.getLogger("memory.ingest")

_RUN_STATE_FIELDS = [
    "outcome",
    "error",
    "result",
    "summary",
    "timings",
    "prompt",
    "raw_output",
    "parsed_output",
    "prompt_tokens",
    "completion_tokens",
    "attempts",
    "worker",
    "started_at",
    "finished_at",
]


RUN_LIFECYCLE = Lifecycle(
    model=Run,
    lock_namespace=RUN_LOCK,
    state_field="outcome",
    pending=RunOutcome.PENDING,
    running=RunOutcome.RUNNING,
    failed=RunOutcome.FAILED,
    task_path=INGEST_RUN_TASK,
    noun="run",
    not_failed_code="run_not_failed",
    counted_on_claim=("attempts",),
    lost_fields={"summary": {"error_code": "worker_lost"}},
)


def run_create(
    *,
    access: ContextAccess,
    text: str,
    scope: str,
    infer: str,
    triples: dict[str, Any] | None = None,
    source: str = "",
    retry_of: Run | None = None,
    turn: TurnFields | None = None,
) -> Run:
    """Accept a memory as a pending run, or refuse it (nothing is stored then). Its text
    is kept as a searchable turn with ``turn``'s fields (not for ``preview``, which keeps
    nothing; a retry takes over the turn of the run it retries).

    Refusals: ValidationFailed (bad mode, empty text, malformed triples, bad turn
    fields), TextTooLarge (413), PermissionDenied (no write grant on ``scope``),
    ServiceUnavailable (503: the run needs the chat model and none is configured).
    """
    scope = scope_validate(scope)
    access.require_write(scope)
    ingest_input_check(text=text, infer=infer, triples=triples, source=source)
    with transaction.atomic():
        run = _run_record(
            access=access,
            text=text,
            scope=scope,
            infer=infer,
            triples=triples,
            source=source,
            retry_of=retry_of,
        )
        if retry_of is not None:
            turn_move_to_run(previous=retry_of, run=run)
        elif infer != "preview" and text.strip():
            turn_create(
                context=access.context,
                run=run,
                scope=scope,
                text=text,
                fields=turn or TurnFields(),
            )
    return run


def _run_record(
    *,
    access: ContextAccess,
    text: str,
    scope: str,
    infer: str,
    triples: dict[str, Any] | None,
    source: str,
    retry_of: Run | None,
) -> Run:
    run = Run(
        context=access.context,
        scope=scope,
        mode=infer,
        input_text=text,
        input_payload={
            "triples": triples,
            # The run executes later, maybe in a worker: it acts with the grants the
            # caller had when the memory was accepted.
            "grants": [str(g) for g in access.grants.items],
            "role": str(access.role),
            "trusted": access.trusted,
        },
        source=source,
        created_by=access.user if getattr(access.user, "is_authenticated", False) else None,
        retry_of=retry_of,
    )
    instance_insert(run)  # every accepted memory: one plain statement
    return run


def run_enqueue(*, run: Run) -> None:
    """Queue the run for the worker (``manage.py db_worker``) once the caller commits."""
    task_enqueue_on_commit(INGEST_RUN_TASK, run.pk)


def run_execute(*, run_id: int) -> Run:
    """Execute a pending run here and now; return it, finished (succeeded or failed).

    A run that is not pending (done, or executing elsewhere) is returned as it is.
    """
    with executor_claim(RUN_LIFECYCLE, run_id, related=_RUN_RELATED) as claim:
        if not claim.claimed:
            return _run_read(run_id)
        run = claim.record
        assert isinstance(run, Run)
        clock = StageClock()
        succeeded = False
        try:
            memory_ingest(
                access=_run_access(run),
                text=run.input_text,
                scope=run.scope,
                infer=run.mode,
                triples=(run.input_payload or {}).get("triples"),
                source=run.source,
                run=run,
                clock=clock,
            )
            succeeded = True
        except DomainError as exc:
            _run_fail(run, message=exc.message, code=exc.code, clock=clock)
        except DatabaseError as exc:
            # The connection dropped (server restart, network, an administrator's kill), a
            # deadlock, a constraint: the write transaction was rolled back as a whole.
            # Django closed a broken connection on the way out, so recording the failure
            # reconnects; if the database is gone altogether, that raises too, and the run
            # is failed later by runs_recover_stale (its advisory lock died with the session).
            logger.warning("ingest run %s: database error", run_id, exc_info=True)
            detail = " ".join(str(exc).split())[:300]
            _run_fail(
                run,
                message=f"the database stopped the run ({type(exc).__name__}: {detail}); its "
                "writes were rolled back, so nothing of it was stored. Retry the run.",
                code="database_error",
                clock=clock,
            )
        except Exception as exc:
            # Whatever went wrong, the run says so and keeps its input for a retry.
            logger.exception("ingest run %s failed unexpectedly", run_id)
            _run_fail(
                run, message=f"{type(exc).__name__}: {exc}"[:2000], code="internal", clock=clock
            )
        if not succeeded:
            # The failure was written by a queryset update: read the run back (keeping
            # the cached context). A success was saved from this instance, which holds
            # what the database holds (the pipeline's _run_succeed; the LLM fields by
            # ingest_extract).
            run.refresh_from_db(fields=_RUN_STATE_FIELDS)
        ingest_log(run)
        process_settle()  # after a process's first run: see memory/infra/process.py
        return run


_RUN_RELATED = ("context", "created_by")  # what an executed run is read with


def _run_read(run_id: int) -> Run:
    """The run with its context and creator (one plain statement)."""
    run = instance_read(Run, run_id, related=_RUN_RELATED)
    if run is None:
        raise Run.DoesNotExist(f"no run {run_id}")
    assert isinstance(run, Run)
    return run


def run_retry(*, access: ContextAccess, run: Run) -> Run:
    """A new pending run with the failed run's input (``retry_of`` links them)."""
    access.require_write(run.scope)
    executor_retry_check(RUN_LIFECYCLE, run, recover=lambda ids: runs_recover_stale(run_ids=ids))
    return run_create(
        access=access,
        text=run.input_text,
        scope=run.scope,
        infer=run.mode,
        triples=(run.input_payload or {}).get("triples"),
        source=run.source,
        retry_of=run,
    )


def runs_recover_stale(*, context: Context | None = None, run_ids: list[int] | None = None) -> int:
    """Fail the runs left ``running`` by a process that died; return how many
    (``executor_recover_stale``: the executor holds a session advisory lock on its run).
    Called when a worker picks up an ingest task, before a retry, and by ``manage.py
    ingest``. The dead worker's task result is failed too.
    """
    running = Run.objects.all()
    if context is not None:
        running = running.filter(context=context)
    if run_ids is not None:
        running = running.filter(pk__in=run_ids)
    return executor_recover_stale(
        RUN_LIFECYCLE,
        running,
        reason=lambda run: (
            f"the process executing this run ({run['worker'] or 'unknown'}) stopped before "
            "it finished; its writes were rolled back, so nothing of it was stored. "
            "Retry the run."
        ),
    )


def _run_access(run: Run) -> ContextAccess:
    payload = run.input_payload or {}
    return ContextAccess(
        context=run.context,
        user=run.created_by,
        role=Role(payload.get("role") or Role.VIEWER),
        grants=Grants.from_strings(list(payload.get("grants") or [])),
        trusted=bool(payload.get("trusted", True)),
    )


def _run_fail(run: Run, *, message: str, code: str, clock: StageClock) -> None:
    # Only a run still executing: one whose success committed with its writes stays
    # succeeded even if bookkeeping after the commit failed (a retry would write twice).
    Run.objects.filter(pk=run.pk, outcome=RunOutcome.RUNNING).update(
        outcome=RunOutcome.FAILED,
        error=message,
        finished_at=timezone.now(),
        timings=clock.timings(),
        summary={"error_code": code},
    )
