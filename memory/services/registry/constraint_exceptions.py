"""Exceptions to a predicate's constraint: the constraint page's one-click "this entity is
an exception", and its API twin. A curator's call (it judges one entity's data, it does
not change what the rule says), audited and undoable like every curation."""

from __future__ import annotations

import copy
from typing import Any

from django.db import transaction

from memory.domain.access import ContextAccess
from memory.domain.constraints import constraint_get
from memory.kernel.errors import NotFound
from memory.models import Entity, Predicate, Role
from memory.services.audit import audit_record


@transaction.atomic
def constraint_exception_add(
    *, access: ContextAccess, predicate: Predicate, constraint: str, entity: Entity
) -> Predicate:
    """Add ``entity`` to the exceptions of ``predicate``'s ``constraint``. Idempotent: an
    entity already excepted changes nothing and records nothing."""
    return _change(access, predicate, constraint, entity, add=True)


@transaction.atomic
def constraint_exception_remove(
    *, access: ContextAccess, predicate: Predicate, constraint: str, entity_id: int
) -> Predicate:
    """Take ``entity_id`` out of the exceptions again (the undo of an add)."""
    entity = Entity.objects.filter(pk=entity_id, context=access.context).first() or Entity(
        pk=entity_id, context_id=access.context.pk, scope="", name=f"entity {entity_id}"
    )
    return _change(access, predicate, constraint, entity, add=False)


def _change(
    access: ContextAccess, predicate: Predicate, constraint: str, entity: Entity, *, add: bool
) -> Predicate:
    access.require_role(Role.CURATOR)
    if entity.context_id != access.context.pk:
        raise NotFound("not found")
    if add:
        access.require_read(entity.scope)
    current = (
        Predicate.objects.select_for_update()
        .filter(pk=predicate.pk, context=access.context)
        .first()
    )
    if current is None:
        raise NotFound(f"no predicate {predicate.name!r} in this context", code="not_found")
    rules: list[dict[str, Any]] = copy.deepcopy(current.constraints)
    rule = constraint_get(rules, constraint)
    if rule is None:
        raise NotFound(
            f"{current.name!r} has no {constraint[:40]!r} constraint",
            code="constraint_not_found",
        )
    before = list(rule["exceptions"])
    present = entity.pk in before
    if present == add:
        return current
    kept = set(rule["exceptions"]) - {entity.pk}
    rule["exceptions"] = sorted(kept | {entity.pk}) if add else sorted(kept)
    current.constraints = rules
    current.save(update_fields=["constraints", "updated_at"])
    undo_op = "constraint_exception_remove" if add else "constraint_exception_add"
    audit_record(
        context=access.context,
        actor=access.user,
        action="constraint_exception_add" if add else "constraint_exception_remove",
        target_type="predicate",
        target_id=current.name,
        summary=(
            f"{'excepted' if add else 'no longer excepted'} {entity.name} "
            f"{'from' if add else 'in'} the {constraint} constraint of {current.name}"
        ),
        before={"constraint": constraint, "exceptions": before},
        after={"constraint": constraint, "exceptions": rule["exceptions"]},
        undo={
            "op": undo_op,
            "name": current.name,
            "constraint": constraint,
            "entity_id": entity.pk,
        },
    )
    return current
