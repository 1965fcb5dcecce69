"""Ingest's pipeline: one turn into the graph (``memory_ingest``), as a run executes it
(``memory.services.ingest.run``) or a caller runs it directly.

``infer`` modes: ``llm`` (the chat model extracts, choosing words from the vocabulary),
``triples`` (the caller supplies entities and facts), ``preview`` (triples when given,
else the model: everything runs, including the writes, inside a transaction that is then
rolled back — the result is exactly what a write would have done, and nothing stays but
the run's own record), ``none`` (the text is kept as a turn only).

The stages, each timed on the run's clock: screening the text, extraction (or the
caller's triples), normalizing them against the registry, entity resolution (planned
outside any transaction: it may call the embedder and the judge), then every graph write
in one transaction together with the run's success record — run again when PostgreSQL
breaks a deadlock by rolling it back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import transaction
from django.utils import timezone

from memory.domain.access import ContextAccess
from memory.domain.screening import text_screen
from memory.infra.pg_overlap import foreign_keys_checked_per_statement, overlap_window
from memory.infra.pg_rows import instance_update
from memory.infra.stages import StageClock
from memory.infra.transactions import transaction_retried
from memory.kernel.scopes import scope_validate
from memory.llm.schemas import ExtractionOutput, TriplesInput
from memory.models import DuplicateKey, Fact, Run, RunOutcome
from memory.search.indexing import search_index_batch
from memory.selectors.predicates import RegistryIndex, registry_index_for_write
from memory.selectors.vocabulary import scopes_visible_from
from memory.services.facts.batch import fact_batch_record_refused
from memory.services.facts.trust import WriteTrust, source_relayed, write_trust_decide
from memory.services.ingest.acceptance import triples_parse
from memory.services.ingest.entity_resolution import resolution_plan
from memory.services.ingest.extract import ingest_extract, ingest_record_calls
from memory.services.ingest.report import (
    IngestResult,
    new_predicate_examples_note,
    refused_forms,
)
from memory.services.ingest.triples import (
    NormalizedExtraction,
    extraction_drop_secrets,
    extraction_normalize,
)
from memory.services.ingest.turns import turn_of_run
from memory.services.ingest.write import ingest_turn_summary, ingest_write
from memory.services.registry.resolution import predicate_refusal_check
from memory.services.registry.usage import vocabulary_usage_compact

logger = logging.getLogger("memory.ingest")

LLM_DEFAULT_CONFIDENCE = 0.8
TRIPLES_DEFAULT_CONFIDENCE = 1.0
COMPACT_EVERY_RUNS = 50


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
    """Turn → graph. With ``run``, its prompt, model output, tokens and, in the
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
        relayed=source_relayed(source),
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
    # A transaction PostgreSQL breaks (a deadlock) is run again from here: the extraction
    # and the resolution plan are kept, so no second LLM call (docs/decisions/0056, 0119).
    result = transaction_retried(
        lambda: _write_transaction(
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
        ),
        what="ingest write",
    )
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
    """The run's writes, inside the one transaction ``transaction_retried`` opens (rolled
    back for a preview)."""
    with _overlapped_if_large(normalized):
        # Search postings are refreshed in a few statements when this block ends.
        with clock.stage("write"), search_index_batch():
            written = ingest_write(
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
            result = written.result
            result.turn = ingest_turn_summary(turn)
        # Last, once the postings are sent: it waits for the run's writes (see warn).
        with clock.stage("warnings"):
            written.warn()
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


def _run_succeed(run: Run, result: IngestResult, clock: StageClock) -> None:
    """Record the run's success on ``run`` itself; after writes, inside their
    transaction, so that it commits with them."""
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
