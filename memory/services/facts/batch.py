"""Fact writes: every write goes through this batch writer (``fact_write`` is a batch of
one), under the rules of services/facts/rules.py.

For one scope and a list of facts: every distinct predicate form is resolved once
(``predicates_resolve_for_write``), every subject and object is locked in one ordered
``SELECT … FOR UPDATE`` (ordered so two batches cannot deadlock; redirects of merged
entities are followed under the locks), the current facts of those subjects are read in
one query, and the facts are decided in order in memory (fact_batch_writer.py) —
re-observation of an identical current fact, aggregates updated in place, single-valued
collisions (``collision_decide``), including between facts of the same batch — then
written with a handful of bulk statements. The partial unique constraint
``fact_one_current_single_value`` stays the last line.

A fact that cannot be written (hostile or rejected predicate, unknown predicate in a strict
context, wrong shape) is reported on its item and the others are written. Strict-mode
refusals are recorded as drift by the caller after its transaction commits
(``fact_batch_record_refused``), as fact_write does.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from memory.domain.access import ContextAccess
from memory.kernel.errors import DomainError, NotFound, ValidationFailed
from memory.kernel.scopes import scope_validate
from memory.models import Fact, FactStatus, FactTrust, SourceKind
from memory.models import Run as RunModel
from memory.selectors.constraints import WrittenFact, constraint_violations_for_write
from memory.selectors.predicates import RegistryIndex, registry_index_for_write
from memory.services.entities.writes import entities_lock_live
from memory.services.facts.batch_plan import (
    AnyFact,
    BatchWriter,
    FactBatchItem,
    FactInput,
    WriteOutcome,
)
from memory.services.facts.rules import reobserve
from memory.services.facts.trust import WriteTrust, write_trust_decide
from memory.services.registry.resolution import (
    ResolvedPredicate,
    predicate_record_refused,
    predicates_resolve_for_write,
)

# The batch's interface: the inputs and outcomes are defined beside the writer.
__all__ = [
    "AnyFact",
    "FactBatchItem",
    "FactBatchResult",
    "FactInput",
    "WriteOutcome",
    "fact_batch_record_refused",
    "fact_batch_warn",
    "fact_fold_identical",
    "facts_write_batch",
]


@dataclass
class FactBatchResult:
    items: list[FactBatchItem]
    # Raw forms a strict context refused: record them with fact_batch_record_refused
    # once the caller's transaction has committed.
    refused_predicates: list[str] = field(default_factory=list)
    # The registry load the batch resolved its predicates with (fact_batch_warn reads it).
    registry: RegistryIndex | None = None


def facts_write_batch(
    *,
    access: ContextAccess,
    scope: str,
    facts: list[FactInput],
    source_kind: str = SourceKind.API,
    source_ref: str = "",
    run: RunModel | None = None,
    document_id: int | None = None,
    trust: WriteTrust | None = None,
    turn_id: int | None = None,
    registry: RegistryIndex | None = None,
    new_entities: Collection[int] = (),
    warn: bool = True,
) -> FactBatchResult:
    """Write ``facts`` into ``scope``; one item per input, in order (see the module doc).

    ``trust``: what the new facts take (services/facts/trust.py); by default what the
    context's ``fact_review`` gives this writer's facts stated directly (not extracted).
    ``turn_id``: the turn the new facts came from (an ingest run's); facts only
    re-observed or updated in place keep the turn they first came from. ``registry``: the
    caller's registry load to resolve predicates with (predicates_resolve_for_write).
    ``new_entities``: entities the caller created in its transaction, which have no
    facts yet to read (a run's new entities: often every subject of a bulk turn).
    ``warn``: attach the constraint violations each new fact is part of (``item.warnings``)
    before returning; ``False`` leaves that to the caller's ``fact_batch_warn``, which an
    ingest run sends last, once its overlapped writes are on their way (the statement
    reads the new facts, so it waits for them)."""
    scope = scope_validate(scope)
    access.require_write(scope)
    items = [FactBatchItem(input=f) for f in facts]
    if not items:
        return FactBatchResult(items=[])
    _check_entities(access, facts)
    # The checks above raise before anything is written. No savepoint of its own: its
    # callers (an ingest run, ``fact_write``) hold an atomic block that a failure here
    # rolls back whole, and a savepoint costs two round trips a batch.
    with transaction.atomic(savepoint=False):
        return _write_checked(
            access=access,
            scope=scope,
            items=items,
            base={
                **_base_fields(access, scope, source_kind, source_ref, run, document_id),
                "turn_id": turn_id,
            },
            trust=trust,
            registry=registry,
            new_entities=new_entities,
            warn=warn,
        )


def _write_checked(
    *,
    access: ContextAccess,
    scope: str,
    items: list[FactBatchItem],
    base: dict[str, Any],
    trust: WriteTrust | None,
    registry: RegistryIndex | None,
    new_entities: Collection[int],
    warn: bool,
) -> FactBatchResult:
    """``facts_write_batch`` once its grants and entities are checked: resolve, lock,
    read the current state, decide each item, write."""
    facts = [item.input for item in items]
    registry = registry or registry_index_for_write(context=access.context)
    resolved, refused = predicates_resolve_for_write(
        context=access.context, raws={f.predicate for f in facts}, index=registry
    )
    _read_inverse_forwards(items, resolved)
    facts = [item.input for item in items]
    # The lock that makes supersession and re-observation safe under concurrent writers:
    # every write for one subject queues here. Objects are locked too, so a merge cannot
    # move one away between our read and our insert.
    names: dict[int, str] = {}
    # ``.id``, not ``.pk``: the property is a lookup a fact, and a bulk turn has thousands.
    live = entities_lock_live(
        {f.subject.id for f in facts} | {f.object.id for f in facts if f.object is not None},
        names=names,
    )
    predicate_ids = {r.predicate.pk for r in resolved.values() if isinstance(r, ResolvedPredicate)}
    subject_ids = {live[f.subject.id] for f in facts if f.subject.id in live}
    state = _current_facts(scope, subject_ids - set(new_entities), predicate_ids)
    writer = BatchWriter(
        access=access,
        scope=scope,
        now=timezone.now(),
        state=state,
        base=base,
        names=names,
        trust=trust
        or write_trust_decide(
            policy=access.context.fact_review,
            writer_trusted=access.trusted,
            extracted=False,
            turn_flagged=False,
        ),
    )
    for item in items:
        if item.error is not None:
            continue
        outcome = resolved[item.input.predicate]
        if isinstance(outcome, DomainError):
            item.error = outcome
            continue
        item.resolved = outcome
        data = item.input
        if data.subject.pk not in live or (data.object is not None and data.object.pk not in live):
            item.error = NotFound("an entity of this fact was deleted while it was written")
            continue
        object_id = live[data.object.pk] if data.object is not None else None
        try:
            writer.decide(item, subject_id=live[data.subject.pk], object_id=object_id)
        except ValidationFailed as exc:
            item.error = exc
    writer.flush()
    batch = FactBatchResult(items=items, refused_predicates=refused, registry=registry)
    if warn:
        fact_batch_warn(access, batch)
    return batch


def fact_batch_warn(access: ContextAccess, batch: FactBatchResult) -> None:
    """Attach to each fact the batch wrote the constraint violations it is part of: one
    statement for the batch, none when no constraint concerns what it wrote."""
    items, registry = batch.items, batch.registry
    if registry is None:
        return
    written = [
        _written(item.fact.pk, item.fact, item.input, item.resolved)
        for item in items
        if item.fact is not None
        and item.fact.pk is not None
        and item.resolved is not None
        and item.fact.status == FactStatus.CURRENT
        and item.fact.trust == FactTrust.TRUSTED
    ]
    if not written:
        return
    found = constraint_violations_for_write(
        access=access, written=written, registry=registry.by_name.values()
    )
    if not found:
        return
    for item in items:
        if item.fact is not None and item.fact.pk in found:
            item.warnings = found[item.fact.pk]


def _written(
    fact_id: int, fact: AnyFact, data: FactInput, resolved: ResolvedPredicate
) -> WrittenFact:
    """A written fact as the constraint check reads it; an end a merge redirected while
    the batch waited for its locks has a type the batch did not read."""
    subject_type = data.subject.type if fact.subject_id == data.subject.id else None
    object_type = None
    if data.object is not None and fact.object_id == data.object.id:
        object_type = data.object.type
    return WrittenFact(
        id=fact_id,
        subject_id=fact.subject_id,
        predicate=resolved.predicate,
        subject_type=subject_type,
        has_object=fact.object_id is not None,
        object_type=object_type,
    )


def _read_inverse_forwards(
    items: list[FactBatchItem], resolved: dict[str, ResolvedPredicate | DomainError]
) -> None:
    """A write through an inverse alias (``Acme employs Alex``) is stored as its target
    read forwards (``Alex works_at Acme``): the ends are swapped before anything is locked."""
    for item in items:
        outcome = resolved.get(item.input.predicate)
        if not isinstance(outcome, ResolvedPredicate) or not outcome.inverse:
            continue
        if item.input.object is None:
            item.error = ValidationFailed(
                f"{item.input.predicate[:80]!r} is an inverse alias of "
                f"{outcome.canonical!r}: a fact through it needs an object entity",
                code="missing_object",
            )
            continue
        item.input = replace(item.input, subject=item.input.object, object=item.input.subject)


def fact_batch_record_refused(*, access: ContextAccess, raws: list[str]) -> None:
    """Record the forms a strict context refused as drift (after the batch committed)."""
    for raw in dict.fromkeys(raws):
        predicate_record_refused(context=access.context, raw=raw)


def _check_entities(access: ContextAccess, facts: list[FactInput]) -> None:
    scopes: set[str] = set()
    for fact in facts:
        for entity in (fact.subject, fact.object):
            if entity is None:
                continue
            if entity.pk is None or entity.context_id != access.context.pk:
                raise ValidationFailed("entities must belong to this context", code="wrong_context")
            scopes.add(entity.scope)
    for entity_scope in scopes:
        access.require_read(entity_scope)


def _current_facts(
    scope: str, subject_ids: set[int], predicate_ids: set[int]
) -> dict[tuple[int, int], list[AnyFact]]:
    state: dict[tuple[int, int], list[AnyFact]] = defaultdict(list)
    if not subject_ids or not predicate_ids:
        return state
    # Rejected claims are read too, whatever their status: one written again stays rejected.
    current = Fact.objects.filter(
        Q(status=FactStatus.CURRENT) | Q(trust=FactTrust.REJECTED),
        subject_id__in=subject_ids,
        predicate_id__in=predicate_ids,
        scope=scope,
    ).order_by("pk")
    for fact in current:
        state[(fact.subject_id, fact.predicate_id)].append(fact)
    return state


def _base_fields(
    access: ContextAccess,
    scope: str,
    source_kind: str,
    source_ref: str,
    run: RunModel | None,
    document_id: int | None,
) -> dict[str, Any]:
    return {
        "context": access.context,
        "scope": scope,
        "source_kind": source_kind,
        "source_ref": source_ref[:300],
        "run": run,
        "document_id": document_id,
        "created_by": access.user if getattr(access.user, "is_authenticated", False) else None,
    }


def fact_fold_identical(*, current: Fact, moved: Fact) -> dict[str, Any]:
    """Fold ``moved``, a fact a curation (drift alias, merge) brings onto an identical
    ``current`` one, into it as a re-observation (``fact_rules.reobserve``); return
    ``current``'s counts from before, which the action's undo record keeps."""
    prior = {
        "id": current.pk,
        "observed_count": current.observed_count,
        "confidence": current.confidence,
        "last_seen_at": current.last_seen_at,
    }
    seen = reobserve(
        observed_count=current.observed_count,
        confidence=current.confidence,
        last_seen_at=current.last_seen_at,
        seen_count=moved.observed_count,
        seen_confidence=moved.confidence,
        seen_at=moved.last_seen_at,
    )
    current.observed_count, current.confidence = seen.observed_count, seen.confidence
    current.last_seen_at = seen.last_seen_at
    current.save(update_fields=["observed_count", "confidence", "last_seen_at"])
    return prior
