"""Merging duplicate entities into a survivor, with a preview and an exact undo.

A merged entity is never deleted or reused: it stays as a redirect (``merged_into``), so
ids held by agents keep resolving. Facts, identifiers and open conflicts move to the
survivor under the subject locks that fact writers take — the merged entities' own and
those of every entity with a fact pointing at them — and every moved row's prior state
goes into the Merge snapshot.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from memory.domain.access import ContextAccess
from memory.domain.entity_names import entity_normalize_key
from memory.infra.queueing import entity_embeddings_enqueue
from memory.infra.transactions import write_transaction
from memory.kernel.errors import Conflict, NotFound
from memory.models import AuditEvent, Entity, EntityIdentifier, Fact, FactStatus, Role
from memory.models import Conflict as ConflictRecord
from memory.models.duplicate import DuplicateCandidate, DuplicateStatus
from memory.models.merge import Merge
from memory.search.indexing import entities_index, facts_index
from memory.services.audit import audit_record
from memory.services.duplicates.finder import duplicates_check
from memory.services.entities.writes import entities_lock
from memory.services.facts.batch import fact_fold_identical
from memory.services.facts.rules import (
    contested_fields,
    superseded_fields,
)
from memory.services.merges.plan import (
    MergePlan,
    merge_load,
    merge_plan,
)

ENTITY_FIELDS = ("name", "type", "normalized_key", "aliases", "alias_keys", "attributes",
                 "merged_into_id", "seeded")  # fmt: skip


def entity_merge_preview(
    *, access: ContextAccess, survivor_id: int, merged_ids: list[int], name: str | None = None
) -> MergePlan:
    """What merging would move, fold and contest; writes nothing."""
    with transaction.atomic():
        survivor, merged = merge_load(access, survivor_id, merged_ids)
        plan = merge_plan(survivor, merged, name, auto_supersede=access.context.auto_supersede)
        transaction.set_rollback(True)  # the locks were only for a consistent read
    return plan


@write_transaction
def entity_merge(
    *, access: ContextAccess, survivor_id: int, merged_ids: list[int], name: str | None = None
) -> Merge:
    access.require_role(Role.CURATOR)
    survivor, merged = merge_load(access, survivor_id, merged_ids)
    plan = merge_plan(survivor, merged, name, auto_supersede=access.context.auto_supersede)
    _check_key_free(survivor, plan.final_name, exclude=[e.pk for e in merged])
    snapshot = _snapshot(survivor, merged)
    now = timezone.now()
    ids = [e.pk for e in merged]

    for fact in Fact.objects.filter(pk__in=plan.folded):
        keeper = Fact.objects.get(pk=plan.keepers[fact.pk])
        snapshot["counts"].append(fact_fold_identical(current=keeper, moved=fact))
    contested = list(Fact.objects.filter(pk__in=plan.contested))
    Fact.objects.filter(pk__in=plan.folded).update(
        status=FactStatus.SUPERSEDED, status_changed_at=now
    )
    Fact.objects.filter(pk__in=plan.self_loops).update(
        status=FactStatus.RETRACTED, status_changed_at=now
    )
    Fact.objects.filter(pk__in=plan.contested).update(**contested_fields(now=now))
    _supersede(plan, now)  # priors leave "current" before the winners move into their slot
    # The facts whose sentence changes: the moved ones, and the survivor's when it is renamed.
    renamed = [survivor.pk] if plan.final_name != survivor.name else []
    restated = list(
        Fact.objects.filter(
            Q(subject_id__in=[*ids, *renamed]) | Q(object_id__in=[*ids, *renamed])
        ).values_list("pk", flat=True)
    )
    Fact.objects.filter(subject_id__in=ids).update(subject=survivor)
    Fact.objects.filter(object_id__in=ids).update(object=survivor)
    snapshot["conflicts_created"] = _record_contests(
        access, survivor, contested, plan.contest_reasons
    )
    ConflictRecord.objects.filter(subject_id__in=ids).update(subject=survivor)
    EntityIdentifier.objects.filter(entity_id__in=ids).update(entity=survivor)
    DuplicateCandidate.objects.filter(
        Q(entity_a_id__in=ids) | Q(entity_b_id__in=ids), status=DuplicateStatus.OPEN
    ).update(status=DuplicateStatus.MERGED)

    # Redirect first: the survivor may take a merged entity's name (and key).
    Entity.objects.filter(pk__in=ids).update(merged_into=survivor, updated_at=now)
    _absorb_into_survivor(survivor, merged, plan)
    record = Merge.objects.create(
        context=access.context,
        survivor=survivor,
        merged_ids=ids,
        final_name=plan.final_name,
        snapshot=snapshot,
        created_by=_user(access),
        summary={
            "facts_moved": plan.facts_moving,
            "folded": len(plan.folded),
            "self_loops": len(plan.self_loops),
            "contested": len(plan.contested),
            "superseded": len(plan.superseded),
            "aliases_added": plan.aliases_added,
            "identifiers": plan.identifiers_moving,
        },
    )
    audit_record(
        context=access.context,
        actor=access.user,
        action="entity_merge",
        target_type="entity",
        target_id=survivor.pk,
        summary=f"merged {', '.join(e.name for e in merged)} into {plan.final_name}",
        before={"entities": snapshot["entities"]},
        after={"merge": record.pk, **record.summary},
        undo={"op": "merge_undo", "merge_id": record.pk},
    )
    # Search finds the survivor by its new names and the moved facts by the survivor's.
    entities_index([survivor.pk, *ids])
    facts_index(restated)
    entity_embeddings_enqueue([survivor.pk])
    duplicates_check([survivor.pk, *ids])  # the survivor's new names; the merged leave
    return record


def _supersede(plan: MergePlan, now: Any) -> None:
    facts = Fact.objects.in_bulk([*plan.superseded, *plan.superseded.values()])
    for prior_id, winner_id in plan.superseded.items():
        prior, winner = facts[prior_id], facts[winner_id]
        fields = superseded_fields(
            prior_valid_until=prior.valid_until, newcomer_valid_from=winner.valid_from, now=now
        )
        Fact.objects.filter(pk=prior_id).update(**fields)
        Fact.objects.filter(pk=winner_id).update(supersedes_id=prior_id)


def _user(access: ContextAccess) -> Any:
    return access.user if getattr(access.user, "is_authenticated", False) else None


def _check_key_free(survivor: Entity, name: str, *, exclude: list[int]) -> None:
    key = entity_normalize_key(name)
    clash = (
        Entity.objects.filter(
            context=survivor.context,
            scope=survivor.scope,
            type=survivor.type,
            normalized_key=key,
            merged_into__isnull=True,
        )
        .exclude(pk__in=[survivor.pk, *exclude])
        .first()
    )
    if clash is not None:
        raise Conflict(
            f"entity {clash.pk} already has the name key {key!r} in this scope; include it in "
            "the merge or choose another name",
            code="entity_key_taken",
        )


def _snapshot(survivor: Entity, merged: list[Entity]) -> dict[str, Any]:
    ids = [e.pk for e in merged]
    group = [survivor.pk, *ids]
    facts = Fact.objects.filter(Q(subject_id__in=group) | Q(object_id__in=group))
    return {
        "entities": [
            {"id": e.pk, **{f: getattr(e, f) for f in ENTITY_FIELDS}} for e in [survivor, *merged]
        ],
        "facts": list(
            facts.values(
                "id",
                "subject_id",
                "object_id",
                "status",
                "status_changed_at",
                "valid_until",
                "supersedes_id",
            )
        ),
        "identifiers": list(
            EntityIdentifier.objects.filter(entity_id__in=ids).values("id", "entity_id")
        ),
        "conflicts": list(
            ConflictRecord.objects.filter(subject_id__in=ids).values("id", "subject_id")
        ),
        "duplicates": list(
            DuplicateCandidate.objects.filter(
                Q(entity_a_id__in=ids) | Q(entity_b_id__in=ids), status=DuplicateStatus.OPEN
            ).values_list("id", flat=True)
        ),
        "counts": [],
    }


def _record_contests(
    access: ContextAccess, survivor: Entity, contested: list[Fact], reasons: dict[int, str]
) -> list[int]:
    created = []
    for fact in contested:
        current = Fact.objects.filter(
            subject=survivor,
            predicate_id=fact.predicate_id,
            scope=fact.scope,
            status=FactStatus.CURRENT,
        ).first()
        if current is None:
            continue
        created.append(
            ConflictRecord.objects.create(
                context=access.context,
                scope=fact.scope,
                subject=survivor,
                predicate_id=fact.predicate_id,
                current_fact=current,
                contested_fact=fact,
                reason=reasons[fact.pk],
            ).pk
        )
    return created


def _absorb_into_survivor(survivor: Entity, merged: list[Entity], plan: MergePlan) -> None:
    if plan.final_name != survivor.name:
        if survivor.name not in survivor.aliases:
            survivor.aliases.append(survivor.name)
        survivor.name = plan.final_name
        survivor.normalized_key = entity_normalize_key(plan.final_name)
    survivor.aliases = [a for a in [*survivor.aliases, *plan.aliases_added] if a != survivor.name]
    survivor.alias_keys = sorted(
        {entity_normalize_key(a) for a in survivor.aliases} - {survivor.normalized_key}
    )
    for entity in merged:
        for attr, value in entity.attributes.items():
            survivor.attributes.setdefault(attr, value)  # the survivor's own values win
    survivor.seeded = survivor.seeded or any(e.seeded for e in merged)
    survivor.save()


@write_transaction
def merge_undo(*, access: ContextAccess, merge_id: int) -> Merge:
    """Restore every entity, fact, identifier and conflict the merge changed, or explain
    (409) which later change prevents an exact undo."""
    access.require_role(Role.CURATOR)
    record = Merge.objects.select_for_update().filter(context=access.context, pk=merge_id).first()
    if record is None:
        raise NotFound(f"merge {merge_id} not found", code="merge_not_found")
    if record.undone_at is not None:
        raise Conflict("this merge was already undone", code="already_undone")
    snap = record.snapshot
    ids = sorted(e["id"] for e in snap["entities"])
    # The subjects of the facts we restore, as the merge took them (see _lock_with_incoming).
    entities_lock({*ids, *(f["subject_id"] for f in snap["facts"])})
    entities = {
        e.pk: e
        for e in Entity.objects.select_for_update(no_key=True).filter(pk__in=ids).order_by("pk")
    }
    _check_undoable(record, entities)
    for state in snap["entities"]:
        Entity.objects.filter(pk=state["id"]).update(
            **{f: state[f] for f in ENTITY_FIELDS}, updated_at=timezone.now()
        )
    ConflictRecord.objects.filter(pk__in=snap["conflicts_created"]).delete()
    _restore_facts(record)
    for count in reversed(snap["counts"]):  # a keeper may have absorbed several facts
        Fact.objects.filter(pk=count["id"]).update(**{k: v for k, v in count.items() if k != "id"})
    for ident in snap["identifiers"]:
        EntityIdentifier.objects.filter(pk=ident["id"]).update(entity_id=ident["entity_id"])
    for conflict in snap["conflicts"]:
        ConflictRecord.objects.filter(pk=conflict["id"]).update(subject_id=conflict["subject_id"])
    DuplicateCandidate.objects.filter(pk__in=snap["duplicates"]).update(status=DuplicateStatus.OPEN)
    record.undone_at, record.undone_by = timezone.now(), _user(access)
    record.save(update_fields=["undone_at", "undone_by"])
    AuditEvent.objects.filter(
        context=access.context, action="entity_merge", undo__merge_id=record.pk
    ).update(undone_at=record.undone_at, undone_by=record.undone_by)
    audit_record(
        context=access.context,
        actor=access.user,
        action="merge_undo",
        target_type="entity",
        target_id=record.survivor_id,
        summary=f"undid merge {record.pk}",
        after={"restored": ids},
    )
    entities_index(ids)
    facts_index(f["id"] for f in snap["facts"])
    entity_embeddings_enqueue(ids)
    duplicates_check(ids)  # the restored entities are checked again
    return record


def _restore_facts(record: Merge) -> None:
    """Put back what the merge changed on each fact and nobody changed since.

    A later write wins: a moved fact superseded after the merge stays superseded (restoring
    it would bring back a replaced value, and two current values in one single-valued
    slot), and a fact re-pointed since keeps its new object. Facts move back to their
    entities first, then statuses are restored, those that were current last, so the
    one-current-value constraint never sees two at once.
    """
    merged = set(record.merged_ids)
    priors = sorted(record.snapshot["facts"], key=lambda f: f["status"] == FactStatus.CURRENT)
    now = {f.pk: f for f in Fact.objects.filter(pk__in=[p["id"] for p in priors])}
    kept_later = 0
    statuses: list[tuple[int, dict[str, Any]]] = []
    for prior in priors:
        fact = now.get(prior["id"])
        if fact is None:
            continue  # deleted since (with an entity it mentioned)
        sides: dict[str, Any] = {}
        for side in ("subject_id", "object_id"):
            if prior[side] in merged and getattr(fact, side) == record.survivor_id:
                sides[side] = prior[side]
        if sides:
            Fact.objects.filter(pk=fact.pk).update(**sides)
        changed_later = (
            fact.status_changed_at is not None and fact.status_changed_at > record.created_at
        )
        if changed_later:
            kept_later += 1
            continue
        changes: dict[str, Any] = {}
        if fact.status != prior["status"]:
            changes["status"] = prior["status"]
            changes["status_changed_at"] = prior["status_changed_at"]
            if "valid_until" in prior:  # snapshots before the one collision rule lack it
                changes["valid_until"] = prior["valid_until"]
        if "supersedes_id" in prior and fact.supersedes_id != prior["supersedes_id"]:
            changes["supersedes_id"] = prior["supersedes_id"]
        if changes:
            statuses.append((fact.pk, changes))
    # Every fact is back on its own entities before any status changes, so a value
    # restored to current never meets, in its slot, the moved value that had replaced it.
    for pk, changes in statuses:
        Fact.objects.filter(pk=pk).update(**changes)
    if kept_later:
        note = record.summary.get("undo_note", "")
        record.summary["undo_note"] = (note + "; " if note else "") + (
            f"{kept_later} moved facts changed status after the merge and keep that status"
        )
        record.save(update_fields=["summary"])


def _check_undoable(record: Merge, entities: dict[int, Entity]) -> None:
    survivor = entities[record.survivor_id]
    if survivor.merged_into_id is not None:
        raise Conflict(
            f"the survivor was itself merged into entity {survivor.merged_into_id} later; "
            "undo that merge first",
            code="undo_blocked",
        )
    for pk in record.merged_ids:
        entity = entities[pk]
        if entity.merged_into_id != survivor.pk:
            raise Conflict(
                f"entity {pk} is no longer merged into {survivor.pk}", code="undo_blocked"
            )
        clash = (
            Entity.objects.filter(
                context=entity.context,
                scope=entity.scope,
                type=entity.type,
                normalized_key=entity.normalized_key,
                merged_into__isnull=True,
            )
            .exclude(pk__in=list(entities))
            .first()
        )
        if clash is not None:
            raise Conflict(
                f"entity {clash.pk} ({clash.name}) now holds the name key of {entity.name}; "
                "merge or rename it before undoing",
                code="undo_blocked",
            )
    later_facts = Fact.objects.filter(
        Q(subject=survivor) | Q(object=survivor), recorded_at__gt=record.created_at
    ).count()
    if later_facts:
        # Facts written after the merge stay with the survivor; say so rather than guess.
        record.summary["undo_note"] = (
            f"{later_facts} facts written after the merge stay with {survivor.name}"
        )
        record.save(update_fields=["summary"])
