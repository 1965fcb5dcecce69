"""Reads for curation: conflicts and the audit log, limited to the caller's grants."""

from __future__ import annotations

from django.db.models import CharField, Q, QuerySet
from django.db.models.functions import Cast

from memory.access import ContextAccess
from memory.errors import NotFound
from memory.models import AuditEvent, Entity
from memory.models import Conflict as ConflictRecord
from memory.models.fact import ConflictStatus


def conflict_list(
    *, access: ContextAccess, status: str | None = ConflictStatus.OPEN
) -> QuerySet[ConflictRecord]:
    conflicts = ConflictRecord.objects.filter(access.grants.read_q(), context=access.context)
    if status:
        conflicts = conflicts.filter(status=status)
    return conflicts.select_related(
        "subject", "predicate", "current_fact", "contested_fact"
    ).order_by("-created_at", "-id")


def conflict_get(*, access: ContextAccess, conflict_id: int) -> ConflictRecord:
    conflict = conflict_list(access=access, status=None).filter(pk=conflict_id).first()
    if conflict is None:
        raise NotFound(f"conflict {conflict_id} not found", code="conflict_not_found")
    return conflict


def audit_list(
    *, access: ContextAccess, action: str | None = None, target_type: str | None = None
) -> QuerySet[AuditEvent]:
    """The context's change log, newest first. Registry and context events are visible to
    every member; events about an entity or a conflict only while the caller may read it,
    and a document's deletion (the document is gone: its scope is in the event) only to
    those who could read the document."""
    readable_entities = (
        Entity.objects.filter(access.grants.read_q(), context=access.context)
        .annotate(key=Cast("pk", CharField()))
        .values("key")
    )
    readable_conflicts = (
        ConflictRecord.objects.filter(access.grants.read_q(), context=access.context)
        .annotate(key=Cast("pk", CharField()))
        .values("key")
    )
    events = AuditEvent.objects.filter(context=access.context).filter(
        ~Q(target_type__in=["entity", "conflict", "document"])
        | Q(target_type="entity", target_id__in=readable_entities)
        | Q(target_type="conflict", target_id__in=readable_conflicts)
        | Q(access.grants.read_q("before__scope"), target_type="document")
    )
    if action:
        events = events.filter(action=action)
    if target_type:
        events = events.filter(target_type=target_type)
    return events.order_by("-created_at", "-id")
