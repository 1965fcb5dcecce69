"""Ingest: one turn into the graph, as a Run. The API, the task and ``manage.py ingest``
all go through ``run_create`` then ``run_execute``, which calls ``memory_ingest``.

``infer`` modes: ``llm`` (the chat model extracts, choosing words from the vocabulary),
``triples`` (the caller supplies entities and facts), ``preview`` (triples when given,
else the model: everything runs, including the writes, inside a transaction that is then
rolled back — the result is exactly what a write would have done, and nothing stays but
the run's own record), ``none`` (the text is kept as a turn only).

Every accepted memory with a text (any mode but ``preview``) is kept as a searchable
**turn** (``memory.services.ingest.turns``), written with its run, with the caller's optional
``speaker``, ``said_at``, ``thread`` and ``ref``; the facts a run extracts point back to
its turn.

A request that is not acceptable (bad scope or grant, text too large, malformed triples,
no chat model for ``llm``) is refused before a Run exists. Once accepted, the input is
never lost: a run that fails keeps it with its reason and can be retried. All graph writes
of a run happen in one transaction together with the run's success record, so a run that
fails — or whose process dies — leaves nothing half-written.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from django.conf import settings
from django.db import DatabaseError, OperationalError, connection, transaction
from django.utils import timezone
from psycopg.errors import DeadlockDetected
from pydantic import ValidationError

from memory.domain.access import ContextAccess
from memory.domain.screening import text_screen
from memory.infra.locks import RUN_LOCK
from memory.infra.pg_overlap import foreign_keys_checked_per_statement, overlap_window
from memory.infra.pg_rows import instance_insert, instance_read, instance_update
from memory.infra.process import process_settle
from memory.infra.queueing import INGEST_RUN_TASK, task_enqueue_on_commit
from memory.infra.stages import StageClock
from memory.kernel.errors import DomainError, ServiceUnavailable, ValidationFailed
from memory.kernel.scopes import Grants, scope_validate
from memory.llm.client import chat_model_configured
from memory.llm.schemas import ExtractionOutput, TriplesInput
from memory.models import (
    Context,
    DuplicateKey,
    Fact,
    Role,
    Run,
    RunOutcome,
)
from memory.search.indexing import search_index_batch
from memory.selectors.predicates import RegistryIndex, registry_index_for_write
from memory.selectors.vocabulary import scopes_visible_from
from memory.services.executor import (
    Lifecycle,
    executor_claim,
    executor_recover_stale,
    executor_retry_check,
)
from memory.services.facts.batch import fact_batch_record_refused
from memory.services.facts.trust import WriteTrust, write_trust_decide
from memory.services.ingest.entity_resolution import resolution_plan
from memory.services.ingest.extract import ingest_extract, ingest_record_calls
from memory.services.ingest.report import (
    IngestResult,
    ingest_log,
    new_predicate_examples_note,
    refused_forms,
)
from memory.services.ingest.triples import (
    NormalizedExtraction,
    extraction_drop_secrets,
    extraction_normalize,
)
from memory.services.ingest.turns import (
    TurnFields,
    turn_create,
    turn_move_to_run,
    turn_of_run,
)
from memory.services.ingest.write import ingest_turn_summary, ingest_write
from memory.services.registry.resolution import predicate_refusal_check
from memory.services.registry.usage import vocabulary_usage_compact

logger = logging.getLogger("memory.ingest")

Infer = Literal["llm", "triples", "preview", "none"]
INFER_MODES: tuple[str, ...] = ("llm", "triples", "preview", "none")
LLM_DEFAULT_CONFIDENCE = 0.8
TRIPLES_DEFAULT_CONFIDENCE = 1.0
MAX_SOURCE_CHARS = 300
COMPACT_EVERY_RUNS = 50
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


class TextTooLarge(ValidationFailed):
    status = 413
    code = "text_too_large"


# --- runs ---------------------------------------------------------------------------------


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
    _check_input(text=text, infer=infer, triples=triples, source=source)
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


def _check_input(*, text: str, infer: str, triples: dict[str, Any] | None, source: str) -> None:
    if infer not in INFER_MODES:
        raise ValidationFailed(
            f"infer must be one of {', '.join(INFER_MODES)}", code="invalid_infer"
        )
    size = len(text.encode("utf-8"))
    limit = settings.MEMORY_MAX_TEXT_BYTES
    if size > limit:
        raise TextTooLarge(
            f"the text is {size} bytes; at most {limit} bytes are accepted per memory "
            "(split it into several turns, or raise MEMORY_MAX_TEXT_BYTES)",
            details={"bytes": size, "limit": limit},
        )
    if len(source) > MAX_SOURCE_CHARS:
        raise ValidationFailed(
            f"source can be at most {MAX_SOURCE_CHARS} characters", code="invalid_source"
        )
    if infer in ("llm", "none") and triples is not None:
        raise ValidationFailed(
            f"infer={infer} takes text only; send triples with infer=triples",
            code="unexpected_triples",
        )
    if infer == "triples" and triples is None:
        raise ValidationFailed("infer=triples needs triples", code="missing_triples")
    if triples is not None:
        triples_parse(triples)
    uses_model = infer == "llm" or (infer == "preview" and triples is None)
    if (infer == "none" or uses_model) and not text.strip():
        raise ValidationFailed(f"infer={infer} needs a non-empty text", code="missing_text")
    if uses_model and not chat_model_configured():
        raise ServiceUnavailable(
            "no chat model is configured, so infer=llm cannot run: set MEMORY_CHAT_MODEL "
            "(and OPENAI_BASE_URL / OPENAI_API_KEY), or send triples with infer=triples",
            code="chat_model_not_configured",
        )


def triples_parse(triples: Any) -> TriplesInput:
    """Validate a caller's triples (ValidationFailed "invalid_triples" with the errors)."""
    try:
        return TriplesInput.model_validate(triples)
    except ValidationError as exc:
        errors = [
            {"at": _triples_path(err["loc"]), "message": _triples_problem(err)}
            for err in exc.errors()[:20]
        ]
        raise ValidationFailed(
            f"triples are not valid: {errors[0]['at']}: {errors[0]['message']}"
            + (f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""),
            code="invalid_triples",
            details=errors,
        ) from None


