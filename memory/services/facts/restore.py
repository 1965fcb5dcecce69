"""Restoring a retracted fact: it comes back current, or contested beside a different
current value of its single-valued predicate; one audited action, undone only over the
state it left. See ``facts/curation.py`` for what every curator fact action keeps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from memory.domain.access import ContextAccess
from memory.kernel.errors import Conflict
from memory.models import Conflict as ConflictRecord
from memory.models import Fact, FactStatus, Role
from memory.search.indexing import facts_index
from memory.services.audit import audit_record
from memory.services.facts.curation import (
    STATUS_FIELDS,
    conflict_words,
    fact_change_revert,
    fact_identical_current,
    fact_make_current,
    fact_sentence,
    fact_snapshot,
    facts_lock,
)

RESTORED_REASON = "restored beside the current value of a single-valued predicate"


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
        (fact,) = facts_lock(access, [fact_id])
        access.require_write(fact.scope)
        if fact.status != FactStatus.RETRACTED:
            raise Conflict(
                f"fact {fact.pk} is {fact.status}, not retracted: only a retracted fact "
                "can be restored",
                code="fact_not_retracted",
            )
        same = fact_identical_current(fact)
        if same is not None:
            raise Conflict(
                f"fact {same.pk} already says this and is current", code="identical_fact"
            )
        before = fact_snapshot(fact, STATUS_FIELDS)
        conflict = fact_make_current(access, fact, timezone.now(), RESTORED_REASON)
        fact.save(update_fields=list(STATUS_FIELDS))
        fact.refresh_from_db(fields=list(STATUS_FIELDS))
        summary = f"restored fact {fact.pk} ({fact_sentence(fact)})" + conflict_words(conflict)
        event = audit_record(
            context=access.context,
            actor=access.user,
            action="fact_restore",
            target_type="fact",
            target_id=fact.pk,
            summary=summary + (f": {reason}" if reason else ""),
            before=before,
            after=fact_snapshot(fact, STATUS_FIELDS),
            undo={
                "op": "fact_restore_revert",
                "fact": before,
                "after": fact_snapshot(fact, STATUS_FIELDS),
                "conflict_id": conflict.pk if conflict is not None else None,
            },
        )
        facts_index([fact.pk])
    return FactRestored(fact=fact, conflict=conflict, audit_event_id=event.pk, summary=summary)


def fact_restore_revert(*, access: ContextAccess, undo: dict[str, Any]) -> None:
    fact_change_revert(access, undo, STATUS_FIELDS)
