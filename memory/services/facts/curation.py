"""A curator's changes to facts one claim at a time: retract (one fact or many), restore a
retracted fact, and edit a fact in place. A correction (a new value that supersedes) is
``fact_corrections.fact_correct``.

Each action is one transaction under the subjects' row locks, records one audit event
whose ``undo`` puts back exactly the fields it changed (docs/decisions/0070), and follows
the write rules of ``fact_rules``: a fact that comes back to ``current`` (a restore, an
edit that moves it into another slot) beside a different current value of a
single-valued predicate is kept ``contested`` and a Conflict says why — nothing ever
holds two current values in one slot.

Retracting is an agent's ordinary write (a write grant on the fact's scope, as
``DELETE facts/{id}`` always was); restoring and editing change what the store claims on
someone else's word, so they need the curator role as well.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from memory.domain.access import ContextAccess
from memory.kernel.errors import Conflict, NotFound, ValidationFailed
from memory.models import Conflict as ConflictRecord
from memory.models import Entity, Fact, FactKind, FactStatus, Predicate, Role
from memory.models.predicate import PredicateStatus
from memory.search.indexing import facts_index
from memory.selectors.predicates import predicate_canonicalize
from memory.services.audit import audit_record
from memory.services.facts.rules import (
    fact_check_entity_types,
    fact_check_validity,
    fact_unit_value,
)

# What a status change keeps for its undo, and what an edit may change.
_STATE = ("status", "status_changed_at")
EDITABLE = ("predicate", "swap", "valid_from", "valid_until", "confidence", "importance")
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
RESTORED_REASON = "restored beside the current value of a single-valued predicate"
EDITED_REASON = "edited into a slot that already holds a current value"


def _iso(value: Any) -> Any:
    """Times as full ISO text: the audit log's JSON encoder keeps only milliseconds, and
    an undo must put back exactly what was there."""
    return value.isoformat() if isinstance(value, datetime) else value


def _snapshot(fact: Fact, fields: tuple[str, ...]) -> dict[str, Any]:
    return {"id": fact.pk, **{name: _iso(getattr(fact, name)) for name in fields}}


def _lock(access: ContextAccess, fact_ids: list[int]) -> list[Fact]:
    """The facts of this context the caller can see, with their subjects (and objects)
    locked in id order — the order every fact writer takes them — then the rows."""
    ids = sorted(set(fact_ids))
    visible = Fact.objects.filter(access.grants.read_q(), context=access.context, pk__in=ids)
    ends = visible.values_list("subject_id", "object_id")
    entity_ids = sorted({e for pair in ends for e in pair if e is not None})
    list(
        Entity.objects.select_for_update(no_key=True)
        .filter(pk__in=entity_ids)
        .order_by("pk")
        .values_list("pk")
    )
    facts = list(
        visible.select_for_update(of=("self",))
        .select_related("subject", "object", "predicate")
        .order_by("pk")
    )
    missing = set(ids) - {f.pk for f in facts}
    if missing:
        raise NotFound(
            f"fact {min(missing)} not found in context {access.context.slug!r}",
            code="fact_not_found",
        )
    return facts


def _sentence(fact: Fact) -> str:
    target = fact.object.name if fact.object is not None else fact.value_text[:60]
    return f"{fact.subject.name} {fact.predicate.name} {target}"


def _slot_holder(fact: Fact) -> Fact | None:
    """The other current value in a single-valued fact's slot, if any."""
    if not fact.single_valued:
        return None
    return (
        Fact.objects.filter(
            context_id=fact.context_id,
            subject_id=fact.subject_id,
            predicate_id=fact.predicate_id,
            scope=fact.scope,
            status=FactStatus.CURRENT,
            single_valued=True,
        )
        .exclude(pk=fact.pk)
        .first()
    )


def _identical_current(fact: Fact) -> Fact | None:
    """A current fact that already says what ``fact`` says (fact_rules' identity)."""
    return (
        Fact.objects.filter(
            context_id=fact.context_id,
            subject_id=fact.subject_id,
            predicate_id=fact.predicate_id,
            scope=fact.scope,
            kind=fact.kind,
            object_id=fact.object_id,
            value_text=fact.value_text,
            status=FactStatus.CURRENT,
        )
        .exclude(pk=fact.pk)
        .first()
    )


