"""The audit trail: one event per curator or admin change, with its undo recipe."""

from __future__ import annotations

from typing import Any

from memory.models import AuditEvent, Context


def audit_record(
    *,
    context: Context,
    actor: Any,
    action: str,
    target_type: str,
    target_id: str | int,
    summary: str,
    before: Any = None,
    after: Any = None,
    undo: Any = None,
) -> AuditEvent:
    """Record a change. Call inside the transaction that makes the change."""
    user = actor if getattr(actor, "is_authenticated", False) else None
    return AuditEvent.objects.create(
        context=context,
        actor=user,
        actor_label=getattr(actor, "username", "") or "system",
        action=action,
        target_type=target_type,
        target_id=str(target_id),
        summary=summary[:500],
        before=before,
        after=after,
        undo=undo,
    )
