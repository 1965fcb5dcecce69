"""What a merge would do, decided under the locks the merge takes: the plan the preview
shows and ``entity_merge`` carries out (services/merges/merge.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q

from memory.domain.access import ContextAccess
from memory.domain.entity_names import entity_clean_name
from memory.kernel.errors import Conflict, NotFound, ValidationFailed
from memory.models import Entity, EntityIdentifier, Fact, FactStatus
from memory.services.entities.writes import entities_lock
from memory.services.facts.rules import (
    FactIdentity,
    FactSlot,
    collision_decide,
    fact_identity,
    fact_slot,
)

MAX_MERGED = 50
SHOWN_FACTS = 100


@dataclass
class MergePlan:
    """What a merge would do; the preview shows it and the merge carries it out."""

    survivor: Entity
    merged: list[Entity]
    final_name: str
    facts_moving: int = 0
    aliases_added: list[str] = field(default_factory=list)
    identifiers_moving: list[str] = field(default_factory=list)
    folded: list[int] = field(default_factory=list)  # identical to a survivor fact
    keepers: dict[int, int] = field(default_factory=dict)  # folded fact → the one it joins
    self_loops: list[int] = field(default_factory=list)  # A→B becomes A→A: retracted
    # Single-valued collisions, decided by services/facts/rules.py: a moving value that
    # wins replaces the one it meets (prior → the moving fact), one that loses is contested.
    superseded: dict[int, int] = field(default_factory=dict)
    contested: list[int] = field(default_factory=list)
    contest_reasons: dict[int, str] = field(default_factory=dict)  # contested fact → why
    attribute_conflicts: dict[str, list[Any]] = field(default_factory=dict)
    # The moving facts by name, each with what the merge does to it (the first
    # SHOWN_FACTS; ``facts_moving`` counts them all).
    facts: list[dict[str, Any]] = field(default_factory=list)
    # Members in scopes of different branches (neither inside the other): the survivor's
    # scope is kept, so readers of the others' branches may lose sight of the entity.
    scope_branches: list[str] = field(default_factory=list)


def merge_load(
    access: ContextAccess, survivor_id: int, merged_ids: list[int]
) -> tuple[Entity, list[Entity]]:
    if not merged_ids or len(merged_ids) > MAX_MERGED:
        raise ValidationFailed(
            f"merge 1–{MAX_MERGED} entities into a survivor", code="invalid_merge"
        )
    if survivor_id in merged_ids:
        raise ValidationFailed("the survivor cannot also be merged", code="invalid_merge")
    ids = sorted({survivor_id, *merged_ids})
    _lock_with_incoming(ids, incoming_to=merged_ids)
    entities = {
        e.pk: e
        for e in Entity.objects.select_for_update(no_key=True)
        .filter(access.grants.read_q(), context=access.context, pk__in=ids)
        .order_by("pk")
    }
    missing = [i for i in ids if i not in entities]
    if missing:
        raise NotFound(f"entities not found: {missing}", code="entity_not_found")
    for entity in entities.values():
        access.require_write(entity.scope)
        if entity.merged_into_id is not None:
            raise Conflict(
                f"entity {entity.pk} was already merged into {entity.merged_into_id}",
                code="entity_merged",
            )
    return entities[survivor_id], [entities[i] for i in dict.fromkeys(merged_ids)]


def _lock_with_incoming(ids: list[int], *, incoming_to: list[int]) -> None:
    """Lock ``ids`` and the subjects of every fact pointing at ``incoming_to``, in id order
    (the order fact writers and other merges use, so none of them can deadlock with us).

    Moving a fact's object without its subject's lock would race a writer of that subject:
    it reads the fact (pointing at the merged entity), we move it, and its later UPDATE of
    the fact (superseding it, re-observing it) writes the merged entity back. A writer that
    creates a new fact pointing at a merged entity locks that entity first, so once ours
    are held no new incoming fact appears; the loop only catches one committed between our
    read and our lock.
    """
    locked: set[int] = set()
    wanted = set(ids)
    while True:
        wanted |= set(
            Fact.objects.filter(object_id__in=incoming_to).values_list("subject_id", flat=True)
        )
        new = sorted(wanted - locked)
        if not new:
            return
        entities_lock(new)
        locked |= set(new)


def merge_plan(
    survivor: Entity, merged: list[Entity], name: str | None, *, auto_supersede: bool
) -> MergePlan:
    final_name = entity_clean_name(name) if name else survivor.name
    plan = MergePlan(survivor=survivor, merged=merged, final_name=final_name)
    merged_ids = [e.pk for e in merged]
    group = {survivor.pk, *merged_ids}
    spellings = [survivor.name, *survivor.aliases]
    for entity in merged:
        for spelling in [entity.name, *entity.aliases]:
            if spelling not in spellings and spelling != final_name:
                spellings.append(spelling)
                plan.aliases_added.append(spelling)
        for attr, value in entity.attributes.items():
            if attr in survivor.attributes and survivor.attributes[attr] != value:
                plan.attribute_conflicts.setdefault(attr, [survivor.attributes[attr]]).append(value)
    plan.identifiers_moving = [
        f"{i.kind}:{i.value}" for i in EntityIdentifier.objects.filter(entity_id__in=merged_ids)
    ]
    moving = list(
        Fact.objects.filter(Q(subject_id__in=merged_ids) | Q(object_id__in=merged_ids))
        .select_related("subject", "object", "predicate")
        .order_by("pk")
    )
    plan.facts_moving = len(moving)
    current = [f for f in moving if f.status == FactStatus.CURRENT]
    # What the moving facts may meet: the survivor's current facts, and the current facts
    # pointing at the survivor from the subjects whose facts point at a merged entity.
    outside = {f.subject_id for f in current} - group
    staying = {
        _identity(f, group): f
        for f in Fact.objects.filter(
            Q(subject=survivor) | Q(object=survivor, subject_id__in=outside),
            status=FactStatus.CURRENT,
        )
    }
    holders = {_slot(f, group): f for f in staying.values() if f.single_valued}
    for fact in sorted(current, key=lambda f: (f.recorded_at, f.pk)):  # oldest arrives first
        if fact.subject_id in group and fact.object_id in group:
            plan.self_loops.append(fact.pk)
        elif (keeper := staying.get(_identity(fact, group))) is not None:
            plan.folded.append(fact.pk)
            plan.keepers[fact.pk] = keeper.pk
        elif fact.single_valued and (prior := holders.get(_slot(fact, group))) is not None:
            collision = collision_decide(
                newcomer_confidence=fact.confidence,
                prior_confidence=prior.confidence,
                auto_supersede=auto_supersede,
            )
            if collision.newcomer_wins:
                plan.superseded[prior.pk] = fact.pk
                del staying[_identity(prior, group)]
                staying[_identity(fact, group)] = holders[_slot(fact, group)] = fact
            else:
                plan.contested.append(fact.pk)
                plan.contest_reasons[fact.pk] = collision.reason
        else:
            staying[_identity(fact, group)] = fact
            if fact.single_valued:
                holders[_slot(fact, group)] = fact
    plan.facts = [_fact_fate(f, plan) for f in moving[:SHOWN_FACTS]]
    plan.scope_branches = scope_branches([survivor.scope, *(e.scope for e in merged)])
    return plan


def _fact_fate(fact: Fact, plan: MergePlan) -> dict[str, Any]:
    """A moving fact by name and what the merge does to it, in words."""
    if fact.pk in plan.self_loops:
        fate = "retracted: it would point at itself"
    elif fact.pk in plan.folded:
        fate = "folded into the same fact the survivor has"
    elif fact.pk in plan.superseded.values():
        fate = "replaces the survivor's value"
    elif fact.pk in plan.contested:
        fate = "contests the survivor's value (a conflict to resolve)"
    elif fact.status != FactStatus.CURRENT:
        fate = f"moves as history ({fact.status})"
    else:
        fate = "moves"
    return {
        "id": fact.pk,
        "subject": fact.subject.name,
        "predicate": fact.predicate.name,
        "object": fact.object.name if fact.object is not None else fact.value_text,
        "fate": fate,
    }


def scope_branches(scopes: list[str]) -> list[str]:
    """The distinct scopes when two of them lie on different branches (neither is the
    other or inside it), else []: ``org/a`` and ``org/a/x`` are one branch."""
    distinct = sorted(set(scopes))
    for i, one in enumerate(distinct):
        for other in distinct[i + 1 :]:
            if not (other.startswith(one + "/") or one.startswith(other + "/")):
                return distinct
    return []


def _identity(fact: Fact, group: set[int]) -> FactIdentity:
    """A fact's identity once every entity of the group is the survivor."""
    return fact_identity(
        subject="survivor" if fact.subject_id in group else fact.subject_id,
        predicate=fact.predicate_id,
        scope=fact.scope,
        kind=fact.kind,
        object="survivor" if fact.object_id in group else fact.object_id,
        value_text=fact.value_text,
    )


def _slot(fact: Fact, group: set[int]) -> FactSlot:
    """Where a single-valued fact holds its one current value, once the group is merged."""
    subject = "survivor" if fact.subject_id in group else fact.subject_id
    return fact_slot(subject=subject, predicate=fact.predicate_id, scope=fact.scope)
