"""Resolving vocabulary drift: an observed predicate becomes an alias (``drift/alias.py``),
is promoted, or is rejected. Every resolution is one audit event whose ``undo`` restores
the prior state (``drift/revert.py``).

Two curators resolving the same item race on the context lock (``registry_lock``); the
second finds the predicate no longer observed and gets a 409.
"""

from __future__ import annotations

from typing import Any, Literal

from django.db import transaction
from django.utils import timezone

from memory.domain.access import ContextAccess
from memory.kernel.errors import ValidationFailed
from memory.kernel.wording import counted
from memory.models import AuditEvent, Fact, FactStatus, PredicateStatus, Role
from memory.services.audit import audit_record
from memory.services.drift.alias import drift_alias
from memory.services.drift.observed import drift_observed_lock
from memory.services.entities.writes import entities_lock
from memory.services.registry.predicates import predicate_register, registry_lock

DriftAction = Literal["alias", "promote", "reject"]


@transaction.atomic
def drift_promote(*, access: ContextAccess, name: str, definition: dict[str, Any]) -> AuditEvent:
    """Register observed ``name`` with ``definition`` (description, category, kind, flags)."""
    access.require_role(Role.CURATOR)
    registry_lock(access.context)
    observed = drift_observed_lock(access, name)
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
    observed = drift_observed_lock(access, name)
    facts = list(Fact.objects.filter(predicate=observed, status=FactStatus.CURRENT))
    entities_lock(f.subject_id for f in facts)
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
        summary=f"rejected {observed.name}; retracted {counted(len(facts), 'fact')}",
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
    inverse: bool = False,
    force: bool = False,
) -> AuditEvent:
    if action != "alias" and (inverse or force):
        raise ValidationFailed(
            "inverse and force apply to the alias action only", code="invalid_action"
        )
    if action == "alias":
        if not target:
            raise ValidationFailed("alias needs a target predicate", code="missing_target")
        event = drift_alias(access=access, name=name, target=target, inverse=inverse, force=force)
        assert isinstance(event, AuditEvent)
        return event
    if action == "promote":
        return drift_promote(access=access, name=name, definition=definition or {})
    if action == "reject":
        return drift_reject(access=access, name=name)
    raise ValidationFailed(f"unknown action {action!r}", code="invalid_action")