def _make_current(
    access: ContextAccess, fact: Fact, now: datetime, reason: str
) -> ConflictRecord | None:
    """Put ``fact`` back among the current facts, or — when its single-valued slot holds
    another value — keep it contested beside that value and record the Conflict."""
    holder = _slot_holder(fact)
    fact.status_changed_at = now
    if holder is None:
        fact.status = FactStatus.CURRENT
        return None
    fact.status = FactStatus.CONTESTED
    return ConflictRecord.objects.create(
        context=access.context,
        scope=fact.scope,
        subject_id=fact.subject_id,
        predicate_id=fact.predicate_id,
        current_fact=holder,
        contested_fact=fact,
        reason=reason,
    )


def _conflict_words(conflict: ConflictRecord | None) -> str:
    if conflict is None:
        return ""
    return (
        f"; fact {conflict.current_fact_id} is already the current value, so this one is "
        f"contested (conflict {conflict.pk})"
    )


# --- retract ---------------------------------------------------------------------------


@dataclass(frozen=True)
class FactsRetracted:
    facts: list[Fact]  # every fact asked for, as it is now
    changed: list[int]  # the ones this retraction took from another status
    audit_event_id: int | None  # None when every fact was already retracted
    summary: str


def facts_retract(
    *, access: ContextAccess, fact_ids: list[int], reason: str = "", what: str = ""
) -> FactsRetracted:
    """Retract facts (they stay in history), in one audited action. Needs a write grant
    on each fact's scope. A fact already retracted is left as it is; the undo puts every
    other back in the status it had. ``what`` names the set in the summary ("turn 12's
    facts")."""
    if not fact_ids:
        raise ValidationFailed("name at least one fact to retract", code="no_facts")
    with transaction.atomic():
        facts = _lock(access, fact_ids)
        for fact in facts:
            access.require_write(fact.scope)
        now = timezone.now()
        changed = [f for f in facts if f.status != FactStatus.RETRACTED]
        before = [_snapshot(f, _STATE) for f in changed]
        for fact in changed:
            fact.status, fact.status_changed_at = FactStatus.RETRACTED, now
        Fact.objects.filter(pk__in=[f.pk for f in changed]).update(
            status=FactStatus.RETRACTED, status_changed_at=now
        )
        summary = _retract_summary(changed, what, reason)
        event = None
        if changed:
            event = audit_record(
                context=access.context,
                actor=access.user,
                action="fact_retract",
                target_type="fact",
                target_id=changed[0].pk if len(changed) == 1 else f"{len(changed)} facts",
                summary=summary,
                before=before,
                after={"ids": [f.pk for f in changed], "reason": reason},
                undo={"op": "facts_retract_revert", "facts": before},
            )
    return FactsRetracted(
        facts=facts,
        changed=[f.pk for f in changed],
        audit_event_id=event.pk if event is not None else None,
        summary=summary,
    )


def _retract_summary(changed: list[Fact], what: str, reason: str) -> str:
    if not changed:
        return "nothing to retract: every fact named was already retracted"
    if len(changed) == 1 and not what:
        text = f"retracted fact {changed[0].pk} ({_sentence(changed[0])})"
    else:
        n = len(changed)
        text = f"retracted {n} fact{'s' if n != 1 else ''}" + (f" of {what}" if what else "")
    return text + (f": {reason}" if reason else "")


def fact_retract(*, access: ContextAccess, fact: Fact, reason: str = "") -> Fact:
    """Retract one fact (``facts_retract`` of one); answers it as it is now."""
    return facts_retract(access=access, fact_ids=[fact.pk], reason=reason).facts[0]


def facts_retract_revert(*, access: ContextAccess, undo: dict[str, Any]) -> None:
    """Undo a retraction: each fact back in the status it had, unless a later change
    moved it (409) or a later value took its single-valued slot (409)."""
    ids = [state["id"] for state in undo["facts"]]
    facts = {f.pk: f for f in _lock(access, ids)}
    for state in undo["facts"]:
        fact = facts[state["id"]]
        access.require_write(fact.scope)
        if fact.status != FactStatus.RETRACTED:
            raise Conflict(
                f"fact {fact.pk} is {fact.status} now: a later change brought it back",
                code="undo_blocked",
            )
    _states_put_back(undo["facts"])
    facts_index(ids)


def _states_put_back(states: list[dict[str, Any]]) -> None:
    """Rows back to their recorded fields, those leaving "current" first so that the
    one-current-value constraint never sees two at once."""
    ordered = sorted(states, key=lambda s: s.get("status") == FactStatus.CURRENT)
    try:
        with transaction.atomic():
            for state in ordered:
                Fact.objects.filter(pk=state["id"]).update(
                    **{k: v for k, v in state.items() if k != "id"}
                )
    except IntegrityError:
        raise Conflict(
            "a later value is current in this fact's single-valued slot now; retract or "
            "correct that one first",
            code="undo_blocked",
        ) from None


