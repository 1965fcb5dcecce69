"""The writing half of an ingest run, inside its transaction: entities resolved, facts
written in one batch, and the result that reports both (services/ingest/report.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory.domain.access import ContextAccess
from memory.infra.stages import stage
from memory.models import Run, SourceKind, Turn
from memory.selectors.predicates import RegistryIndex
from memory.services.facts.batch import (
    FactBatchResult,
    FactInput,
    fact_batch_warn,
    facts_write_batch,
)
from memory.services.facts.trust import WriteTrust
from memory.services.ingest.entity_resolution import ResolutionPlan
from memory.services.ingest.entity_resolution_apply import resolution_apply
from memory.services.ingest.report import (
    IngestReport,
    IngestResult,
    new_predicate_examples_note,
)
from memory.services.ingest.triples import NormalizedExtraction


@dataclass
class IngestWritten:
    """What ``ingest_write`` wrote. Its facts' constraint warnings are attached last
    (``warn``): the statement reads the new facts, so it waits for the run's overlapped
    writes, and sent before them it would keep Python from preparing what follows."""

    result: IngestResult
    access: ContextAccess
    batch: FactBatchResult
    report: IngestReport

    def warn(self) -> None:
        fact_batch_warn(self.access, self.batch)
        self.report.fact_warnings(self.result)


def ingest_write(
    *,
    access: ContextAccess,
    scope: str,
    normalized: NormalizedExtraction,
    plan: ResolutionPlan,
    run: Run | None,
    source: str,
    preview: bool,
    trust: WriteTrust,
    turn: Turn | None,
    registry: RegistryIndex | None = None,
) -> IngestWritten:
    """Resolve the plan's entities and write the facts, each new fact pointing at
    ``turn`` (provenance: the text it came from), their predicates resolved with the
    run's registry load ``registry`` when given. The caller attaches the constraint
    warnings with ``warn()`` once nothing else is left to send."""
    with stage("entities"):
        resolved = resolution_apply(access=access, scope=scope, plan=plan, source=source)
    report = IngestReport(
        preview=preview, created={r.entity.pk for r in resolved.values() if r.created}
    )
    result = IngestResult(preview=preview)
    result.unresolved = [u.as_dict() for u in normalized.unresolved]
    result.warnings += normalized.warnings
    errors = {p.mention.ref: p.error for p in plan.plans if p.error is not None}
    for item in plan.plans:
        if item.error is not None:
            result.refuse(
                {
                    "section": "entities",
                    "position": None,
                    "item": {"name": item.mention.name, "type": item.mention.type},
                    "reason": item.error.message,
                    "code": item.error.code,
                }
            )
    for r in resolved.values():
        result.warnings += r.warnings
        if r.created:
            result.entities_created.append(report.entity(r.entity))
        else:
            result.entities_matched.append(
                {
                    **report.entity(r.entity),
                    "mention": r.plan.mention.name,
                    "matched_by": r.matched_by,
                    "score": r.plan.score,
                }
            )
        result.merges += report.merges(r)
        result.entity_changes += report.entity_changes(r)
    inputs: list[FactInput] = []
    drafts = []
    for draft in normalized.facts:
        subject = resolved.get(draft.subject.ref)
        object_ = resolved.get(draft.object.ref) if draft.object is not None else None
        if subject is None or (draft.object is not None and object_ is None):
            missing = draft.subject if subject is None else draft.object
            error = errors.get(missing.ref) if missing is not None else None
            result.refuse(
                {
                    "section": draft.section,
                    "position": draft.position,
                    "item": draft.item,
                    "reason": error.message if error else "its entity could not be resolved",
                    "code": error.code if error else "unresolved_entity",
                }
            )
            continue
        drafts.append(draft)
        inputs.append(
            FactInput(
                subject=subject.entity,
                predicate=draft.predicate,
                kind=draft.kind,
                object=object_.entity if object_ is not None else None,
                value=draft.value,
                confidence=draft.confidence,
                valid_from=draft.valid_from,
                value_screened=True,  # by the normalization (triples.py)
            )
        )
    with stage("facts"):
        batch = facts_write_batch(
            access=access,
            scope=scope,
            facts=inputs,
            source_kind=SourceKind.RUN if run is not None else SourceKind.API,
            source_ref=source,
            run=run,
            trust=trust,
            turn_id=turn.pk if turn is not None else None,
            registry=registry,
            new_entities=report.created_entities,
            warn=False,
        )
    report.facts(result, batch, drafts)
    report.refused_before_writing(result, normalized.unresolved)
    if _examples_may_be_missing(result, registry):
        new_predicate_examples_note(access.context, result, status="observed")
    return IngestWritten(result=result, access=access, batch=batch, report=report)


def _examples_may_be_missing(result: IngestResult, registry: RegistryIndex | None) -> bool:
    """Whether a predicate the run observed may still lack its drift example: not when
    the run's registry load showed one for each (the note only fills empty examples, so
    it would read and write nothing)."""
    if registry is None:
        return True
    for entry in result.new_predicates:
        if entry["status"] == "observed" and entry["examples"]:
            known = registry.by_name.get(entry["name"])
            if known is None or not known.example:
                return True
    return False


def ingest_turn_summary(turn: Turn | None) -> dict[str, Any] | None:
    if turn is None:
        return None
    return {"id": turn.pk, "thread": turn.thread or None, "ref": turn.ref or None}
