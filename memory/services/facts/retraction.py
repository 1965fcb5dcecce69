"""Retracting facts: they leave what the store claims and stay in history, one audited
action for one fact or many, undone by putting each back in the status it had. See
``facts/curation.py`` for what every curator fact action keeps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from memory.domain.access import ContextAccess
from memory.kernel.errors import Conflict, ValidationFailed
from memory.models import Fact, FactStatus
from memory.search.indexing import facts_index
from memory.services.audit import audit_record
from memory.services.facts.curation import (
    STATUS_FIELDS,
    fact_sentence,
    fact_snapshot,
    fact_states_put_back,
    facts_lock,
)


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
        facts = facts_lock(access, fact_ids)
        for fact in facts:
            access.require_write(fact.scope)
        now = timezone.now()
        changed = [f for f in facts if f.status != FactStatus.RETRACTED]
        before = [fact_snapshot(f, STATUS_FIELDS) for f in changed]
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
        text = f"retracted fact {changed[0].pk} ({fact_sentence(changed[0])})"
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
    facts = {f.pk: f for f in facts_lock(access, ids)}
    for state in undo["facts"]:
        fact = facts[state["id"]]
        access.require_write(fact.scope)
        if fact.status != FactStatus.RETRACTED:
            raise Conflict(
                f"fact {fact.pk} is {fact.status} now: a later change brought it back",
                code="undo_blocked",
            )
    fact_states_put_back(undo["facts"])
    facts_index(ids)
