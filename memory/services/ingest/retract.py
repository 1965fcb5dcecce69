"""Retracting a run: take back what one ingest run wrote, in one transaction, audited
and undone exactly from the audit log (docs/decisions/0043).

Every fact the run wrote becomes ``retracted``; a value it superseded is current again;
the spellings and identifiers it added to entities that already existed are removed; an
entity it created that nothing else references is deleted, with the run's facts about
it. What later writes built on the run stays: an entity it created that another write
now uses is kept whole, a value of the run that a later write replaced leaves that
later value current, and the preview says each of these in words. Re-observations (the
run saw a fact that was already known) stay: the fact was known before the run.

The retraction's audit event keeps the prior state of every row it changed or deleted,
and ``run_retract_revert`` (the undo) puts it back, or answers 409 naming the later
change that prevents it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from memory.domain.access import ContextAccess
from memory.infra.queueing import entity_embeddings_enqueue
from memory.infra.transactions import write_transaction
from memory.kernel.errors import Conflict, PermissionDenied
from memory.models import AuditEvent, Entity, EntityIdentifier, Fact, FactStatus, FactTrust, Run
from memory.models import Conflict as ConflictRecord
from memory.models.fact import ConflictStatus
from memory.models.merge import Merge
from memory.models.run import FINISHED_WRITING, RunOutcome
from memory.search.indexing import entities_index, facts_index
from memory.services.audit import audit_record
from memory.services.duplicates.finder import duplicates_check
from memory.services.entities.writes import entities_lock

SHOWN_FACTS = 200  # the preview lists this many facts by name; counts cover them all
_FACT_STATE = ("id", "status", "status_changed_at", "valid_until")
_CONFLICT_STATE = ("id", "status", "resolution", "resolved_at", "resolved_by_id", "current_fact_id")
_ENTITY_ROW = ("id", "context_id", "scope", "name", "type", "normalized_key", "aliases",
               "alias_keys", "attributes", "seeded", "created_at", "updated_at")  # fmt: skip
RETRACTED_RESOLUTION = "run_retracted"


@dataclass
class RetractPlan:
    """What retracting ``run`` changes; the preview shows it and the retraction does it."""

    run: Run
    facts_retracted: list[int] = field(default_factory=list)
    facts_deleted: list[int] = field(default_factory=list)  # on entities deleted with them
    priors_restored: list[int] = field(default_factory=list)  # superseded by the run
    conflicts_closed: list[int] = field(default_factory=list)  # over a value of the run
    # Conflicts where a later value contested the run's: they now contest the restored
    # prior (conflict → prior), or, with no prior, the later value becomes current.
    conflicts_repointed: dict[int, int] = field(default_factory=dict)
    contested_promoted: list[int] = field(default_factory=list)
    entities_deleted: list[Entity] = field(default_factory=list)
    entities_kept: list[dict[str, Any]] = field(default_factory=list)
    aliases_removed: list[dict[str, Any]] = field(default_factory=list)
    identifiers_removed: list[int] = field(default_factory=list)
    reobserved_kept: int = 0
    dependencies: list[str] = field(default_factory=list)
    facts_shown: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "run": self.run.pk,
            "facts_retracted": len(self.facts_retracted),
            "facts_deleted": len(self.facts_deleted),
            "facts": self.facts_shown,
            "superseded_restored": self.priors_restored,
            "conflicts_closed": self.conflicts_closed,
            "entities_deleted": [
                {"id": e.pk, "name": e.name, "type": e.type} for e in self.entities_deleted
            ],
            "entities_kept": self.entities_kept,
            "aliases_removed": self.aliases_removed,
            "identifiers_removed": len(self.identifiers_removed),
            "facts_reobserved_kept": self.reobserved_kept,
            "dependencies": self.dependencies,
        }

    @property
    def empty(self) -> bool:
        return not (
            self.facts_retracted
            or self.facts_deleted
            or self.entities_deleted
            or self.aliases_removed
            or self.identifiers_removed
        )


def _check_retractable(access: ContextAccess, run: Run) -> None:
    access.require_write(run.scope)
    _check_untrusted(access, run)
    if run.retracted_at is not None:
        raise Conflict(
            f"run {run.pk} was already retracted; undo the retraction from the audit log "
            "to bring its writes back",
            code="already_retracted",
        )
    if run.outcome in (RunOutcome.PENDING, RunOutcome.RUNNING):
        raise Conflict(
            f"run {run.pk} is still {run.outcome}; retract it once it has finished",
            code="run_not_finished",
        )
    if run.outcome not in FINISHED_WRITING or run.mode == "preview":
        raise Conflict(
            f"run {run.pk} wrote nothing to retract ({run.outcome}, mode {run.mode})",
            code="nothing_to_retract",
        )


def _check_untrusted(access: ContextAccess, run: Run) -> None:
    """An untrusted token retracts (or previews retracting) only a run of its own writer
    none of whose facts agents are told yet: taking back anything else is a curator's."""
    if access.trusted:
        return
    own = access.user is not None and run.created_by_id == access.user.pk
    if not own or Fact.objects.filter(run=run, trust=FactTrust.TRUSTED).exists():
        raise PermissionDenied(
            f"run {run.pk} is not this token's writer's, or wrote facts agents are told; an "
            "untrusted token retracts only its own unconfirmed runs (use a trusted token or "
            "the dashboard)",
            code="untrusted_retract",
        )


