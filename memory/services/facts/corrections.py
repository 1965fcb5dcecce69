"""Correcting a fact: a new value (or object) supersedes a current fact, audited and
undoable. Unlike a newer value of a single-valued predicate, a correction says the old
value was wrong, so it applies to any predicate (multi-valued ones too) and keeps the
old fact's validity period.

Under the subject's row lock: the old fact leaves ``current`` before the correction is
written through ``fact_write`` (the partial unique index on single values would refuse
the other order), then the correction points back at it with ``supersedes``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from memory.domain.access import ContextAccess
from memory.infra.transactions import write_transaction
from memory.kernel.errors import Conflict, NotFound, ValidationFailed
from memory.kernel.wording import with_article
from memory.models import Entity, Fact, FactKind, FactStatus, Role, SourceKind
from memory.services.audit import audit_record
from memory.services.entities.writes import entities_lock, entities_lock_live
from memory.services.facts.rules import fact_check_entity_types
from memory.services.facts.write import fact_write


@dataclass(frozen=True)
class FactCorrection:
    old: Fact
    new: Fact
    audit_event_id: int


@write_transaction
def fact_correct(
    *,
    access: ContextAccess,
    fact: Fact,
    value: Any = None,
    object: Entity | None = None,
    confidence: float = 1.0,
    reason: str = "",
) -> FactCorrection:
    """Replace current ``fact`` with the corrected ``value`` (attribute facts) or
    ``object`` (relations). Needs a write grant on the fact's scope and the curator role
    (a correction overrules what the store was told)."""
    access.require_write(fact.scope)
    access.require_role(Role.CURATOR)
    # The subject and the new object together, in id order (docs/decisions/0119): the
    # write below locks both again, and would otherwise take the object second.
    entities_lock_live([fact.subject_id, *([object.pk] if object is not None else [])])
    old = Fact.objects.select_for_update().select_related("subject", "predicate").get(pk=fact.pk)
    if old.status != FactStatus.CURRENT:
        raise Conflict(
            f"fact {old.pk} is {old.status}, not current: correct the current fact instead",
            code="fact_not_current",
        )
    if (value is None) == (object is None):
        raise ValidationFailed(
            "a correction gives either a new value or a new object entity",
            code="invalid_correction",
        )
    if old.kind == FactKind.RELATION and object is None:
        raise ValidationFailed(
            f"fact {old.pk} is a relation: correct it with a new object entity",
            code="missing_object",
        )
    if old.kind in (FactKind.ATTRIBUTE, FactKind.NARRATIVE) and object is not None:
        raise ValidationFailed(
            f"fact {old.pk} is {with_article(old.kind)}: correct it with a new value",
            code="missing_value",
        )
    if object is not None:
        fact_check_entity_types(
            predicate=old.predicate.name,
            ends=[("object", object.name, object.type, old.predicate.object_types)],
        )
    before = _state(old)
    now = timezone.now()
    old.status, old.status_changed_at = FactStatus.SUPERSEDED, now
    old.save(update_fields=["status", "status_changed_at"])
    result = fact_write(
        access=access,
        subject=old.subject,
        predicate=old.predicate.name,
        scope=old.scope,
        object=object,
        value=value,
        kind=old.kind,
        confidence=confidence,
        importance=old.importance,
        valid_from=old.valid_from,
        valid_until=old.valid_until,
        source_kind=SourceKind.API,
        source_ref=f"correction of fact {old.pk}" + (f": {reason}" if reason else ""),
    )
    written = result.fact
    # A current fact that already said the corrected value is re-observed, not created:
    # it stays as it was (and an undo leaves it alone).
    created = result.outcome != "reobserved"
    if created:
        written.supersedes = old
        written.save(update_fields=["supersedes"])
    event = audit_record(
        context=access.context,
        actor=access.user,
        action="fact_correct",
        target_type="fact",
        target_id=old.pk,
        summary=f"corrected {old.predicate.name} of {old.subject.name}: "
        f"fact {old.pk} → {written.pk}" + (f" ({reason})" if reason else ""),
        before=before,
        after={"id": written.pk, "value": written.value, "object_id": written.object_id},
        undo={
            "op": "fact_correct_revert",
            "old": before,
            "new_id": written.pk,
            "new_created": created,
        },
    )
    return FactCorrection(old=old, new=written, audit_event_id=event.pk)


def _state(fact: Fact) -> dict[str, Any]:
    changed = fact.status_changed_at.isoformat() if fact.status_changed_at else None
    return {"id": fact.pk, "status": fact.status, "status_changed_at": changed}


def fact_correct_revert(*, access: ContextAccess, undo: dict[str, Any]) -> None:
    """Undo a correction: the correction is retracted and the old fact is current again,
    unless a later change moved either of them (409)."""
    scope, subject_id = Fact.objects.filter(
        pk=undo["old"]["id"], context=access.context
    ).values_list("scope", "subject_id").first() or ("", None)
    access.require_write(scope)
    entities_lock([subject_id] if subject_id is not None else [])  # the subject, then its facts
    old = Fact.objects.select_for_update().filter(pk=undo["old"]["id"], context=access.context)
    new = Fact.objects.select_for_update().filter(pk=undo["new_id"], context=access.context)
    old_fact, new_fact = old.first(), new.first()
    if old_fact is None or new_fact is None:
        raise NotFound("a fact of this correction no longer exists", code="fact_not_found")
    if new_fact.status != FactStatus.CURRENT or old_fact.status != FactStatus.SUPERSEDED:
        raise Conflict(
            f"fact {new_fact.pk} is {new_fact.status} now: a later change replaced the correction",
            code="correction_stale",
        )
    # Demote first, then restore, so the one-current constraint never sees two.
    if undo.get("new_created", True):
        new_fact.status, new_fact.status_changed_at = FactStatus.RETRACTED, timezone.now()
        new_fact.save(update_fields=["status", "status_changed_at"])
    old_fact.status = FactStatus.CURRENT
    old_fact.status_changed_at = parse_datetime(undo["old"]["status_changed_at"] or "")
    old_fact.save(update_fields=["status", "status_changed_at"])