def _triples_path(loc: tuple[int | str, ...]) -> str:
    """A JSON path as a caller writes it: ``relations[0].confidance``."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    return path or "triples"


def _triples_problem(err: Any) -> str:
    if err["type"] == "extra_forbidden":
        return "unknown field"
    return str(err["msg"])


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
            # what the database holds (_run_succeed; the LLM fields by ingest_extract).
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


def _run_succeed(run: Run, result: IngestResult, clock: StageClock) -> None:
    run.result = result.as_dict()
    run.summary = result.summary()
    # Items refused or changed on the way make a distinct outcome (docs/decisions/0044): a run
    # that reports "succeeded" while it dropped a fact hides the refusal in its JSON.
    run.outcome = (
        RunOutcome.SUCCEEDED_WITH_WARNINGS
        if result.unresolved or result.warnings
        else RunOutcome.SUCCEEDED
    )
    run.error = ""
    run.finished_at = timezone.now()
    run.timings = clock.timings()
    instance_update(run, ["result", "summary", "outcome", "error", "finished_at", "timings"])


# --- the pipeline -------------------------------------------------------------------------


WRITE_ATTEMPTS = 3  # a write transaction broken by a deadlock is run again, up to this


def _write_transaction(
    *,
    access: ContextAccess,
    scope: str,
    normalized: Any,
    plan: Any,
    run: Run | None,
    source: str,
    preview: bool,
    turn: Any,
    trust: WriteTrust,
    clock: StageClock,
    registry: RegistryIndex,
) -> IngestResult:
    """The run's writes in one transaction (rolled back for a preview)."""
    with transaction.atomic(), _overlapped_if_large(normalized):
        # Search postings are refreshed in a few statements when this block ends.
        with clock.stage("write"), search_index_batch():
            result = ingest_write(
                access=access,
                scope=scope,
                normalized=normalized,
                plan=plan,
                run=run,
                source=source or (f"run {run.pk}" if run is not None else "ingest"),
                preview=preview,
                trust=trust,
                # New facts are inserted pointing at the turn, rather than updated to it
                # afterwards: the update wrote every fact row (and all its indexes) twice.
                turn=turn if not preview else None,
                registry=registry,
            )
            result.turn = ingest_turn_summary(turn)
        if preview:
            transaction.set_rollback(True)
        elif run is not None:
            _run_succeed(run, result, clock)
    return result


# From this many facts a run's writes overlap Python (decision 0112). Below it the
# server's part of each statement is well under a millisecond, and the pipeline's own
# round trips and bookkeeping cost a small run more than the overlap saves.
OVERLAP_FROM_FACTS = 200