def _check_not_empty(plan: RetractPlan) -> None:
    """A run that kept only its turn (``infer: none``), or whose facts were all retracted
    one by one since, has nothing left to take back: say so rather than audit nothing."""
    if plan.empty and not plan.priors_restored and not plan.conflicts_closed:
        raise Conflict(
            f"run {plan.run.pk} has nothing left to retract (no facts, entities, spellings "
            "or identifiers of it remain)",
            code="nothing_to_retract",
        )


def _lock_run(run: Run) -> Run:
    return Run.objects.select_for_update().select_related("context").get(pk=run.pk)


def _lock_entities(run: Run) -> None:
    """Lock every entity the run's facts and entity changes touch, in id order (the order
    fact writers and merges take them: no deadlock), so no write lands between our read
    and our changes."""
    result = run.result or {}
    ids = {e["id"] for e in result.get("entities_created", []) if e.get("id")}
    ids |= {c["entity"] for c in result.get("entity_changes", [])}
    for subject, object_ in Fact.objects.filter(run=run).values_list("subject_id", "object_id"):
        ids.add(subject)
        if object_ is not None:
            ids.add(object_)
    entities_lock(ids, for_delete=True)  # a retraction may delete the entities it created


def _plan(run: Run) -> RetractPlan:
    plan = RetractPlan(run=run)
    result = run.result or {}
    facts = list(
        Fact.objects.filter(run=run).select_related("subject", "object", "predicate").order_by("pk")
    )
    own = {f.pk for f in facts}
    plan.reobserved_kept = len(result.get("facts_reobserved", []))
    _plan_entities(plan, result, own)
    deleted = {e.pk for e in plan.entities_deleted}
    for fact in facts:
        if fact.subject_id in deleted or fact.object_id in deleted:
            plan.facts_deleted.append(fact.pk)
        elif fact.status != FactStatus.RETRACTED:
            plan.facts_retracted.append(fact.pk)
        else:
            continue
        if len(plan.facts_shown) < SHOWN_FACTS:
            plan.facts_shown.append(_fact_words(fact))
        _plan_fact(plan, fact, own)
    _plan_entity_changes(plan, result, deleted)
    return plan


def _fact_words(fact: Fact) -> dict[str, Any]:
    target = fact.object.name if fact.object is not None else fact.value_text
    return {
        "id": fact.pk,
        "subject": fact.subject.name,
        "predicate": fact.predicate.name,
        "object": target,
        "status": fact.status,
    }


def _plan_entities(plan: RetractPlan, result: dict[str, Any], own: set[int]) -> None:
    created = [e["id"] for e in result.get("entities_created", []) if e.get("id")]
    changes = {c["entity"]: c for c in result.get("entity_changes", [])}
    for entity in Entity.objects.filter(pk__in=created).order_by("pk"):
        reason = _still_used(entity, own, changes.get(entity.pk))
        if reason is None:
            plan.entities_deleted.append(entity)
        else:
            plan.entities_kept.append({"id": entity.pk, "name": entity.name, "reason": reason})
            plan.dependencies.append(f"{entity.name} (entity {entity.pk}) stays: {reason}")


