"""Resolving vocabulary drift: an observed predicate becomes an alias, is promoted, or is
rejected. Every resolution is one audit event whose ``undo`` restores the prior state.

Two curators resolving the same item race on the context lock (``registry_lock``); the
second finds the predicate no longer observed and gets a 409.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Literal

from django.db import IntegrityError, transaction
from django.utils import timezone

from memory.access import ContextAccess
from memory.errors import Conflict, ValidationFailed
from memory.models import AuditEvent, Entity, Fact, FactStatus, Predicate, PredicateStatus, Role
from memory.models import Conflict as ConflictRecord
from memory.predicate_names import predicate_normalize
from memory.selectors.predicates import predicate_get
from memory.services.audit import audit_record
from memory.services.fact_rules import (
    FactIdentity,
    FactSlot,
    collision_decide,
    contested_fields,
    fact_identity,
    fact_slot,
    reobserve,
    superseded_fields,
)
from memory.services.predicates import (
    predicate_alias_attach,
    predicate_register,
    registry_lock,
)

DriftAction = Literal["alias", "promote", "reject"]


def _observed(access: ContextAccess, name: str) -> Predicate:
    canonical = predicate_normalize(name)
    predicate = (
        Predicate.objects.select_for_update().filter(context=access.context, name=canonical).first()
    )
    if predicate is None or predicate.status != PredicateStatus.OBSERVED:
        state = "not found" if predicate is None else f"already {predicate.status}"
        raise Conflict(
            f"{canonical!r} is not open drift ({state}); it may just have been resolved",
            code="drift_not_open",
        )
    return predicate


def _lock_subjects(facts: list[Fact]) -> None:
    """Take the fact writers' subject locks, in id order so two resolutions can't deadlock."""
    ids = sorted({f.subject_id for f in facts})
    list(Entity.objects.select_for_update().filter(pk__in=ids).order_by("pk").values_list("pk"))


def _predicate_state(predicate: Predicate) -> dict[str, Any]:
    fields = [f.name for f in Predicate._meta.concrete_fields if f.name not in ("id", "context")]
    return {name: getattr(predicate, name) for name in fields}


@transaction.atomic
def drift_alias(*, access: ContextAccess, name: str, target: str) -> AuditEvent:
    """Make observed ``name`` an alias of registered ``target``; its facts move to the
    target (keeping their raw predicate) under the write rules (services/fact_rules.py):
    a moved fact identical to a current target fact folds into it (its count grows); for
    a single-valued target, a moved value meeting the current one supersedes it only with
    confidence ≥ 0.7 and ≥ the current's, else it is kept contested with a Conflict."""
    access.require_role(Role.CURATOR)
    context = registry_lock(access.context)
    observed = _observed(access, name)
    goal = predicate_get(context=context, name=target)
    if goal.status != PredicateStatus.REGISTERED:
        raise ValidationFailed(f"{goal.name!r} is not a registered predicate", code="bad_target")
    moved = list(Fact.objects.filter(predicate=observed).order_by("recorded_at", "pk"))
    _lock_subjects(moved)  # before reading the target's current facts: writers queue here
    existing = list(
        Fact.objects.filter(
            predicate=goal, status=FactStatus.CURRENT, subject_id__in={f.subject_id for f in moved}
        )
    )
    now = timezone.now()
    status_changes, conflicts = _fold_into_target(
        access=access, moved=moved, existing=existing, goal=goal, now=now
    )
    state = _predicate_state(observed)
    Fact.objects.filter(pk__in=[f.pk for f in moved]).update(
        predicate=goal, single_valued=goal.single_valued
    )
    ConflictRecord.objects.filter(predicate=observed).update(predicate=goal)
    ConflictRecord.objects.bulk_create(conflicts)
    observed.delete()
    predicate_alias_attach(context, goal, state["name"])
    return audit_record(
        context=context,
        actor=access.user,
        action="drift_alias",
        target_type="predicate",
        target_id=state["name"],
        summary=f"aliased {state['name']} → {goal.name}; moved {len(moved)} facts",
        before={"predicate": state, "facts": len(moved)},
        after={"target": goal.name},
        undo={
            "op": "drift_alias_revert",
            "state": state,
            "target": goal.name,
            "fact_ids": [f.pk for f in moved],
            "changes": status_changes,
            "conflicts_created": [c.pk for c in conflicts],
        },
    )


