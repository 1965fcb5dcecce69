"""Aliasing drift: an observed predicate becomes an alias of a registered one (one item,
or several as one action), its facts moving onto the target. Each alias is one audit
event whose ``undo`` restores the prior state (``drift/revert.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from memory.domain.access import ContextAccess
from memory.kernel.errors import Conflict, NotFound, ValidationFailed
from memory.models import AuditEvent, Context, Fact, FactStatus, Predicate, PredicateStatus, Role
from memory.models import Conflict as ConflictRecord
from memory.selectors.predicates import predicate_get
from memory.services.audit import audit_record
from memory.services.drift.alias_move import (
    alias_facts_fold,
    alias_kinds_check,
    alias_several_values,
    alias_type_warnings,
)
from memory.services.drift.observed import drift_observed_lock
from memory.services.entities.writes import entities_lock
from memory.services.registry.predicates import predicate_alias_attach, registry_lock


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
        return alias_words(self.name, self.target, inverse=self.inverse)


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
    observed = drift_observed_lock(access, name)
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
    alias_kinds_check(observed, goal, moved, inverse=inverse)
    if inverse:
        for fact in moved:
            _swap_ends(fact)
    # Before reading the target's current facts: writers queue here.
    entities_lock(f.subject_id for f in moved)
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
        subjects_with_several_values=alias_several_values(goal, moved, existing),
        warnings=alias_type_warnings(goal, moved),
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
    status_changes, conflicts = alias_facts_fold(
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
    assert obj is not None  # alias_kinds_check refused an inverse move of a fact without one
    fact.subject, fact.object = obj, subject


def alias_words(name: str, target: str, *, inverse: bool) -> str:
    """An alias as audit summaries name it: "employer → works_at", "staff → inverse of
    works_at"."""
    return f"{name} → {'inverse of ' if inverse else ''}{target}"
