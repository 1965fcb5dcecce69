"""Resolving single-valued conflicts (a contested value against the current one)."""

from __future__ import annotations

from typing import Any, Literal

from django.utils import timezone

from memory.domain.access import ContextAccess
from memory.infra.transactions import write_transaction
from memory.kernel.errors import Conflict, ValidationFailed
from memory.models import Conflict as ConflictRecord
from memory.models import Fact, FactStatus, Role, SourceKind
from memory.models.fact import ConflictStatus
from memory.services.audit import audit_record
from memory.services.entities.writes import entities_lock
from memory.services.facts.write import fact_write

ConflictAction = Literal["keep_current", "keep_new", "keep_both", "edit"]


def _status_of(fact: Fact) -> dict[str, Any]:
    return {
        "id": fact.pk,
        "status": fact.status,
        "status_changed_at": fact.status_changed_at,
        "supersedes_id": fact.supersedes_id,
    }


@write_transaction
def conflict_resolve(
    *,
    access: ContextAccess,
    conflict: ConflictRecord,
    action: ConflictAction,
    value: Any = None,
) -> ConflictRecord:
    """``keep_current``: the contested value is retracted. ``keep_new``: it becomes current
    and supersedes the old. ``keep_both``: both stay, the contested one as history (not
    current: a single-valued predicate has one current value). ``edit``: a curator's
    corrected value supersedes the current one and the contested value is retracted."""
    access.require_role(Role.CURATOR)
    access.require_write(conflict.scope)
    entities_lock([conflict.subject_id])
    conflict = ConflictRecord.objects.select_for_update().get(pk=conflict.pk)
    if conflict.status != ConflictStatus.OPEN:
        raise Conflict("this conflict is already resolved", code="conflict_resolved")
    current = Fact.objects.select_for_update().get(pk=conflict.current_fact_id)
    contested = Fact.objects.select_for_update().get(pk=conflict.contested_fact_id)
    before = [_status_of(current), _status_of(contested)]
    now = timezone.now()
    if action == "keep_current":
        _set(contested, FactStatus.RETRACTED, now)
    elif action == "keep_both":
        _set(contested, FactStatus.SUPERSEDED, now)
    elif action == "keep_new":
        if current.status != FactStatus.CURRENT:
            raise Conflict(
                f"fact {current.pk} is {current.status} now: a later write changed this value",
                code="conflict_stale",
            )
        _set(current, FactStatus.SUPERSEDED, now)
        contested.supersedes = current
        _set(contested, FactStatus.CURRENT, now)
    elif action == "edit":
        if value is None:
            raise ValidationFailed("edit needs a value", code="missing_value")
        _set(contested, FactStatus.RETRACTED, now)
        fact_write(
            access=access,
            subject=current.subject,
            predicate=current.predicate.name,
            value=value,
            scope=current.scope,
            confidence=1.0,
            source_kind=SourceKind.CURATION,
            source_ref=f"conflict:{conflict.pk}",
        )
    else:
        raise ValidationFailed(f"unknown action {action!r}", code="invalid_action")
    conflict.status, conflict.resolution = ConflictStatus.RESOLVED, action
    conflict.resolved_at = now
    conflict.resolved_by = access.user if getattr(access.user, "is_authenticated", False) else None
    conflict.save(update_fields=["status", "resolution", "resolved_at", "resolved_by"])
    audit_record(
        context=access.context,
        actor=access.user,
        action="conflict_resolve",
        target_type="conflict",
        target_id=conflict.pk,
        summary=f"{action.replace('_', ' ')} for {current.predicate.name} of entity "
        f"{conflict.subject_id}",
        before={"facts": before},
        after={"resolution": action, "value": value},
        undo={"op": "conflict_reopen", "conflict_id": conflict.pk, "facts": before}
        if action != "edit"
        else None,
    )
    return conflict


def _set(fact: Fact, status: str, now: Any) -> None:
    fact.status, fact.status_changed_at = status, now
    fact.save(update_fields=["status", "status_changed_at", "supersedes"])


def conflict_reopen(*, access: ContextAccess, undo: dict[str, Any]) -> None:
    """Undo a resolution: both facts get their prior status back, the conflict reopens."""
    # The subject first, then the conflict, as a resolution takes them (docs/decisions/0119).
    found = ConflictRecord.objects.filter(pk=undo["conflict_id"], context=access.context)
    entities_lock(found.values_list("subject_id", flat=True))
    conflict = found.select_for_update().get()
    # Demote first, then restore, so the one-current constraint never sees two.
    states = sorted(undo["facts"], key=lambda s: s["status"] == FactStatus.CURRENT)
    for state in states:
        Fact.objects.filter(pk=state["id"]).update(
            status=state["status"],
            status_changed_at=state["status_changed_at"],
            supersedes_id=state["supersedes_id"],
        )
    conflict.status, conflict.resolution, conflict.resolved_at = ConflictStatus.OPEN, "", None
    conflict.save(update_fields=["status", "resolution", "resolved_at"])