def _fold_into_target(
    *, access: ContextAccess, moved: list[Fact], existing: list[Fact], goal: Predicate, now: Any
) -> tuple[list[dict[str, Any]], list[ConflictRecord]]:
    """Apply the write rules (services/fact_rules.py) to facts arriving on ``goal``, oldest
    first; returns what to restore on undo and the conflicts to record."""
    changes: list[dict[str, Any]] = []
    conflicts: list[ConflictRecord] = []
    current_by_identity = {_identity(f, goal): f for f in existing}
    holder: dict[FactSlot, Fact] = {
        fact_slot(subject=f.subject_id, predicate=goal.pk, scope=f.scope): f for f in existing
    }
    arriving = [f for f in moved if f.status == FactStatus.CURRENT]
    for fact in arriving:
        identical = current_by_identity.get(_identity(fact, goal))
        if identical is not None:
            changes.append(
                {
                    "id": identical.pk,
                    "observed_count": identical.observed_count,
                    "confidence": identical.confidence,
                    "last_seen_at": identical.last_seen_at,
                }
            )
            seen = reobserve(
                observed_count=identical.observed_count,
                confidence=identical.confidence,
                last_seen_at=identical.last_seen_at,
                seen_count=fact.observed_count,
                seen_confidence=fact.confidence,
                seen_at=fact.last_seen_at,
            )
            identical.observed_count, identical.confidence = seen.observed_count, seen.confidence
            identical.last_seen_at = seen.last_seen_at
            identical.save(update_fields=["observed_count", "confidence", "last_seen_at"])
            changes.append(_retire(fact, now))
            continue
        slot = fact_slot(subject=fact.subject_id, predicate=goal.pk, scope=fact.scope)
        prior = holder.get(slot) if goal.single_valued else None
        if prior is None:
            holder[slot] = current_by_identity[_identity(fact, goal)] = fact
            continue
        collision = collision_decide(
            newcomer_confidence=fact.confidence,
            prior_confidence=prior.confidence,
            auto_supersede=access.context.auto_supersede,
        )
        if collision.newcomer_wins:
            fields = superseded_fields(
                prior_valid_until=prior.valid_until, newcomer_valid_from=fact.valid_from, now=now
            )
            changes.append(_set_fields(prior, fields))
            changes.append(_set_fields(fact, {"supersedes_id": prior.pk}))
            holder[slot] = current_by_identity[_identity(fact, goal)] = fact
        else:
            changes.append(_set_fields(fact, contested_fields(now=now)))
            conflicts.append(
                ConflictRecord(
                    context=access.context,
                    scope=fact.scope,
                    subject_id=fact.subject_id,
                    predicate=goal,
                    current_fact=prior,
                    contested_fact=fact,
                    reason=collision.reason,
                )
            )
    return changes, conflicts


def _identity(fact: Fact, goal: Predicate) -> FactIdentity:
    return fact_identity(
        subject=fact.subject_id,
        predicate=goal.pk,
        scope=fact.scope,
        kind=fact.kind,
        object=fact.object_id,
        value_text=fact.value_text,
    )


def _set_fields(fact: Fact, fields: dict[str, Any]) -> dict[str, Any]:
    """Set ``fields`` on ``fact`` and save them; returns their prior values (for undo)."""
    change = {"id": fact.pk, **{name: getattr(fact, name) for name in fields}}
    for name, value in fields.items():
        setattr(fact, name, value)
    fact.save(update_fields=list(fields))
    return change


def _retire(fact: Fact, now: Any) -> dict[str, Any]:
    change = {"id": fact.pk, "status": fact.status, "status_changed_at": fact.status_changed_at}
    fact.status, fact.status_changed_at = FactStatus.SUPERSEDED, now
    fact.save(update_fields=["status", "status_changed_at"])
    return change


@transaction.atomic
def drift_promote(*, access: ContextAccess, name: str, definition: dict[str, Any]) -> AuditEvent:
    """Register observed ``name`` with ``definition`` (description, category, kind, flags)."""
    access.require_role(Role.CURATOR)
    registry_lock(access.context)
    observed = _observed(access, name)
    predicate_register(access=access, name=observed.name, **definition)
    # predicate_register recorded the event (its undo restores the observed state).
    return AuditEvent.objects.filter(
        context=access.context, action="predicate_register", target_id=observed.name
    ).latest("created_at", "id")


