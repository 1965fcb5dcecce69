"""Fact writes one at a time: ``fact_write`` is a batch of one (services/fact_batch.py),
so a single write and a batch follow the same rules (services/fact_rules.py), under the
same subject locks and the partial unique constraint ``fact_one_current_single_value``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from memory.access import ContextAccess
from memory.models import Conflict, Entity, Fact, FactStatus, SourceKind
from memory.models import Run as RunModel
from memory.scopes import scope_validate
from memory.services.fact_batch import AnyFact, FactInput, WriteOutcome, facts_write_batch
from memory.services.predicates import (
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
    fact_input = FactInput(
        subject=subject,
        predicate=predicate,
        kind=kind,
        object=object,
        value=value,
        confidence=confidence,
        importance=importance,
        valid_from=valid_from,
        valid_until=valid_until,
    )
    try:
        with transaction.atomic():
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
    except UnknownPredicate:
        predicate_record_refused(context=access.context, raw=predicate)
        raise
    assert item.outcome is not None and item.resolved is not None and item.fact is not None
    return FactWriteResult(
        fact=_loaded(item.fact),
        outcome=item.outcome,
        resolved=item.resolved,
        superseded=_loaded(item.superseded) if item.superseded is not None else None,
        conflict=item.conflict,
    )


def _loaded(fact: AnyFact) -> Fact:
    """The stored row of a fact the batch wrote (it inserts rows, not model instances)."""
    assert fact.pk is not None
    return Fact.objects.select_related("subject", "object", "predicate").get(pk=fact.pk)


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
