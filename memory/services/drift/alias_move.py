"""The facts a drift alias moves onto its target: checked before anything moves (their
kinds, the target's single values, its type hints) and folded into the target's current
facts under the write rules (services/facts/rules.py) once they arrive.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from memory.domain.access import ContextAccess
from memory.kernel.errors import Conflict, ValidationFailed
from memory.kernel.wording import counted, with_article
from memory.models import Conflict as ConflictRecord
from memory.models import Fact, FactStatus, Predicate
from memory.models.predicate import PredicateKind
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


def alias_kinds_check(
    observed: Predicate, goal: Predicate, moved: list[Fact], *, inverse: bool
) -> None:
    """Refuse a move across kinds, and an inverse one of facts that are not relations
    with an object entity to swap."""
    kinds = sorted({f.kind for f in moved})
    wrong = [k for k in kinds if k != goal.kind]
    if wrong:
        raise Conflict(
            f"{observed.name!r} holds {' and '.join(k + ' facts' for k in kinds)} and "
            f"{goal.name!r} is {with_article(goal.kind)}: an alias cannot cross kinds "
            f"({wrong[0]} → {goal.kind}); promote it or alias it to {with_article(wrong[0])}",
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


def alias_several_values(goal: Predicate, moved: list[Fact], existing: list[Fact]) -> int:
    """Subjects (per scope) a single-valued ``goal`` would hold more than one distinct
    current value for once the moved facts arrive."""
    if not goal.single_valued:
        return 0
    values: dict[tuple[int, str], set[tuple[Any, str]]] = defaultdict(set)
    for fact in [*existing, *(f for f in moved if f.status == FactStatus.CURRENT)]:
        values[(fact.subject_id, fact.scope)].add((fact.object_id, fact.value_text))
    return sum(1 for held in values.values() if len(held) > 1)


def alias_type_warnings(goal: Predicate, moved: list[Fact]) -> list[str]:
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


def alias_facts_fold(
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