@transaction.atomic
def drift_reject(*, access: ContextAccess, name: str) -> AuditEvent:
    """Mark observed ``name`` rejected: later writes using it are refused, and its current
    facts are retracted (kept in history; undo brings them back)."""
    access.require_role(Role.CURATOR)
    context = registry_lock(access.context)
    observed = _observed(access, name)
    facts = list(Fact.objects.filter(predicate=observed, status=FactStatus.CURRENT))
    _lock_subjects(facts)
    now = timezone.now()
    Fact.objects.filter(pk__in=[f.pk for f in facts]).update(
        status=FactStatus.RETRACTED, status_changed_at=now
    )
    observed.status = PredicateStatus.REJECTED
    observed.save(update_fields=["status", "updated_at"])
    return audit_record(
        context=context,
        actor=access.user,
        action="drift_reject",
        target_type="predicate",
        target_id=observed.name,
        summary=f"rejected {observed.name}; retracted {len(facts)} facts",
        before={"status": "observed", "facts": len(facts)},
        after={"status": "rejected"},
        undo={
            "op": "drift_reject_revert",
            "name": observed.name,
            "fact_ids": [f.pk for f in facts],
        },
    )


def drift_resolve(
    *,
    access: ContextAccess,
    name: str,
    action: DriftAction,
    target: str | None = None,
    definition: dict[str, Any] | None = None,
) -> AuditEvent:
    if action == "alias":
        if not target:
            raise ValidationFailed("alias needs a target predicate", code="missing_target")
        return drift_alias(access=access, name=name, target=target)
    if action == "promote":
        return drift_promote(access=access, name=name, definition=definition or {})
    if action == "reject":
        return drift_reject(access=access, name=name)
    raise ValidationFailed(f"unknown action {action!r}", code="invalid_action")


def drift_alias_revert(*, access: ContextAccess, undo: dict[str, Any]) -> None:
    """Undo ``drift_alias``: the observed predicate comes back with its facts."""
    context = registry_lock(access.context)
    state = dict(undo["state"])
    goal = predicate_get(context=context, name=undo["target"])
    if Predicate.objects.filter(context=context, name=state["name"]).exists():
        raise Conflict(f"{state['name']!r} exists again; cannot restore it", code="undo_blocked")
    goal.alias_set.filter(alias=state["name"]).delete()
    observed = Predicate.objects.create(context=context, **state)
    facts = Fact.objects.filter(pk__in=undo["fact_ids"], predicate=goal)
    _lock_subjects(list(facts))
    # Move the facts back first, so restoring a target fact to current cannot collide
    # with a moved fact that is still current on the target.
    facts.update(predicate=observed, single_valued=observed.single_valued)
    ConflictRecord.objects.filter(pk__in=undo.get("conflicts_created", [])).delete()
    ConflictRecord.objects.filter(contested_fact_id__in=undo["fact_ids"]).update(predicate=observed)
    by_id: dict[int, dict[str, Any]] = defaultdict(dict)
    for change in undo["changes"]:  # in the order made: a field's first entry is its prior
        for name, value in change.items():
            by_id[change["id"]].setdefault(name, value)
    try:
        with transaction.atomic():
            for fact in Fact.objects.filter(pk__in=list(by_id)):
                fields = [f for f in by_id[fact.pk] if f != "id"]
                for field in fields:
                    setattr(fact, field, by_id[fact.pk][field])
                fact.save(update_fields=fields)
    except IntegrityError:
        raise Conflict(
            f"a newer value of {goal.name!r} was written since; resolve it before undoing",
            code="undo_blocked",
        ) from None


def drift_reject_revert(*, access: ContextAccess, undo: dict[str, Any]) -> None:
    context = registry_lock(access.context)
    predicate = Predicate.objects.select_for_update().get(context=context, name=undo["name"])
    if predicate.status != PredicateStatus.REJECTED:
        raise Conflict(f"{predicate.name!r} is {predicate.status} now", code="undo_blocked")
    predicate.status = PredicateStatus.OBSERVED
    predicate.save(update_fields=["status", "updated_at"])
    Fact.objects.filter(pk__in=undo["fact_ids"], status=FactStatus.RETRACTED).update(
        status=FactStatus.CURRENT, status_changed_at=None
    )
