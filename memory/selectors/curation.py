"""Reads for curation: conflicts and the audit log, limited to the caller's grants."""

from __future__ import annotations

from django.db.models import BigIntegerField, Case, OuterRef, Q, QuerySet, Subquery, When
from django.db.models.functions import Cast

from memory.domain.access import ContextAccess
from memory.kernel.errors import NotFound
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


def conflict_rows(*, access: ContextAccess, status: str | None) -> QuerySet[ConflictRecord]:
    """Conflicts with both facts and their object entities joined (one query)."""
    return conflict_list(access=access, status=status).select_related(
        "current_fact__object", "contested_fact__object", "resolved_by"
    )


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
    # The target as a number when it is one, so each event checks its own entity (or
    # conflict) by primary key — instead of hashing every entity of the context, cast to
    # text, for every count and page (0.4 s at 100k entities).
    target_pk = Case(
        When(target_id__regex=r"^[0-9]{1,18}$", then=Cast("target_id", BigIntegerField())),
        default=None,
        output_field=BigIntegerField(),
    )
    # Scalar subqueries with LIMIT 1, not EXISTS: PostgreSQL would turn an EXISTS into one
    # hash of every entity id, built before the first row even for a page of 50.
    readable_entity = Subquery(
        Entity.objects.filter(
            access.grants.read_q(), context=access.context, pk=OuterRef("target_pk")
        ).values("pk")[:1]
    )
    readable_conflict = Subquery(
        ConflictRecord.objects.filter(
            access.grants.read_q(), context=access.context, pk=OuterRef("target_pk")
        ).values("pk")[:1]
    )
    events = (
        AuditEvent.objects.filter(context=access.context)
        .alias(target_pk=target_pk)
        .alias(readable_entity=readable_entity, readable_conflict=readable_conflict)
        .filter(
            ~Q(target_type__in=["entity", "conflict", "document"])
            | Q(target_type="entity", readable_entity__isnull=False)
            | Q(target_type="conflict", readable_conflict__isnull=False)
            | Q(access.grants.read_q("before__scope"), target_type="document")
        )
    )
    if action:
        events = events.filter(action=action)
    if target_type:
        events = events.filter(target_type=target_type)
    return events.order_by("-created_at", "-id")
