"""Editing a fact in place: its predicate (another registered one of the same kind), its
subject and object swapped, its validity, confidence and importance. One audited action,
undone only over the state it left; an edit that moves a current fact into a slot that
holds another value keeps it contested. See ``facts/curation.py`` for what every curator
fact action keeps.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from memory.domain.access import ContextAccess
from memory.kernel.errors import Conflict, ValidationFailed
from memory.kernel.wording import with_article
from memory.models import Conflict as ConflictRecord
from memory.models import Fact, FactKind, FactStatus, Predicate, Role
from memory.models.predicate import PredicateStatus
from memory.search.indexing import facts_index
from memory.selectors.predicates import predicate_canonicalize
from memory.services.audit import audit_record
from memory.services.facts.curation import (
    conflict_words,
    fact_change_revert,
    fact_identical_current,
    fact_make_current,
    fact_sentence,
    fact_snapshot,
    facts_lock,
)
from memory.services.facts.rules import (
    fact_check_entity_types,
    fact_check_validity,
    fact_unit_value,
)

# What an edit may change, and what its undo keeps.
_EDIT_FIELDS = (
    "predicate_id",
    "raw_predicate",
    "single_valued",
    "subject_id",
    "object_id",
    "valid_from",
    "valid_until",
    "confidence",
    "importance",
    "status",
    "status_changed_at",
)
EDITED_REASON = "edited into a slot that already holds a current value"


@dataclass
class FactEdit:
    """What an edit changes; fields left None stay as they are."""

    predicate: str | None = None
    swap: bool = False  # subject and object change places (relations)
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    clear_valid_from: bool = False
    clear_valid_until: bool = False
    confidence: float | None = None
    importance: float | None = None
    reason: str = ""


@dataclass(frozen=True)
class FactEdited:
    fact: Fact
    conflict: ConflictRecord | None
    audit_event_id: int | None  # None when the edit changed nothing
    summary: str


def fact_edit(*, access: ContextAccess, fact_id: int, edit: FactEdit) -> FactEdited:
    """Edit a fact in place: its predicate (another registered one of the same kind),
    subject and object swapped, validity, confidence, importance. Refused edits (a
    predicate of another kind, an object of the wrong type) write nothing."""
    access.require_role(Role.CURATOR)
    with transaction.atomic():
        (fact,) = facts_lock(access, [fact_id])
        access.require_write(fact.scope)
        before = fact_snapshot(fact, _EDIT_FIELDS)
        changes = _apply_edit(access, fact, edit)
        if not changes:
            return FactEdited(fact, None, None, f"fact {fact.pk}: nothing to change")
        moved = (fact.predicate_id, fact.subject_id) != (
            before["predicate_id"],
            before["subject_id"],
        )
        conflict = None
        if moved and fact.status == FactStatus.CURRENT:
            same = fact_identical_current(fact)
            if same is not None:
                raise Conflict(
                    f"fact {same.pk} already says this: retract this one instead",
                    code="identical_fact",
                )
            conflict = fact_make_current(access, fact, timezone.now(), EDITED_REASON)
        fact.save(update_fields=list(_EDIT_FIELDS))
        fact.refresh_from_db()  # times as the database keeps them, for the undo's check
        after = fact_snapshot(fact, _EDIT_FIELDS)
        summary = (
            f"edited fact {fact.pk} ({fact_sentence(fact)}): {', '.join(changes)}"
            + conflict_words(conflict)
        )
        event = audit_record(
            context=access.context,
            actor=access.user,
            action="fact_edit",
            target_type="fact",
            target_id=fact.pk,
            summary=summary + (f" — {edit.reason}" if edit.reason else ""),
            before=before,
            after=after,
            undo={
                "op": "fact_edit_revert",
                "fact": before,
                "after": after,
                "conflict_id": conflict.pk if conflict is not None else None,
            },
        )
        facts_index([fact.pk])
    return FactEdited(fact=fact, conflict=conflict, audit_event_id=event.pk, summary=summary)


def _apply_edit(access: ContextAccess, fact: Fact, edit: FactEdit) -> list[str]:
    """Set the edited fields on ``fact`` (not saved); the words for what changed."""
    changes: list[str] = []
    ends_moved = False
    if edit.predicate is not None:
        predicate = _edit_predicate(access, fact, edit.predicate)
        if predicate.pk != fact.predicate_id:
            changes.append(f"predicate {fact.predicate.name} → {predicate.name}")
            fact.predicate, fact.raw_predicate = predicate, predicate.name
            fact.single_valued = predicate.single_valued
            ends_moved = True
    if edit.swap:
        if fact.kind != FactKind.RELATION or fact.object is None:
            raise ValidationFailed(
                f"fact {fact.pk} is an {fact.kind}: only a relation's subject and object "
                "can change places",
                code="not_a_relation",
            )
        fact.subject, fact.object = fact.object, fact.subject
        changes.append("subject and object swapped")
        ends_moved = True
    if ends_moved and fact.kind == FactKind.RELATION:
        _check_types(fact)
    valid_from = None if edit.clear_valid_from else (edit.valid_from or fact.valid_from)
    valid_until = None if edit.clear_valid_until else (edit.valid_until or fact.valid_until)
    fact_check_validity(valid_from, valid_until)
    if valid_from != fact.valid_from:
        fact.valid_from = valid_from
        changes.append("valid from " + (valid_from.date().isoformat() if valid_from else "open"))
    if valid_until != fact.valid_until:
        fact.valid_until = valid_until
        changes.append("valid until " + (valid_until.date().isoformat() if valid_until else "open"))
    for name in ("confidence", "importance"):
        value = getattr(edit, name)
        if value is not None and fact_unit_value(name, value) != getattr(fact, name):
            changes.append(f"{name} {getattr(fact, name):.2f} → {value:.2f}")
            setattr(fact, name, float(value))
    return changes


def _edit_predicate(access: ContextAccess, fact: Fact, name: str) -> Predicate:
    resolved = predicate_canonicalize(context=access.context, name=name)
    predicate = resolved.predicate
    if predicate is None or predicate.status != PredicateStatus.REGISTERED:
        raise ValidationFailed(
            f"{resolved.canonical!r} is not a registered predicate of this context",
            code="unknown_predicate",
        )
    if resolved.inverse:
        raise ValidationFailed(
            f"{name!r} is an inverse alias of {predicate.name}: swap subject and object instead",
            code="inverse_predicate",
        )
    if predicate.kind != fact.predicate.kind:
        raise ValidationFailed(
            f"{predicate.name} is {with_article(predicate.kind)} predicate and "
            f"{fact.predicate.name} {with_article(fact.predicate.kind)} one: a fact keeps its kind",
            code="predicate_kind_mismatch",
        )
    return predicate


def _check_types(fact: Fact) -> None:
    fact_check_entity_types(
        predicate=fact.predicate.name,
        ends=[
            ("subject", fact.subject.name, fact.subject.type, fact.predicate.subject_types),
            *(
                [("object", fact.object.name, fact.object.type, fact.predicate.object_types)]
                if fact.object is not None
                else []
            ),
        ],
    )


def fact_edit_revert(*, access: ContextAccess, undo: dict[str, Any]) -> None:
    fact_change_revert(access, undo, _EDIT_FIELDS)
