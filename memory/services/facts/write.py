"""Fact writes one at a time: ``fact_write`` is a batch of one (services/facts/batch.py),
so a single write and a batch follow the same rules (services/facts/rules.py), under the
same subject locks and the partial unique constraint ``fact_one_current_single_value``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils import timezone

from memory.domain.access import ContextAccess
from memory.domain.entity_names import entity_type_normalize
from memory.infra.transactions import transaction_retried
from memory.kernel.errors import ValidationFailed
from memory.kernel.scopes import scope_validate
from memory.models import Conflict, Entity, Fact, FactStatus, SourceKind
from memory.models import Run as RunModel
from memory.selectors.constraints import Violation
from memory.selectors.entities import entity_get
from memory.selectors.vocabulary import scope_lineage
from memory.services.entities.exact_names import entity_exact_name_find
from memory.services.entities.writes import entities_lock_live, entity_find, entity_upsert
from memory.services.facts.batch import (
    AnyFact,
    FactBatchItem,
    FactInput,
    WriteOutcome,
    facts_write_batch,
)
from memory.services.registry.resolution import (
    ResolvedPredicate,
    UnknownPredicate,
    predicate_record_refused,
)


@dataclass
class FactWriteResult:
    fact: Fact
    outcome: WriteOutcome
    resolved: ResolvedPredicate
    superseded: Fact | None = None
    conflict: Conflict | None = None
    # A pending value of a single-valued slot: the trusted value it would replace.
    proposes_to_replace: int | None = None
    rejected_before: bool = False  # the claim was rejected before and stays rejected
    # Constraints of the registry the fact breaks (kept, not refused: reported).
    warnings: list[Violation] = field(default_factory=list)


def fact_write(
    *,
    access: ContextAccess,
    subject: Entity,
    predicate: str,
    scope: str | None = None,
    object: Entity | None = None,
    value: Any = None,
    kind: str | None = None,
    confidence: float = 1.0,
    importance: float | None = None,
    valid_from: datetime | None = None,
    valid_until: datetime | None = None,
    source_kind: str = SourceKind.API,
    source_ref: str = "",
    run: RunModel | None = None,
    document_id: int | None = None,
) -> FactWriteResult:
    """Write one fact. ``predicate`` may be in any form (``worksAt``); it is canonicalized.

    A refused fact raises its error and writes nothing. In strict mode an unknown
    predicate raises ``UnknownPredicate``, but the predicate is still recorded as drift
    (outside the refused transaction, unless the caller wraps this call in its own).
    """
    try:
        return _write_one(
            access=access,
            subject=subject,
            predicate=predicate,
            scope=scope,
            object_=object,
            value=value,
            kind=kind,
            confidence=confidence,
            importance=importance,
            valid_from=valid_from,
            valid_until=valid_until,
            source_kind=source_kind,
            source_ref=source_ref,
            run=run,
            document_id=document_id,
        )
    except UnknownPredicate:
        predicate_record_refused(context=access.context, raw=predicate)
        raise


# An entity a fact names: its id, or a description ({"name", "type", "scope"}) to upsert.
EntityRef = int | dict[str, Any]


def fact_write_with_entities(
    *,
    access: ContextAccess,
    subject: EntityRef,
    predicate: str,
    object: EntityRef | None = None,
    scope: str | None = None,
    **fields: Any,
) -> FactWriteResult:
    """Write one fact whose entities are given by id or by name (the API's POST facts).

    Named entities are upserted in the same transaction as the fact, so a refused fact
    leaves no entity behind; a predicate a strict context refused is recorded as drift
    once that transaction has rolled back. ``fields`` are ``fact_write``'s.
    """

    def write() -> FactWriteResult:
        refs = [subject, *([object] if object is not None else [])]
        # The entities that exist already, locked together in id order before the upserts
        # lock them one at a time in subject–object order (docs/decisions/0119).
        entities_lock_live(_existing_ids(access, refs, scope))
        subject_entity = _entity_for(access, subject, scope)
        object_entity = _entity_for(access, object, scope) if object is not None else None
        return _write_one(
            access=access,
            subject=subject_entity,
            predicate=predicate,
            scope=scope,
            object_=object_entity,
            **fields,
        )

    try:
        return transaction_retried(write, what="fact write")
    except UnknownPredicate:
        predicate_record_refused(context=access.context, raw=predicate)
        raise


def _existing_ids(access: ContextAccess, refs: list[EntityRef], scope: str | None) -> list[int]:
    ids = []
    for ref in refs:
        if isinstance(ref, int):
            ids.append(ref)
        elif found := _exact_named(access, ref, scope) or entity_find(
            access=access, name=ref["name"], type=ref.get("type"), scope=ref.get("scope") or scope
        ):
            ids.append(found.pk)
    return ids


def _exact_named(access: ContextAccess, ref: dict[str, Any], scope: str | None) -> Entity | None:
    """The entity bearing exactly this name, wherever the writer may read it
    (services/entities/exact_names.py); None when there is none or no scope to ask from."""
    entity_scope = ref.get("scope") or scope
    if not entity_scope:
        return None
    given_type = ref.get("type")
    return entity_exact_name_find(
        access=access,
        name=ref["name"],
        type_=entity_type_normalize(given_type) if given_type else None,
        lineage=scope_lineage(scope_validate(entity_scope)),
    )


def _entity_for(access: ContextAccess, ref: EntityRef, scope: str | None) -> Entity:
    if isinstance(ref, int):
        return entity_get(access=access, entity_id=ref)
    entity_scope = ref.get("scope") or scope
    if not entity_scope:
        raise ValidationFailed(
            "an entity given by name needs a scope (on the entity or on the fact)",
            code="missing_scope",
        )
    # The entity bearing exactly this name, wherever the writer may read it, before a new
    # one or a key match in ``entity_scope``.
    if (named := _exact_named(access, ref, scope)) is not None:
        return named
    return entity_upsert(
        access=access, name=ref["name"], type=ref.get("type"), scope=entity_scope
    ).entity


def _write_one(
    *,
    access: ContextAccess,
    subject: Entity,
    predicate: str,
    scope: str | None,
    object_: Entity | None,
    value: Any = None,
    kind: str | None = None,
    confidence: float = 1.0,
    importance: float | None = None,
    valid_from: datetime | None = None,
    valid_until: datetime | None = None,
    source_kind: str = SourceKind.API,
    source_ref: str = "",
    run: RunModel | None = None,
    document_id: int | None = None,
) -> FactWriteResult:
    """``fact_write`` without recording a refused predicate (its callers do that)."""
    fact_input = FactInput(
        subject=subject,
        predicate=predicate,
        kind=kind,
        object=object_,
        value=value,
        confidence=confidence,
        importance=importance,
        valid_from=valid_from,
        valid_until=valid_until,
    )

    def write() -> FactBatchItem:
        batch = facts_write_batch(
            access=access,
            scope=scope_validate(scope if scope is not None else subject.scope),
            facts=[fact_input],
            source_kind=source_kind,
            source_ref=source_ref,
            run=run,
            document_id=document_id,
        )
        item = batch.items[0]
        if item.error is not None:
            raise item.error  # rolls back what resolving its predicate recorded
        return item

    item = transaction_retried(write, what="fact write")
    assert item.outcome is not None and item.resolved is not None and item.fact is not None
    return FactWriteResult(
        fact=_loaded(item.fact),
        outcome=item.outcome,
        resolved=item.resolved,
        superseded=_loaded(item.superseded) if item.superseded is not None else None,
        conflict=item.conflict,
        proposes_to_replace=item.proposes_to_replace.pk if item.proposes_to_replace else None,
        rejected_before=item.rejected_before,
        warnings=item.warnings,
    )


def _loaded(fact: AnyFact) -> Fact:
    """The stored row of a fact the batch wrote (it inserts rows, not model instances)."""
    assert fact.pk is not None
    return Fact.objects.select_related("subject", "object", "predicate").get(pk=fact.pk)


def facts_expire(*, now: datetime | None = None) -> int:
    """Mark current facts whose ``valid_until`` has passed as expired."""
    now = now or timezone.now()
    return Fact.objects.filter(status=FactStatus.CURRENT, valid_until__lt=now).update(
        status=FactStatus.EXPIRED, status_changed_at=now
    )
