"""A curator's review of pending facts (services/facts/trust.py says which facts wait):
accept makes a fact trusted — a pending value of a single-valued slot then replaces the
trusted one, as a newer value would have — and reject keeps it, ``rejected``, so the same
claim written again stays rejected and never returns to the queue.

Each decision is audited with its undo (the fact pending again; a replaced value current
again). Under the subject's row lock, as every fact write: the replaced value leaves
"current" before the accepted one becomes trusted (the partial unique index).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from memory.domain.access import ContextAccess
from memory.infra.transactions import write_transaction
from memory.kernel.errors import Conflict, NotFound, ValidationFailed
from memory.models import AuditEvent, Fact, FactStatus, FactTrust, Role
from memory.services.audit import audit_record
from memory.services.entities.writes import entities_lock
from memory.services.facts.rules import superseded_fields

ReviewAction = Literal["accept", "reject"]
REVIEW_ACTIONS: tuple[str, ...] = ("accept", "reject")
MAX_NOTE_CHARS = 500
MAX_BULK_REVIEW = 200


@dataclass(frozen=True)
class FactReviewed:
    fact: Fact
    action: str
    superseded: Fact | None
    audit_event: AuditEvent


def _check(access: ContextAccess, action: str, note: str) -> None:
    access.require_role(Role.CURATOR)
    if action not in REVIEW_ACTIONS:
        raise ValidationFailed(
            f"action must be one of {', '.join(REVIEW_ACTIONS)}", code="invalid_action"
        )
    if len(note) > MAX_NOTE_CHARS:
        raise ValidationFailed(f"note: at most {MAX_NOTE_CHARS} characters", code="invalid_note")


@write_transaction
def fact_review(
    *, access: ContextAccess, fact_id: int, action: str, note: str = ""
) -> FactReviewed:
    """Accept or reject pending fact ``fact_id``. Needs the curator role and a write grant
    on the fact's scope; a fact of another context, or outside the grants, is not found."""
    _check(access, action, note)
    return _review_one(access, fact_id, action, note)


@write_transaction
def facts_review(
    *, access: ContextAccess, fact_ids: list[int], action: str, note: str = ""
) -> list[FactReviewed]:
    """Review several pending facts alike, all or nothing (a turn's facts at once)."""
    _check(access, action, note)
    if not fact_ids or len(fact_ids) > MAX_BULK_REVIEW:
        raise ValidationFailed(f"give 1–{MAX_BULK_REVIEW} fact ids", code="invalid_facts")
    # Every subject at once, in id order (docs/decisions/0119), then the facts one by one.
    entities_lock(
        Fact.objects.filter(context=access.context, pk__in=fact_ids).values_list(
            "subject_id", flat=True
        )
    )
    return [_review_one(access, fact_id, action, note) for fact_id in sorted(set(fact_ids))]


def _review_one(access: ContextAccess, fact_id: int, action: str, note: str) -> FactReviewed:
    found = Fact.objects.filter(context=access.context, pk=fact_id).values("subject_id").first()
    if found is None:
        raise NotFound(f"fact {fact_id} not found", code="fact_not_found")
    entities_lock([found["subject_id"]])
    fact = Fact.objects.select_for_update().select_related("subject", "predicate").get(pk=fact_id)
    access.require_read(fact.scope)
    access.require_write(fact.scope)
    if fact.trust != FactTrust.PENDING:
        raise Conflict(
            f"fact {fact.pk} is {fact.trust}, not pending: only pending facts are reviewed",
            code="fact_not_pending",
        )
    now = timezone.now()
    superseded = _replaced_value(fact, now) if action == "accept" else None
    fact.trust = FactTrust.TRUSTED if action == "accept" else FactTrust.REJECTED
    fact.reviewed_at = now
    fact.reviewed_by = access.user if getattr(access.user, "is_authenticated", False) else None
    fact.review_note = note
    if superseded is not None:
        fact.supersedes = superseded["fact"]
    fact.save(update_fields=["trust", "reviewed_at", "reviewed_by", "review_note", "supersedes"])
    event = audit_record(
        context=access.context,
        actor=access.user,
        action=f"fact_{action}",
        target_type="fact",
        target_id=fact.pk,
        summary=f"{action}ed fact {fact.pk}: {_words(fact)}"
        + (f" (replacing fact {superseded['fact'].pk})" if superseded else ""),
        before={"trust": FactTrust.PENDING},
        after={"trust": fact.trust, "note": note},
        undo={
            "op": "fact_review_revert",
            "fact": fact.pk,
            "superseded": superseded["undo"] if superseded else None,
        },
    )
    return FactReviewed(
        fact=fact,
        action=action,
        superseded=superseded["fact"] if superseded else None,
        audit_event=event,
    )


