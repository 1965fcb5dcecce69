"""Undoing a drift resolution, and undoing the undo. Each is itself an audited action
(services/undo.py runs them from the audit log): an alias's undo brings the observed
predicate back with its facts, and its undo makes the alias again; a rejection's undo
makes the predicate observed again with its facts current, and its undo rejects it again.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F

from memory.domain.access import ContextAccess
from memory.kernel.errors import Conflict
from memory.models import AuditEvent, Context, Fact, FactStatus, Predicate, PredicateStatus
from memory.models import Conflict as ConflictRecord
from memory.selectors.predicates import predicate_get
from memory.services.audit import audit_record
from memory.services.drift.alias import AliasRequest, alias_words, drift_alias, drift_alias_bulk
from memory.services.drift.resolve import drift_reject
from memory.services.entities.writes import entities_lock
from memory.services.registry.predicates import registry_lock


def drift_alias_revert(*, access: ContextAccess, undo: dict[str, Any]) -> AuditEvent:
    """Undo ``drift_alias``: the observed predicate comes back with its facts. The undo
    is itself an audited action, whose undo makes the alias again."""
    context = registry_lock(access.context)
    _alias_revert(access, context, undo)
    request = _request_of(undo)
    return audit_record(
        context=context,
        actor=access.user,
        action="drift_alias_undo",
        target_type="predicate",
        target_id=request["name"],
        summary=(
            f"undid the alias {_request_words(request)}; its facts are back on {request['name']}"
        ),
        before=request,
        undo={"op": "drift_alias_redo", **request},
    )


def drift_alias_bulk_revert(*, access: ContextAccess, undo: dict[str, Any]) -> AuditEvent:
    """Undo ``drift_alias_bulk``: every alias it made, last first, as one audited action
    whose undo makes them all again."""
    context = registry_lock(access.context)
    for item in reversed(undo["items"]):
        _alias_revert(access, context, item)
    requests = [_request_of(item) for item in undo["items"]]
    return audit_record(
        context=context,
        actor=access.user,
        action="drift_alias_bulk_undo",
        target_type="predicate",
        target_id=", ".join(r["name"] for r in requests)[:200],
        summary=(
            f"undid {len(requests)} alias{'es' if len(requests) != 1 else ''} "
            f"({'; '.join(_request_words(r) for r in requests)})"
        ),
        before={"aliases": requests},
        undo={"op": "drift_alias_bulk_redo", "items": requests},
    )


def drift_alias_redo(*, access: ContextAccess, undo: dict[str, Any]) -> None:
    """Undo the undo of an alias: make it again (it records its own, undoable, event).
    The curator went ahead once, so a single-valued target does not stop it now."""
    drift_alias(
        access=access, name=undo["name"], target=undo["target"], inverse=undo["inverse"], force=True
    )


def drift_alias_bulk_redo(*, access: ContextAccess, undo: dict[str, Any]) -> None:
    """Undo the undo of a bulk alias: all of them again, or none (409 naming why)."""
    requests = [AliasRequest(i["name"], i["target"], i["inverse"]) for i in undo["items"]]
    _, refused = drift_alias_bulk(access=access, requests=requests, force=True)
    if refused:
        name, why = next(iter(refused.items()))
        raise Conflict(f"cannot alias {name!r} again: {why}", code="undo_blocked")


def _request_of(undo: dict[str, Any]) -> dict[str, Any]:
    """The alias an undo recipe reverts, as its redo asks for it again."""
    return {"name": undo["state"]["name"], "target": undo["target"], "inverse": undo["inverse"]}


def _request_words(request: dict[str, Any]) -> str:
    return alias_words(request["name"], request["target"], inverse=request["inverse"])


def _alias_revert(access: ContextAccess, context: Context, undo: dict[str, Any]) -> None:
    state = dict(undo["state"])
    goal = predicate_get(context=context, name=undo["target"])
    if Predicate.objects.filter(context=context, name=state["name"]).exists():
        raise Conflict(f"{state['name']!r} exists again; cannot restore it", code="undo_blocked")
    goal.alias_set.filter(alias=state["name"]).delete()
    observed = Predicate.objects.create(context=context, **state)
    facts = Fact.objects.filter(pk__in=undo["fact_ids"], predicate=goal)
    entities_lock(f.subject_id for f in facts)
    # Move the facts back first, so restoring a target fact to current cannot collide
    # with a moved fact that is still current on the target.
    facts.update(predicate=observed, single_valued=observed.single_valued)
    if undo.get("inverse"):
        Fact.objects.filter(pk__in=undo["fact_ids"]).update(
            subject=F("object"), object=F("subject")
        )
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


def drift_reject_redo(*, access: ContextAccess, undo: dict[str, Any]) -> None:
    """Undo the undo of a rejection: reject again (its own, undoable, event)."""
    drift_reject(access=access, name=undo["name"])


def drift_reject_revert(*, access: ContextAccess, undo: dict[str, Any]) -> AuditEvent:
    """Undo ``drift_reject``: observed again, its facts current again; an audited action
    whose undo rejects it again."""
    context = registry_lock(access.context)
    predicate = Predicate.objects.select_for_update().get(context=context, name=undo["name"])
    if predicate.status != PredicateStatus.REJECTED:
        raise Conflict(f"{predicate.name!r} is {predicate.status} now", code="undo_blocked")
    predicate.status = PredicateStatus.OBSERVED
    predicate.save(update_fields=["status", "updated_at"])
    restored = Fact.objects.filter(pk__in=undo["fact_ids"], status=FactStatus.RETRACTED).update(
        status=FactStatus.CURRENT, status_changed_at=None
    )
    return audit_record(
        context=context,
        actor=access.user,
        action="drift_reject_undo",
        target_type="predicate",
        target_id=predicate.name,
        summary=(
            f"undid the rejection of {predicate.name}; "
            f"{restored} fact{'s' if restored != 1 else ''} current again"
        ),
        undo={"op": "drift_reject_redo", "name": predicate.name},
    )