def _still_used(entity: Entity, own: set[int], change: dict[str, Any] | None) -> str | None:
    """Why an entity the run created must stay, or None when only the run uses it."""
    if entity.merged_into_id is not None:
        return f"it was merged into entity {entity.merged_into_id} since"
    if entity.merged_from.exists() or Merge.objects.filter(survivor=entity).exists():
        return "it took part in a merge since"
    later = Fact.objects.filter(Q(subject=entity) | Q(object=entity)).exclude(pk__in=own).count()
    if later:
        return f"{later} fact{'s' if later != 1 else ''} written by later writes use it"
    own_identifiers = {tuple(i) for i in (change or {}).get("identifiers", [])}
    others = [
        (kind, value)
        for kind, value in entity.identifiers.values_list("kind", "value")
        if (kind, value) not in own_identifiers
    ]
    if others:
        return "a later write gave it identifiers"
    return None


def _plan_fact(plan: RetractPlan, fact: Fact, own: set[int]) -> None:
    prior = None
    if fact.status == FactStatus.CURRENT and fact.supersedes_id is not None:
        prior = Fact.objects.filter(pk=fact.supersedes_id).first()
        if prior is None or prior.status != FactStatus.SUPERSEDED or prior.pk in own:
            prior = None
        else:
            plan.priors_restored.append(prior.pk)
    if fact.status == FactStatus.SUPERSEDED and fact.supersedes_id:
        plan.dependencies.append(
            f"the run's {fact.predicate.name} of {fact.subject.name} was replaced by a later "
            "write, which stays current"
        )
    open_conflicts = ConflictRecord.objects.filter(
        Q(current_fact=fact) | Q(contested_fact=fact), status=ConflictStatus.OPEN
    )
    for conflict in open_conflicts:
        later = conflict.contested_fact_id
        if later == fact.pk or later in own or fact.status != FactStatus.CURRENT:
            plan.conflicts_closed.append(conflict.pk)
            continue
        # A later write contested the run's value: its conflict now stands against the
        # value that comes back, or, with none before the run's, the later value is current.
        words = f"a later value (fact {later}) contested the run's {fact.predicate.name} of "
        if prior is not None:
            plan.conflicts_repointed[conflict.pk] = prior.pk
            plan.dependencies.append(
                words + f"{fact.subject.name}; it now contests the earlier value"
            )
        else:
            plan.conflicts_closed.append(conflict.pk)
            plan.contested_promoted.append(later)
            plan.dependencies.append(words + f"{fact.subject.name}; it becomes the current value")


def _plan_entity_changes(plan: RetractPlan, result: dict[str, Any], deleted: set[int]) -> None:
    kept_created = {e["id"] for e in plan.entities_kept}
    for change in result.get("entity_changes", []):
        entity = Entity.objects.filter(pk=change["entity"], merged_into__isnull=True).first()
        if entity is None or entity.pk in deleted or entity.pk in kept_created:
            continue  # gone with the run, merged away since, or kept whole for later writes
        aliases = [a for a in change.get("aliases", []) if a in entity.aliases]
        keys = [k for k in change.get("alias_keys", []) if k in entity.alias_keys]
        if aliases or keys:
            plan.aliases_removed.append(
                {"entity": entity.pk, "name": entity.name, "aliases": aliases, "keys": keys}
            )
        for kind, value in change.get("identifiers", []):
            found = EntityIdentifier.objects.filter(entity=entity, kind=kind, value=value).first()
            if found is not None:
                plan.identifiers_removed.append(found.pk)


def run_retract_preview(*, access: ContextAccess, run: Run) -> RetractPlan:
    """What retracting ``run`` would change; writes nothing."""
    _check_retractable(access, run)
    with transaction.atomic():
        run = _lock_run(run)
        _check_retractable(access, run)
        _lock_entities(run)
        plan = _plan(run)
        transaction.set_rollback(True)  # the locks were only for a consistent read
    _check_not_empty(plan)
    return plan


@write_transaction
def run_retract(*, access: ContextAccess, run: Run) -> tuple[RetractPlan, AuditEvent]:
    """Retract ``run`` (see the module doc); return what changed and its audit event."""
    _check_retractable(access, run)
    run = _lock_run(run)
    _check_retractable(access, run)
    _lock_entities(run)
    plan = _plan(run)
    _check_not_empty(plan)
    now = timezone.now()
    undo = _snapshot(plan)
    _apply(plan, now)
    run.retracted_at = now
    run.retracted_by = _user(access)
    run.save(update_fields=["retracted_at", "retracted_by"])
    event = audit_record(
        context=access.context,
        actor=access.user,
        action="run_retract",
        target_type="run",
        target_id=run.pk,
        summary=_summary(plan),
        after=plan.as_dict(),
        undo={"op": "run_retract_revert", **undo},
    )
    return plan, event


