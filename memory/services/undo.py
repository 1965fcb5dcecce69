"""Undo from the audit log. Each event's ``undo`` names an operation and its data; the
undo runs the inverse through the ordinary services (which record their own events, so
an undo can itself be undone) and marks the original event undone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.utils import timezone

from memory.domain.access import ContextAccess
from memory.infra.transactions import write_transaction
from memory.kernel.errors import Conflict, NotFound
from memory.models import AuditEvent, Role
from memory.selectors.entities import entity_get
from memory.selectors.predicates import predicate_get
from memory.services import contexts
from memory.services.drift import revert as drift
from memory.services.duplicates import finder as duplicates
from memory.services.entities import writes as entities
from memory.services.facts import conflicts
from memory.services.facts import corrections as fact_corrections
from memory.services.facts import edit as fact_edit
from memory.services.facts import restore as fact_restore
from memory.services.facts import retraction as fact_retraction
from memory.services.facts import review as fact_review
from memory.services.ingest import retract as run_retract
from memory.services.items import delete as items_delete
from memory.services.merges import merge as merges
from memory.services.registry import constraint_exceptions, predicates

UndoHandler = Callable[[ContextAccess, dict[str, Any]], None]


def _predicate_unregister(access: ContextAccess, undo: dict[str, Any]) -> None:
    predicate = predicate_get(context=access.context, name=undo["name"])
    predicates.predicate_unregister(access=access, predicate=predicate)


def _predicate_restore(access: ContextAccess, undo: dict[str, Any]) -> None:
    predicates.predicate_restore(access=access, state=undo["state"])


def _predicate_update(access: ContextAccess, undo: dict[str, Any]) -> None:
    predicate = predicate_get(context=access.context, name=undo["name"])
    predicates.predicate_update(access=access, predicate=predicate, **undo["fields"])


def _constraint_exception(access: ContextAccess, undo: dict[str, Any]) -> None:
    predicate = predicate_get(context=access.context, name=undo["name"])
    if undo["op"] == "constraint_exception_add":
        entity = entity_get(access=access, entity_id=int(undo["entity_id"]))
        constraint_exceptions.constraint_exception_add(
            access=access, predicate=predicate, constraint=undo["constraint"], entity=entity
        )
        return
    constraint_exceptions.constraint_exception_remove(
        access=access,
        predicate=predicate,
        constraint=undo["constraint"],
        entity_id=int(undo["entity_id"]),
    )


def _predicate_alias_remove(access: ContextAccess, undo: dict[str, Any]) -> None:
    predicate = predicate_get(context=access.context, name=undo["name"])
    predicates.predicate_alias_remove(access=access, predicate=predicate, alias=undo["alias"])


def _predicate_alias_add(access: ContextAccess, undo: dict[str, Any]) -> None:
    predicate = predicate_get(context=access.context, name=undo["name"])
    predicates.predicate_alias_add(access=access, predicate=predicate, alias=undo["alias"])


def _entity_restore(access: ContextAccess, undo: dict[str, Any]) -> None:
    state = dict(undo["restore"])
    entity = entity_get(access=access, entity_id=int(undo["entity_id"]))
    state.pop("identifiers", None)
    entities.entity_update(access=access, entity=entity, **state)


def _context_restore(access: ContextAccess, undo: dict[str, Any]) -> None:
    contexts.context_update(access=access, **undo["restore"])


def _item_restore(access: ContextAccess, undo: dict[str, Any]) -> None:
    """The item back, then what deleting it retracted (unless that was undone already)."""
    retraction = items_delete.item_restore(access=access, undo=undo)
    if (
        retraction is not None
        and AuditEvent.objects.filter(
            context=access.context, pk=retraction, undone_at__isnull=True
        ).exists()
    ):
        audit_undo(access=access, event_id=retraction)


def _discard(_: object) -> None:
    return None


UNDO_HANDLERS: dict[str, UndoHandler] = {
    "predicate_unregister": _predicate_unregister,
    "predicate_restore": _predicate_restore,
    "predicate_update": _predicate_update,
    "constraint_exception_add": _constraint_exception,
    "constraint_exception_remove": _constraint_exception,
    "predicate_alias_remove": _predicate_alias_remove,
    "predicate_alias_add": _predicate_alias_add,
    "entity_restore": _entity_restore,
    "context_restore": _context_restore,
    "drift_alias_revert": lambda access, undo: _discard(
        drift.drift_alias_revert(access=access, undo=undo)
    ),
    "drift_alias_redo": lambda access, undo: drift.drift_alias_redo(access=access, undo=undo),
    "drift_alias_bulk_revert": lambda access, undo: _discard(
        drift.drift_alias_bulk_revert(access=access, undo=undo)
    ),
    "drift_alias_bulk_redo": lambda access, undo: drift.drift_alias_bulk_redo(
        access=access, undo=undo
    ),
    "drift_reject_revert": lambda access, undo: _discard(
        drift.drift_reject_revert(access=access, undo=undo)
    ),
    "drift_reject_redo": lambda access, undo: drift.drift_reject_redo(access=access, undo=undo),
    "conflict_reopen": lambda access, undo: conflicts.conflict_reopen(access=access, undo=undo),
    "merge_undo": lambda access, undo: _discard(
        merges.merge_undo(access=access, merge_id=undo["merge_id"])
    ),
    "duplicates_reopen": lambda access, undo: duplicates.duplicates_reopen(
        access=access, undo=undo
    ),
    "run_retract_revert": lambda access, undo: run_retract.run_retract_revert(
        access=access, undo=undo
    ),
    "fact_correct_revert": lambda access, undo: fact_corrections.fact_correct_revert(
        access=access, undo=undo
    ),
    "facts_retract_revert": lambda access, undo: fact_retraction.facts_retract_revert(
        access=access, undo=undo
    ),
    "fact_restore_revert": lambda access, undo: fact_restore.fact_restore_revert(
        access=access, undo=undo
    ),
    "fact_edit_revert": lambda access, undo: fact_edit.fact_edit_revert(access=access, undo=undo),
    "fact_review_revert": lambda access, undo: fact_review.fact_review_revert(
        access=access, undo=undo
    ),
    "item_restore": _item_restore,
}


def undo_handler_register(op: str, handler: UndoHandler) -> None:
    """Let other modules (merges) add their inverse operations."""
    UNDO_HANDLERS[op] = handler


@write_transaction
def audit_undo(*, access: ContextAccess, event_id: int) -> AuditEvent:
    """Undo one event exactly, or explain (409) what later change prevents it."""
    access.require_role(Role.CURATOR)
    event = (
        AuditEvent.objects.select_for_update().filter(context=access.context, pk=event_id).first()
    )
    if event is None:
        raise NotFound(f"audit event {event_id} not found", code="event_not_found")
    if event.undone_at is not None:
        raise Conflict("this change was already undone", code="already_undone")
    if not event.undo or event.undo.get("op") not in UNDO_HANDLERS:
        raise Conflict(f"{event.action} cannot be undone", code="not_undoable")
    UNDO_HANDLERS[event.undo["op"]](access, event.undo)
    event.undone_at = timezone.now()
    event.undone_by = access.user if getattr(access.user, "is_authenticated", False) else None
    event.save(update_fields=["undone_at", "undone_by"])
    return event
