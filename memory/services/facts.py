"""Fact writes: one service for every source (API, ingest runs, documents, seeding).

Invariants kept here, under a row lock on the subject entity (and, as a last line, the
partial unique constraint ``fact_one_current_single_value``):
- single-valued predicates: a new value supersedes the current one for the same
  (subject, predicate, scope) only when its confidence is ≥ 0.7 and ≥ the prior's;
  otherwise the new fact is kept as ``contested`` with an open Conflict;
- aggregates are updated in place;
- an identical current fact is re-observed (last seen, count), never duplicated.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from django.db import transaction
from django.utils import timezone

from memory.access import ContextAccess
from memory.errors import NotFound, ValidationFailed
from memory.models import Conflict, Entity, Fact, FactKind, FactStatus, Predicate, SourceKind
from memory.models import Run as RunModel
from memory.models.predicate import PredicateKind
from memory.scopes import scope_validate
from memory.search.indexing import facts_index
from memory.services.entities import entities_lock_live
from memory.services.predicates import (
    ResolvedPredicate,
    UnknownPredicate,
    predicate_record_refused,
    predicate_resolve_for_write,
)

SUPERSEDE_CONFIDENCE_FLOOR = 0.7
MAX_VALUE_CHARS = 64 * 1024

WriteOutcome = Literal["created", "reobserved", "updated", "superseded", "conflict"]


@dataclass
class FactWriteResult:
    fact: Fact
    outcome: WriteOutcome
    resolved: ResolvedPredicate
    superseded: Fact | None = None
    conflict: Conflict | None = None


def fact_value_text(value: Any) -> str:
    if value is None:
        return ""
    text = (
        value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
    )
    if len(text) > MAX_VALUE_CHARS:
        raise ValidationFailed(
            f"a fact value can be at most {MAX_VALUE_CHARS} characters", code="value_too_long"
        )
    return text


def fact_unit_value(name: str, value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise ValidationFailed(
            f"{name} must be between 0 and 1, got {value}", code=f"invalid_{name}"
        )
    return float(value)


def _kind_for(predicate: Predicate, *, object_: Entity | None, value: Any, kind: str | None) -> str:
    if kind is not None:
        if kind not in FactKind.values:
            raise ValidationFailed(
                f"kind must be one of {', '.join(FactKind.values)}", code="invalid_kind"
            )
        return kind
    if predicate.kind == PredicateKind.ACTION:
        return FactKind.ACTION
    if object_ is not None or (predicate.kind == PredicateKind.RELATION and value is None):
        return FactKind.RELATION
    if predicate.kind == PredicateKind.NARRATIVE:
        return FactKind.NARRATIVE
    return FactKind.ATTRIBUTE


def fact_check_shape(kind: str, *, object_: Entity | None, value: Any) -> None:
    if kind == FactKind.RELATION and object_ is None:
        raise ValidationFailed("a relation fact needs an object entity", code="missing_object")
    if kind in (FactKind.ATTRIBUTE, FactKind.NARRATIVE) and value is None:
        raise ValidationFailed(f"an {kind} fact needs a value", code="missing_value")
    if kind in (FactKind.ATTRIBUTE, FactKind.NARRATIVE) and object_ is not None:
        raise ValidationFailed(
            f"an {kind} fact has a value, not an object", code="unexpected_object"
        )


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

    In strict mode an unknown predicate raises ``UnknownPredicate`` and nothing is
    written, but the predicate is still recorded as drift (outside the refused
    transaction, unless the caller wraps this call in its own).
    """
    try:
        return _fact_write(
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


@transaction.atomic
def _fact_write(
    *,
    access: ContextAccess,
    subject: Entity,
    predicate: str,
    scope: str | None,
    object_: Entity | None,
    value: Any,
    kind: str | None,
    confidence: float,
    importance: float | None,
    valid_from: datetime | None,
    valid_until: datetime | None,
    source_kind: str,
    source_ref: str,
    run: RunModel | None,
    document_id: int | None,
) -> FactWriteResult:
    fact_scope = scope_validate(scope if scope is not None else subject.scope)
    access.require_write(fact_scope)
    for entity in (subject, object_):
        if entity is not None and (entity.context_id != access.context.pk):
            raise ValidationFailed("entities must belong to this context", code="wrong_context")
        if entity is not None:
            access.require_read(entity.scope)
    resolved = predicate_resolve_for_write(context=access.context, raw=predicate)
    pred = resolved.predicate
    fact_kind = _kind_for(pred, object_=object_, value=value, kind=kind)
    fact_check_shape(fact_kind, object_=object_, value=value)
    text = fact_value_text(value)
    confidence = fact_unit_value("confidence", confidence)
    importance = fact_unit_value(
        "importance", pred.default_importance if importance is None else importance
    )
    if valid_from and valid_until and valid_until < valid_from:
        raise ValidationFailed("valid_until is before valid_from", code="invalid_validity")

    # The lock that makes supersession and re-observation safe under concurrent writers:
    # every write for one subject queues here. The object is locked too, so a merge cannot
    # move it away between our read and our insert; merged entities redirect to the
    # survivor, read under the lock (the caller's instances may predate a merge).
    live = entities_lock_live([subject.pk] + ([object_.pk] if object_ is not None else []))
    if subject.pk not in live or (object_ is not None and object_.pk not in live):
        raise NotFound("an entity of this fact was deleted while it was written")
    subject = live[subject.pk]
    object_ = live[object_.pk] if object_ is not None else None
    now = timezone.now()
    if valid_until is None and pred.default_validity_days:
        valid_until = (valid_from or now) + timedelta(days=pred.default_validity_days)

    current = Fact.objects.filter(
        subject=subject, predicate=pred, scope=fact_scope, status=FactStatus.CURRENT
    )
    identical = current.filter(kind=fact_kind, object=object_, value_text=text).first()
    if identical is not None:
        identical.last_seen_at = now
        identical.observed_count += 1
        identical.confidence = max(identical.confidence, confidence)
        identical.save(update_fields=["last_seen_at", "observed_count", "confidence"])
        return FactWriteResult(fact=identical, outcome="reobserved", resolved=resolved)

    if pred.is_aggregate:
        prior = current.first()
        if prior is not None:
            prior.value, prior.value_text, prior.object = value, text, object_
            prior.confidence, prior.last_seen_at = confidence, now
            prior.observed_count += 1
            prior.raw_predicate = predicate[:200]
            prior.save()
            facts_index([prior.pk])
            return FactWriteResult(fact=prior, outcome="updated", resolved=resolved)

    fact = Fact(
        context=access.context,
        scope=fact_scope,
        subject=subject,
        predicate=pred,
        raw_predicate=predicate[:200],
        kind=fact_kind,
        object=object_,
        value=value,
        value_text=text,
        confidence=confidence,
        importance=importance,
        valid_from=valid_from,
        valid_until=valid_until,
        single_valued=pred.single_valued,
        source_kind=source_kind,
        source_ref=source_ref[:300],
        run=run,
        document_id=document_id,
        created_by=access.user if getattr(access.user, "is_authenticated", False) else None,
    )
    if not pred.single_valued:
        fact.save()
        facts_index([fact.pk])
        return FactWriteResult(fact=fact, outcome="created", resolved=resolved)
    result = _write_single_valued(
        access=access, fact=fact, current=current.first(), now=now, resolved=resolved
    )
    facts_index([result.fact.pk])  # search postings commit with the fact
    return result


def _write_single_valued(
    *,
    access: ContextAccess,
    fact: Fact,
    current: Fact | None,
    now: datetime,
    resolved: ResolvedPredicate,
) -> FactWriteResult:
    if current is None:
        fact.save()
        return FactWriteResult(fact=fact, outcome="created", resolved=resolved)
    wins = (
        access.context.auto_supersede
        and fact.confidence >= SUPERSEDE_CONFIDENCE_FLOOR
        and fact.confidence >= current.confidence
    )
    if wins:
        current.status = FactStatus.SUPERSEDED
        current.status_changed_at = now
        if current.valid_until is None or current.valid_until > now:
            current.valid_until = fact.valid_from or now
        # Order matters: the prior leaves "current" before the new row enters it, or the
        # partial unique constraint would (rightly) refuse the insert.
        current.save(update_fields=["status", "status_changed_at", "valid_until"])
        fact.supersedes = current
        fact.save()
        return FactWriteResult(
            fact=fact, outcome="superseded", resolved=resolved, superseded=current
        )
    fact.status = FactStatus.CONTESTED
    fact.status_changed_at = now
    fact.save()
    reason = fact_conflict_reason(access=access, fact=fact, current=current)
    conflict = Conflict.objects.create(
        context=access.context,
        scope=fact.scope,
        subject=fact.subject,
        predicate=fact.predicate,
        current_fact=current,
        contested_fact=fact,
        reason=reason,
    )
    return FactWriteResult(fact=fact, outcome="conflict", resolved=resolved, conflict=conflict)


def fact_conflict_reason(*, access: ContextAccess, fact: Fact, current: Fact) -> str:
    if not access.context.auto_supersede:
        return "auto_supersede is off for this context"
    if fact.confidence < SUPERSEDE_CONFIDENCE_FLOOR:
        return (
            f"confidence {fact.confidence:.2f} is under the {SUPERSEDE_CONFIDENCE_FLOOR} "
            "needed to replace a single value"
        )
    return f"confidence {fact.confidence:.2f} is under the current value's {current.confidence:.2f}"


@transaction.atomic
def fact_retract(*, access: ContextAccess, fact: Fact, reason: str = "") -> Fact:
    """Withdraw a fact (it stays in history). Needs a write grant on its scope."""
    access.require_write(fact.scope)
    Entity.objects.select_for_update().filter(pk=fact.subject_id).first()
    fact = Fact.objects.select_for_update().get(pk=fact.pk)
    if fact.status != FactStatus.RETRACTED:
        fact.status = FactStatus.RETRACTED
        fact.status_changed_at = timezone.now()
        fact.save(update_fields=["status", "status_changed_at"])
    return fact


def facts_expire(*, now: datetime | None = None) -> int:
    """Mark current facts whose ``valid_until`` has passed as expired."""
    now = now or timezone.now()
    return Fact.objects.filter(status=FactStatus.CURRENT, valid_until__lt=now).update(
        status=FactStatus.EXPIRED, status_changed_at=now
    )
