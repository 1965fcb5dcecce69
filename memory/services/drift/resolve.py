"""Resolving vocabulary drift: an observed predicate becomes an alias, is promoted, or is
rejected. Every resolution is one audit event whose ``undo`` restores the prior state.

Two curators resolving the same item race on the context lock (``registry_lock``); the
second finds the predicate no longer observed and gets a 409.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Literal

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from memory.domain.access import ContextAccess
from memory.domain.predicate_names import predicate_normalize
from memory.kernel.errors import Conflict, NotFound, ValidationFailed
from memory.kernel.wording import counted, with_article
from memory.models import (
    AuditEvent,
    Context,
    Entity,
    Fact,
    FactStatus,
    Predicate,
    PredicateStatus,
    Role,
)
from memory.models import Conflict as ConflictRecord
from memory.models.predicate import PredicateKind
from memory.selectors.predicates import predicate_get
from memory.services.audit import audit_record
from memory.services.facts.batch import fact_fold_identical
from memory.services.facts.rules import (
    FactIdentity,
    FactSlot,
    collision_decide,
    contested_fields,
    fact_identity,
    fact_slot,
    superseded_fields,
)
from memory.services.registry.predicates import (
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
    list(
        Entity.objects.select_for_update(no_key=True)
        .filter(pk__in=ids)
        .order_by("pk")
        .values_list("pk")
    )


def _predicate_state(predicate: Predicate) -> dict[str, Any]:
    fields = [f.name for f in Predicate._meta.concrete_fields if f.name not in ("id", "context")]
    return {name: getattr(predicate, name) for name in fields}


SHOWN_MOVING = 10


def _reads_as(fact: Fact, goal: Predicate) -> str:
    """A moving fact as it will read on ``goal`` (its ends already swapped if inverse)."""
    target = fact.object.name if fact.object is not None else fact.value_text
    return f"{fact.subject.name} {goal.name} {target}"


@dataclass(frozen=True)
class AliasPlan:
    """What aliasing ``name`` onto ``target`` would do, checked before anything moves."""

    name: str
    target: str
    inverse: bool
    facts_moving: int
    # (subject, scope) slots of a single-valued target that would hold several values.
    subjects_with_several_values: int
    warnings: list[str]
    # The first facts that move, as they will read on the target ("Acme works_at ..."
    # reads "Alex works_at Acme" through an inverse alias), for a confirmation screen.
    moving: tuple[str, ...] = ()


@dataclass(frozen=True)
class AliasDone:
    """One alias made: what the audit event says of it and the recipe that reverts it."""

    name: str
    target: str
    inverse: bool
    moved: int
    warnings: list[str]
    undo: dict[str, Any]

    @property
    def words(self) -> str:
        return f"{self.name} → {'inverse of ' if self.inverse else ''}{self.target}"


@transaction.atomic
def drift_alias(
    *,
    access: ContextAccess,
    name: str,
    target: str,
    inverse: bool = False,
    force: bool = False,
    preview: bool = False,
) -> AuditEvent | AliasPlan:
    """Make observed ``name`` an alias of registered ``target``; its facts move to the
    target (keeping their raw predicate) under the write rules (services/facts/rules.py):
    a moved fact identical to a current target fact folds into it (its count grows); for
    a single-valued target, a moved value meeting the current one supersedes it only with
    confidence ≥ 0.7 and ≥ the current's, else it is kept contested with a Conflict.

    With ``inverse`` the name means the target read backwards: each fact (S name O) moves
    as (O target S) and the alias is an inverse alias. Refused: a target of another kind
    than the facts (Conflict ``kind_mismatch``), ``inverse`` on a non-relation
    (``inverse_not_relation``), the name itself as target (``alias_onto_self``), and — unless
    ``force`` — a single-valued target the move would leave with several current values for
    some subject (Conflict ``several_values``). ``preview`` answers the plan (with type-hint
    warnings) and writes nothing."""
    access.require_role(Role.CURATOR)
    context = registry_lock(access.context)
    done = _alias_apply(
        access=access,
        context=context,
        name=name,
        target=target,
        inverse=inverse,
        force=force,
        preview=preview,
    )
    if isinstance(done, AliasPlan):
        return done
    return audit_record(
        context=context,
        actor=access.user,
        action="drift_alias",
        target_type="predicate",
        target_id=done.name,
        summary=(
            f"aliased {done.words}; moved {done.moved} fact{'s' if done.moved != 1 else ''}"
            f"{' (subject and object swapped)' if done.inverse else ''}"
        ),
        before={"predicate": done.undo["state"], "facts": done.moved},
        after={"target": done.target, "inverse": done.inverse, "warnings": done.warnings},
        undo=done.undo,
    )


def _alias_apply(
    *,
    access: ContextAccess,
    context: Context,
    name: str,
    target: str,
    inverse: bool,
    force: bool,
    preview: bool,
) -> AliasDone | AliasPlan:
    """drift_alias's work under the registry lock (``context``, locked), without its
    audit event."""
    observed = _observed(access, name)
    goal = predicate_get(context=context, name=target)
    if goal.pk == observed.pk:
        raise ValidationFailed(
            f"{observed.name!r} cannot be an alias of itself", code="alias_onto_self"
        )
    if goal.status != PredicateStatus.REGISTERED:
        raise ValidationFailed(f"{goal.name!r} is not a registered predicate", code="bad_target")
    moved = list(
        Fact.objects.filter(predicate=observed)
        .select_related("subject", "object")
        .order_by("recorded_at", "pk")
    )
    _check_kinds(observed, goal, moved, inverse=inverse)
    if inverse:
        for fact in moved:
            _swap_ends(fact)
    _lock_subjects(moved)  # before reading the target's current facts: writers queue here
    existing = list(
        Fact.objects.filter(
            predicate=goal, status=FactStatus.CURRENT, subject_id__in={f.subject_id for f in moved}
        )
    )
    plan = AliasPlan(
        name=observed.name,
        target=goal.name,
        inverse=inverse,
        facts_moving=len(moved),
        subjects_with_several_values=_several_values(goal, moved, existing),
        warnings=_type_warnings(goal, moved),
        moving=tuple(_reads_as(f, goal) for f in moved[:SHOWN_MOVING]),
    )
    if preview:
        return plan
    if plan.subjects_with_several_values and not force:
        count = plan.subjects_with_several_values
        raise Conflict(
            f"{goal.name!r} is single-valued: moving the facts of {observed.name!r} would give "
            f"{count} subject{'s' if count != 1 else ''} several current values; the write "
            "rules then supersede or record conflicts for curators. Send force: true to go "
            "ahead",
            code="several_values",
            details={"subjects": count, "target": goal.name},
        )
    now = timezone.now()
    status_changes, conflicts = _fold_into_target(
        access=access, moved=moved, existing=existing, goal=goal, now=now
    )
    state = _predicate_state(observed)
    moving = Fact.objects.filter(pk__in=[f.pk for f in moved])
    if inverse:
        # One UPDATE reads the old values on the right: the ends swap.
        moving.update(subject=F("object"), object=F("subject"))
    moving.update(predicate=goal, single_valued=goal.single_valued)
    ConflictRecord.objects.filter(predicate=observed).update(predicate=goal)
    ConflictRecord.objects.bulk_create(conflicts)
    observed.delete()
    predicate_alias_attach(context, goal, state["name"], inverse=inverse)
    return AliasDone(
        name=state["name"],
        target=goal.name,
        inverse=inverse,
        moved=len(moved),
        warnings=plan.warnings,
        undo={
            "op": "drift_alias_revert",
            "state": state,
            "target": goal.name,
            "inverse": inverse,
            "fact_ids": [f.pk for f in moved],
            "changes": status_changes,
            "conflicts_created": [c.pk for c in conflicts],
        },
    )


@dataclass(frozen=True)
class AliasRequest:
    name: str
    target: str
    inverse: bool = False


@transaction.atomic
def drift_alias_bulk(
    *, access: ContextAccess, requests: list[AliasRequest], force: bool = False
) -> tuple[AuditEvent | None, dict[str, str]]:
    """Alias several drift items as ONE action: one audit event whose undo reverts them
    all (and whose undo's undo makes them again). An item the alias rules refuse is left
    out and answered in the second value (name → why); the others still go ahead. None
    when nothing was aliased."""
    access.require_role(Role.CURATOR)
    context = registry_lock(access.context)
    made: list[AliasDone] = []
    refused: dict[str, str] = {}
    for request in requests:
        try:
            with transaction.atomic():  # a refused item leaves nothing behind
                done = _alias_apply(
                    access=access,
                    context=context,
                    name=request.name,
                    target=request.target,
                    inverse=request.inverse,
                    force=force,
                    preview=False,
                )
        except (Conflict, ValidationFailed, NotFound) as exc:
            refused[request.name] = exc.message
            continue
        assert isinstance(done, AliasDone)
        made.append(done)
    if not made:
        return None, refused
    moved = sum(d.moved for d in made)
    event = audit_record(
        context=context,
        actor=access.user,
        action="drift_alias_bulk",
        target_type="predicate",
        target_id=", ".join(d.name for d in made)[:200],
        summary=(
            f"aliased {len(made)} drift item{'s' if len(made) != 1 else ''} "
            f"({'; '.join(d.words for d in made)}); moved {moved} fact{'s' if moved != 1 else ''}"
        ),
        before={"predicates": [d.undo["state"] for d in made]},
        after={"aliases": [_request_of(d) for d in made]},
        undo={"op": "drift_alias_bulk_revert", "items": [d.undo for d in made]},
    )
    return event, refused


def _request_of(done: AliasDone) -> dict[str, Any]:
    return {"name": done.name, "target": done.target, "inverse": done.inverse}


def _swap_ends(fact: Fact) -> None:
    """Give the in-memory ``fact`` the ends it is stored with once the alias reads
    backwards, so the plan, the fold and the single-valued check see the stored
    direction. Both related objects are read before either is assigned: assigning one
    sets its id, and Django drops a cached relation whose id changes, so swapping the ids
    first would make the second read fetch the ends already swapped (and swap them back)."""
    subject, obj = fact.subject, fact.object
    assert obj is not None  # _check_kinds refused an inverse move of a fact without one
    fact.subject, fact.object = obj, subject


def _fold_into_target(
    *, access: ContextAccess, moved: list[Fact], existing: list[Fact], goal: Predicate, now: Any
) -> tuple[list[dict[str, Any]], list[ConflictRecord]]:
    """Apply the write rules (services/facts/rules.py) to facts arriving on ``goal``, oldest
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
            changes.append(fact_fold_identical(current=identical, moved=fact))
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


def _a(word: str) -> str:
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


def _check_kinds(observed: Predicate, goal: Predicate, moved: list[Fact], *, inverse: bool) -> None:
    kinds = sorted({f.kind for f in moved})
    wrong = [k for k in kinds if k != goal.kind]
    if wrong:
        raise Conflict(
            f"{observed.name!r} holds {' and '.join(k + ' facts' for k in kinds)} and "
            f"{goal.name!r} is {_a(goal.kind)}: an alias cannot cross kinds ({wrong[0]} → "
            f"{goal.kind}); promote it or alias it to {_a(wrong[0])}",
            code="kind_mismatch",
            details={"observed_kinds": kinds, "target_kind": goal.kind},
        )
    if inverse and goal.kind != PredicateKind.RELATION:
        raise ValidationFailed(
            f"{goal.name!r} is {with_article(goal.kind)}: only a relation can be read backwards",
            code="inverse_not_relation",
        )
    if inverse and any(f.object_id is None for f in moved):
        raise ValidationFailed(
            f"some facts of {observed.name!r} have no object entity to swap with the subject",
            code="inverse_not_relation",
        )


def _several_values(goal: Predicate, moved: list[Fact], existing: list[Fact]) -> int:
    """Subjects (per scope) a single-valued ``goal`` would hold more than one distinct
    current value for once the moved facts arrive."""
    if not goal.single_valued:
        return 0
    values: dict[tuple[int, str], set[tuple[Any, str]]] = defaultdict(set)
    for fact in [*existing, *(f for f in moved if f.status == FactStatus.CURRENT)]:
        values[(fact.subject_id, fact.scope)].add((fact.object_id, fact.value_text))
    return sum(1 for held in values.values() if len(held) > 1)


def _type_warnings(goal: Predicate, moved: list[Fact]) -> list[str]:
    """The moved facts whose subject or object type is outside the target's hints."""
    subject_misfits = Counter(
        f.subject.type
        for f in moved
        if goal.subject_types and f.subject.type not in goal.subject_types
    )
    object_misfits = Counter(
        f.object.type
        for f in moved
        if f.object is not None and goal.object_types and f.object.type not in goal.object_types
    )
    warnings = [
        f"{counted(n, 'fact')} would have {with_article(kind)} subject; {goal.name} expects "
        f"{', '.join(goal.subject_types)}"
        for kind, n in sorted(subject_misfits.items())
    ]
    warnings += [
        f"{counted(n, 'fact')} would have {with_article(kind)} object; {goal.name} expects "
        f"{', '.join(goal.object_types)}"
        for kind, n in sorted(object_misfits.items())
    ]
    return warnings


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


def drift_alias_revert(*, access: ContextAccess, undo: dict[str, Any]) -> AuditEvent:
    """Undo ``drift_alias``: the observed predicate comes back with its facts. The undo
    is itself an audited action, whose undo makes the alias again."""
    context = registry_lock(access.context)
    _alias_revert(access, context, undo)
    request = {"name": undo["state"]["name"], "target": undo["target"], "inverse": undo["inverse"]}
    return audit_record(
        context=context,
        actor=access.user,
        action="drift_alias_undo",
        target_type="predicate",
        target_id=request["name"],
        summary=f"undid the alias {_words(request)}; its facts are back on {request['name']}",
        before=request,
        undo={"op": "drift_alias_redo", **request},
    )


def drift_alias_bulk_revert(*, access: ContextAccess, undo: dict[str, Any]) -> AuditEvent:
    """Undo ``drift_alias_bulk``: every alias it made, last first, as one audited action
    whose undo makes them all again."""
    context = registry_lock(access.context)
    for item in reversed(undo["items"]):
        _alias_revert(access, context, item)
    requests = [
        {"name": i["state"]["name"], "target": i["target"], "inverse": i["inverse"]}
        for i in undo["items"]
    ]
    return audit_record(
        context=context,
        actor=access.user,
        action="drift_alias_bulk_undo",
        target_type="predicate",
        target_id=", ".join(r["name"] for r in requests)[:200],
        summary=(
            f"undid {len(requests)} alias{'es' if len(requests) != 1 else ''} "
            f"({'; '.join(_words(r) for r in requests)})"
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


def _words(request: dict[str, Any]) -> str:
    inverse = "inverse of " if request["inverse"] else ""
    return f"{request['name']} → {inverse}{request['target']}"


def _alias_revert(access: ContextAccess, context: Context, undo: dict[str, Any]) -> None:
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
