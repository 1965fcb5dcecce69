"""A curator's changes to facts one claim at a time — retract (one fact or many,
``facts/retraction.py``), restore a retracted fact (``facts/restore.py``), edit a fact in
place (``facts/edit.py``) — and what they share. A correction (a new value that
supersedes) is ``fact_corrections.fact_correct``.

Each action is one transaction under the subjects' row locks (``facts_lock``), records
one audit event whose ``undo`` puts back exactly the fields it changed
(``fact_snapshot``, ``fact_states_put_back``; docs/decisions/0070), and follows the write
rules of ``fact_rules``: a fact that comes back to ``current`` (a restore, an edit that
moves it into another slot) beside a different current value of a single-valued
predicate is kept ``contested`` and a Conflict says why (``fact_make_current``) — nothing
ever holds two current values in one slot.

Retracting is an agent's ordinary write (a write grant on the fact's scope, as
``DELETE facts/{id}`` always was); restoring and editing change what the store claims on
someone else's word, so they need the curator role as well.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction

from memory.domain.access import ContextAccess
from memory.kernel.errors import Conflict, NotFound
from memory.models import Conflict as ConflictRecord
from memory.models import Fact, FactStatus
from memory.search.indexing import facts_index
from memory.services.entities.writes import entities_lock

# What a status change keeps for its undo.
STATUS_FIELDS = ("status", "status_changed_at")


def _iso(value: Any) -> Any:
    """Times as full ISO text: the audit log's JSON encoder keeps only milliseconds, and
    an undo must put back exactly what was there."""
    return value.isoformat() if isinstance(value, datetime) else value


def fact_snapshot(fact: Fact, fields: tuple[str, ...]) -> dict[str, Any]:
    """``fields`` of ``fact`` as an undo keeps them, with its id."""
    return {"id": fact.pk, **{name: _iso(getattr(fact, name)) for name in fields}}


def facts_lock(access: ContextAccess, fact_ids: list[int]) -> list[Fact]:
    """The facts of this context the caller can see, with their subjects (and objects)
    locked in id order — the order every fact writer takes them — then the rows."""
    ids = sorted(set(fact_ids))
    visible = Fact.objects.filter(access.grants.read_q(), context=access.context, pk__in=ids)
    ends = visible.values_list("subject_id", "object_id")
    entities_lock({e for pair in ends for e in pair if e is not None})
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


def fact_sentence(fact: Fact) -> str:
    """The fact as a summary quotes it: "Alex works_at Acme"."""
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


def fact_identical_current(fact: Fact) -> Fact | None:
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


def fact_make_current(
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


def conflict_words(conflict: ConflictRecord | None) -> str:
    """What a summary adds when the fact came back contested."""
    if conflict is None:
        return ""
    return (
        f"; fact {conflict.current_fact_id} is already the current value, so this one is "
        f"contested (conflict {conflict.pk})"
    )


def fact_states_put_back(states: list[dict[str, Any]]) -> None:
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


def _undo_blocked_unless(fact: Fact, after: dict[str, Any], fields: tuple[str, ...]) -> None:
    """The undo of a change runs only over the state the change left (409 otherwise)."""
    now = fact_snapshot(fact, fields)
    if any(now[name] != after[name] for name in fields):
        raise Conflict(
            f"fact {fact.pk} changed again since (it is {fact.status} now); undo the later "
            "change first",
            code="undo_blocked",
        )


def fact_change_revert(
    access: ContextAccess, undo: dict[str, Any], fields: tuple[str, ...]
) -> None:
    """Undo a restore or an edit of one fact: only over the state it left (``fields``),
    dropping the conflict it recorded."""
    (fact,) = facts_lock(access, [undo["fact"]["id"]])
    access.require_write(fact.scope)
    _undo_blocked_unless(fact, undo["after"], fields)
    if undo.get("conflict_id"):
        ConflictRecord.objects.filter(pk=undo["conflict_id"], context=access.context).delete()
    fact_states_put_back([undo["fact"]])
    facts_index([fact.pk])