# --- restore ---------------------------------------------------------------------------


@dataclass(frozen=True)
class FactRestored:
    fact: Fact
    conflict: ConflictRecord | None
    audit_event_id: int
    summary: str


def fact_restore(*, access: ContextAccess, fact_id: int, reason: str = "") -> FactRestored:
    """Bring a retracted fact back. Beside a different current value of a single-valued
    predicate it comes back contested, with a Conflict for a curator to resolve; when a
    current fact already says the same, there is nothing to restore (409)."""
    access.require_role(Role.CURATOR)
    with transaction.atomic():
        (fact,) = _lock(access, [fact_id])
        access.require_write(fact.scope)
        if fact.status != FactStatus.RETRACTED:
            raise Conflict(
                f"fact {fact.pk} is {fact.status}, not retracted: only a retracted fact "
                "can be restored",
                code="fact_not_retracted",
            )
        same = _identical_current(fact)
        if same is not None:
            raise Conflict(
                f"fact {same.pk} already says this and is current", code="identical_fact"
            )
        before = _snapshot(fact, _STATE)
        conflict = _make_current(access, fact, timezone.now(), RESTORED_REASON)
        fact.save(update_fields=list(_STATE))
        fact.refresh_from_db(fields=list(_STATE))
        summary = f"restored fact {fact.pk} ({_sentence(fact)})" + _conflict_words(conflict)
        event = audit_record(
            context=access.context,
            actor=access.user,
            action="fact_restore",
            target_type="fact",
            target_id=fact.pk,
            summary=summary + (f": {reason}" if reason else ""),
            before=before,
            after=_snapshot(fact, _STATE),
            undo={
                "op": "fact_restore_revert",
                "fact": before,
                "after": _snapshot(fact, _STATE),
                "conflict_id": conflict.pk if conflict is not None else None,
            },
        )
        facts_index([fact.pk])
    return FactRestored(fact=fact, conflict=conflict, audit_event_id=event.pk, summary=summary)


def _undo_blocked_unless(fact: Fact, after: dict[str, Any], fields: tuple[str, ...]) -> None:
    """The undo of a change runs only over the state the change left (409 otherwise)."""
    now = _snapshot(fact, fields)
    if any(now[name] != after[name] for name in fields):
        raise Conflict(
            f"fact {fact.pk} changed again since (it is {fact.status} now); undo the later "
            "change first",
            code="undo_blocked",
        )


def fact_restore_revert(*, access: ContextAccess, undo: dict[str, Any]) -> None:
    _one_fact_put_back(access, undo, _STATE)


def _one_fact_put_back(
    access: ContextAccess, undo: dict[str, Any], fields: tuple[str, ...]
) -> None:
    """Undo a restore or an edit of one fact: only over the state it left (``fields``),
    dropping the conflict it recorded."""
    (fact,) = _lock(access, [undo["fact"]["id"]])
    access.require_write(fact.scope)
    _undo_blocked_unless(fact, undo["after"], fields)
    if undo.get("conflict_id"):
        ConflictRecord.objects.filter(pk=undo["conflict_id"], context=access.context).delete()
    _states_put_back([undo["fact"]])
    facts_index([fact.pk])


# --- edit ------------------------------------------------------------------------------


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
        (fact,) = _lock(access, [fact_id])
        access.require_write(fact.scope)
        before = _snapshot(fact, _EDIT_FIELDS)
        changes = _apply_edit(access, fact, edit)
        if not changes:
            return FactEdited(fact, None, None, f"fact {fact.pk}: nothing to change")
        moved = (fact.predicate_id, fact.subject_id) != (
            before["predicate_id"],
            before["subject_id"],
        )
        conflict = None
        if moved and fact.status == FactStatus.CURRENT:
            same = _identical_current(fact)
            if same is not None:
                raise Conflict(
                    f"fact {same.pk} already says this: retract this one instead",
                    code="identical_fact",
                )
            conflict = _make_current(access, fact, timezone.now(), EDITED_REASON)
        fact.save(update_fields=list(_EDIT_FIELDS))
        fact.refresh_from_db()  # times as the database keeps them, for the undo's check
        after = _snapshot(fact, _EDIT_FIELDS)
        summary = (
            f"edited fact {fact.pk} ({_sentence(fact)}): {', '.join(changes)}"
            + _conflict_words(conflict)
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
            f"{predicate.name} is a {predicate.kind} predicate and {fact.predicate.name} a "
            f"{fact.predicate.kind} one: a fact keeps its kind",
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
    _one_fact_put_back(access, undo, _EDIT_FIELDS)