def _summary(plan: RetractPlan) -> str:
    facts = len(plan.facts_retracted) + len(plan.facts_deleted)
    parts = [f"retracted run {plan.run.pk}: {_counted(facts, 'fact', 'facts')}"]
    if plan.priors_restored:
        n = len(plan.priors_restored)
        parts.append(f"{_counted(n, 'earlier value', 'earlier values')} current again")
    if plan.entities_deleted:
        parts.append(f"{_counted(len(plan.entities_deleted), 'entity', 'entities')} removed")
    if plan.entities_kept:
        parts.append(
            f"{_counted(len(plan.entities_kept), 'entity', 'entities')} kept for later writes"
        )
    return ", ".join(parts)


def _counted(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _user(access: ContextAccess) -> Any:
    return access.user if getattr(access.user, "is_authenticated", False) else None


def _exact(rows: Any) -> list[dict[str, Any]]:
    """Rows with their times as full ISO text: the audit log's JSON encoder keeps only
    milliseconds, and the undo must put back exactly what was there."""
    return [
        {k: v.isoformat() if isinstance(v, datetime) else v for k, v in row.items()} for row in rows
    ]


def _snapshot(plan: RetractPlan) -> dict[str, Any]:
    deleted_ids = [e.pk for e in plan.entities_deleted]
    state_ids = [*plan.facts_retracted, *plan.priors_restored, *plan.contested_promoted]
    conflicts = [*plan.conflicts_closed, *plan.conflicts_repointed]
    doomed_conflicts = ConflictRecord.objects.filter(
        Q(subject_id__in=deleted_ids)
        | Q(current_fact_id__in=plan.facts_deleted)
        | Q(contested_fact_id__in=plan.facts_deleted)
    )
    return {
        "run_id": plan.run.pk,
        "entities": _exact(Entity.objects.filter(pk__in=deleted_ids).values(*_ENTITY_ROW)),
        "identifiers": list(
            EntityIdentifier.objects.filter(
                Q(entity_id__in=deleted_ids) | Q(pk__in=plan.identifiers_removed)
            ).values("id", "entity_id", "context_id", "scope", "kind", "value")
        ),
        "facts_deleted": _exact(Fact.objects.filter(pk__in=plan.facts_deleted).values()),
        "conflicts_deleted": _exact(doomed_conflicts.values()),
        "facts": _exact(Fact.objects.filter(pk__in=state_ids).values(*_FACT_STATE)),
        "conflicts": _exact(
            ConflictRecord.objects.filter(pk__in=conflicts)
            .exclude(pk__in=doomed_conflicts.values("pk"))
            .values(*_CONFLICT_STATE)
        ),
        "aliases": [
            {
                "id": e.pk,
                "aliases": list(e.aliases),
                "alias_keys": list(e.alias_keys),
            }
            for e in Entity.objects.filter(pk__in=[a["entity"] for a in plan.aliases_removed])
        ],
    }


def _apply(plan: RetractPlan, now: Any) -> None:
    retracted = {"status": FactStatus.RETRACTED, "status_changed_at": now}
    # The run's values leave "current" before the priors come back into their slots.
    Fact.objects.filter(pk__in=plan.facts_retracted).update(**retracted)
    ConflictRecord.objects.filter(pk__in=plan.conflicts_closed).update(
        status=ConflictStatus.RESOLVED, resolution=RETRACTED_RESOLUTION, resolved_at=now
    )
    for conflict_id, prior_id in plan.conflicts_repointed.items():
        ConflictRecord.objects.filter(pk=conflict_id).update(current_fact_id=prior_id)
    for prior in Fact.objects.filter(pk__in=plan.priors_restored):
        # Supersession ended the prior's validity where the run's value began; an end it
        # had before cannot be told from that one, so an open validity comes back.
        Fact.objects.filter(pk=prior.pk).update(
            status=FactStatus.CURRENT, status_changed_at=now, valid_until=None
        )
    Fact.objects.filter(pk__in=plan.contested_promoted).update(
        status=FactStatus.CURRENT, status_changed_at=now
    )
    Fact.objects.filter(pk__in=plan.facts_deleted).delete()
    Entity.objects.filter(pk__in=[e.pk for e in plan.entities_deleted]).delete()
    EntityIdentifier.objects.filter(pk__in=plan.identifiers_removed).delete()
    changed = []
    for removal in plan.aliases_removed:
        entity = Entity.objects.get(pk=removal["entity"])
        entity.aliases = [a for a in entity.aliases if a not in removal["aliases"]]
        entity.alias_keys = [k for k in entity.alias_keys if k not in removal["keys"]]
        entity.save(update_fields=["aliases", "alias_keys", "updated_at"])
        changed.append(entity.pk)
    facts_index([*plan.facts_retracted, *plan.priors_restored, *plan.contested_promoted])
    if changed:
        entities_index(changed)
        entity_embeddings_enqueue(changed)
        duplicates_check(changed)


# --- undo -----------------------------------------------------------------------------


@transaction.atomic
def run_retract_revert(*, access: ContextAccess, undo: dict[str, Any]) -> None:
    """Put back every row the retraction changed or deleted (the audit undo of
    ``run_retract``), or raise Conflict (409) naming the later change in the way."""
    run = Run.objects.select_for_update().filter(context=access.context, pk=undo["run_id"]).first()
    if run is None or run.retracted_at is None:
        raise Conflict("this run is not retracted any more", code="undo_blocked")
    access.require_write(run.scope)
    try:
        with transaction.atomic():
            _restore_rows(undo)
            _restore_states(undo)
    except IntegrityError as exc:
        raise Conflict(
            "a later write took the place of what this retraction took back (a name key, "
            "an identifier or a current single value); change that first "
            f"({' '.join(str(exc).split())[:200]})",
            code="undo_blocked",
        ) from None
    run.retracted_at = None
    run.retracted_by = None
    run.save(update_fields=["retracted_at", "retracted_by"])
    entity_ids = [e["id"] for e in undo["entities"]] + [a["id"] for a in undo["aliases"]]
    facts_index([f["id"] for f in undo["facts_deleted"]] + [f["id"] for f in undo["facts"]])
    if entity_ids:
        entities_index(entity_ids)
        entity_embeddings_enqueue(entity_ids)
        duplicates_check(entity_ids)
    audit_record(
        context=access.context,
        actor=access.user,
        action="run_retract_undo",
        target_type="run",
        target_id=run.pk,
        summary=f"brought back what run {run.pk} wrote",
    )


def _restore_rows(undo: dict[str, Any]) -> None:
    """Deleted rows come back with their ids (agents may hold them)."""
    for row in undo["entities"]:
        Entity.objects.create(**{k: v for k, v in row.items() if k not in ("id",)}, id=row["id"])
        # created_at / updated_at are set on insert: put the recorded ones back.
        Entity.objects.filter(pk=row["id"]).update(
            created_at=row["created_at"], updated_at=row["updated_at"]
        )
    for row in undo["identifiers"]:
        EntityIdentifier.objects.create(**row)
    for row in undo["facts_deleted"]:
        Fact.objects.create(**row)
        Fact.objects.filter(pk=row["id"]).update(
            recorded_at=row["recorded_at"], last_seen_at=row["last_seen_at"]
        )
    for row in undo["conflicts_deleted"]:
        ConflictRecord.objects.create(**row)
        ConflictRecord.objects.filter(pk=row["id"]).update(created_at=row["created_at"])
    for state in undo["aliases"]:
        entity = Entity.objects.filter(pk=state["id"]).first()
        if entity is None:
            raise Conflict(
                f"entity {state['id']} was deleted since the retraction", code="undo_blocked"
            )
        Entity.objects.filter(pk=state["id"]).update(
            aliases=state["aliases"], alias_keys=state["alias_keys"], updated_at=timezone.now()
        )


def _restore_states(undo: dict[str, Any]) -> None:
    """Statuses back, those leaving "current" first, so that the one-current-value
    constraint never sees two at once (a later value in the slot makes it refuse)."""
    for conflict in undo["conflicts"]:
        ConflictRecord.objects.filter(pk=conflict["id"]).update(
            **{k: v for k, v in conflict.items() if k != "id"}
        )
    states = sorted(undo["facts"], key=lambda f: f["status"] == FactStatus.CURRENT)
    for state in states:
        Fact.objects.filter(pk=state["id"]).update(**{k: v for k, v in state.items() if k != "id"})