def _replaced_value(fact: Fact, now: Any) -> dict[str, Any] | None:
    """The trusted current value an accepted single value replaces (superseded here)."""
    if not fact.single_valued or fact.status != FactStatus.CURRENT:
        return None
    prior = (
        Fact.objects.select_for_update()
        .filter(
            subject_id=fact.subject_id,
            predicate_id=fact.predicate_id,
            scope=fact.scope,
            status=FactStatus.CURRENT,
            trust=FactTrust.TRUSTED,
        )
        .exclude(pk=fact.pk)
        .first()
    )
    if prior is None:
        return None
    undo = {
        "id": prior.pk,
        "valid_until": prior.valid_until.isoformat() if prior.valid_until else None,
        "status_changed_at": (
            prior.status_changed_at.isoformat() if prior.status_changed_at else None
        ),
    }
    changes = superseded_fields(
        prior_valid_until=prior.valid_until, newcomer_valid_from=fact.valid_from, now=now
    )
    for name, value in changes.items():
        setattr(prior, name, value)
    prior.save(update_fields=list(changes))
    return {"fact": prior, "undo": undo}


def fact_review_revert(*, access: ContextAccess, undo: dict[str, Any]) -> None:
    """Undo a review: the fact is pending again; a value it replaced is current again,
    unless another value holds the slot now (409)."""
    # The subject first, then the fact, as a review takes them (docs/decisions/0119).
    found = Fact.objects.filter(context=access.context, pk=undo["fact"])
    entities_lock(found.values_list("subject_id", flat=True))
    fact = found.select_for_update().first()
    if fact is None:
        raise Conflict("the reviewed fact no longer exists", code="undo_blocked")
    access.require_write(fact.scope)
    fact.trust = FactTrust.PENDING
    fact.reviewed_at, fact.reviewed_by, fact.review_note = None, None, ""
    replaced = undo.get("superseded")
    if replaced:
        fact.supersedes = None
    fact.save(update_fields=["trust", "reviewed_at", "reviewed_by", "review_note", "supersedes"])
    if replaced:
        prior = Fact.objects.select_for_update().filter(pk=replaced["id"]).first()
        if prior is None or prior.status != FactStatus.SUPERSEDED:
            raise Conflict("the value this review replaced has changed since", code="undo_blocked")
        held = Fact.objects.filter(
            subject_id=prior.subject_id,
            predicate_id=prior.predicate_id,
            scope=prior.scope,
            status=FactStatus.CURRENT,
            trust=FactTrust.TRUSTED,
        ).exists()
        if held:
            raise Conflict(
                "another value holds this slot now; review it instead", code="undo_blocked"
            )
        prior.status = FactStatus.CURRENT
        prior.valid_until = _when(replaced["valid_until"])
        prior.status_changed_at = _when(replaced["status_changed_at"])
        prior.save(update_fields=["status", "valid_until", "status_changed_at"])


def _when(text: str | None) -> Any:
    return parse_datetime(text) if text else None


def _words(fact: Fact) -> str:
    target = fact.object.name if fact.object_id and fact.object else fact.value_text
    return f"{fact.subject.name} {fact.predicate.name} {target}"[:300]