@contextmanager
def _overlapped_if_large(normalized: NormalizedExtraction) -> Iterator[None]:
    """Inside a large run's transaction: the facts', postings' and keys' inserts run on
    the server while Python prepares what follows them, and the facts' and keys'
    references are checked inside those statements rather than in the commit, which
    nothing overlaps (memory/infra/pg_overlap.py, overlap_window)."""
    if len(normalized.facts) < OVERLAP_FROM_FACTS:
        yield
        return
    with overlap_window():
        foreign_keys_checked_per_statement(Fact, DuplicateKey)
        yield


def memory_ingest(
    *,
    access: ContextAccess,
    text: str,
    scope: str,
    infer: str,
    triples: dict[str, Any] | None = None,
    source: str = "",
    run: Run | None = None,
    clock: StageClock | None = None,
) -> IngestResult:
    """Turn → graph (SPEC §4). With ``run``, its prompt, model output, tokens and, in the
    write transaction, its success are recorded on it. Raises DomainError (LLMError among them)."""
    clock = clock or StageClock()
    scope = scope_validate(scope)
    access.require_write(scope)
    # A memory is kept as a turn only when it has a text (run_create; a retry takes the
    # turn over with the same text): without one there is no turn to look up.
    turn = turn_of_run(run) if text.strip() else None
    if infer == "none":
        # The turn, written when the memory was accepted, is all there is to keep.
        result = IngestResult(turn=ingest_turn_summary(turn))
        if run is not None:
            _run_succeed(run, result, clock)
        return result
    preview = infer == "preview"
    visible = scopes_visible_from(scope=scope, grants=access.grants)
    screened = text_screen(text)
    if infer == "llm" or (preview and triples is None):
        # The model reads the text with its secrets redacted: a secret never leaves.
        extraction: ExtractionOutput | TriplesInput = ingest_extract(
            access=access, scope=scope, text=screened.text, visible=visible, run=run, clock=clock
        )
        confidence = LLM_DEFAULT_CONFIDENCE
    else:
        extraction, confidence = triples_parse(triples), TRIPLES_DEFAULT_CONFIDENCE
    trust = write_trust_decide(
        policy=access.context.fact_review,
        writer_trusted=access.trusted,
        extracted=isinstance(extraction, ExtractionOutput),
        turn_flagged=bool(turn.flags if turn is not None else screened.flags),
    )
    # One registry load for the run: the refusal check below and the fact write resolve
    # with it. Nothing between them writes to the registry; the write's own new (observed)
    # forms go to the database only, so a deadlock retry finds the load as it was.
    registry = registry_index_for_write(context=access.context)
    normalized = extraction_drop_secrets(
        extraction_normalize(
            extraction,
            default_confidence=confidence,
            predicate_check=predicate_refusal_check(context=access.context, index=registry),
        ),
        screened.secret_values,
    )
    with clock.stage("resolve"):
        plan = resolution_plan(access=access, visible_scopes=visible, mentions=normalized.mentions)
    ingest_record_calls(run, plan)
    # Inside a caller's transaction a deadlock aborts that one too: nothing to run again.
    attempts = 1 if connection.in_atomic_block else WRITE_ATTEMPTS
    for attempt in range(1, attempts + 1):
        try:
            result = _write_transaction(
                access=access,
                scope=scope,
                normalized=normalized,
                plan=plan,
                run=run,
                source=source,
                preview=preview,
                turn=turn,
                trust=trust,
                clock=clock,
                registry=registry,
            )
            break
        except OperationalError as exc:
            # PostgreSQL broke a deadlock by rolling this transaction back as a whole;
            # its advice is to run it again, and nothing of it was stored.
            if attempt == attempts or not isinstance(exc.__cause__, DeadlockDetected):
                raise
            logger.info("ingest write deadlocked (attempt %s); writing again", attempt)
    if preview:
        if run is not None:
            _run_succeed(run, result, clock)
        return result
    fact_batch_record_refused(access=access, raws=refused_forms(result))
    new_predicate_examples_note(access.context, result, status="refused")
    if run is None or run.pk % COMPACT_EVERY_RUNS == 0:
        # Usage deltas of a scope written only by triples would otherwise pile up until
        # the next model run gathers its vocabulary (which folds them first).
        vocabulary_usage_compact(context=access.context, scopes=[scope])
    return result
