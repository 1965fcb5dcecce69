"""Carrying out an entity resolution plan (``entity_resolution.py``) in the caller's
transaction: each mention attaches to the entity planned (locked, a merge since planning
redirecting to its survivor; its spelling added to the entity's aliases where the writer
may) or becomes a new entity — inserted in bulk, a key a concurrent writer created
meanwhile taking the one-by-one upsert. Then the mentions' identifiers are attached, the
review band's pairs recorded as duplicate candidates, and the entities written indexed
and checked for duplicates with the write.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memory.domain.access import ContextAccess
from memory.infra.pg import instances_insert
from memory.infra.queueing import entity_embeddings_enqueue
from memory.models import DuplicateCandidate, Entity, EntityIdentifier, EntityType
from memory.search.indexing import EntityText, entities_index, search_index_batch
from memory.services.duplicates.finder import duplicates_check
from memory.services.entities.writes import entities_lock_live, entity_absorb, entity_upsert
from memory.services.ingest.entity_resolution import MentionPlan, ResolutionPlan
from memory.services.ingest.triples import Ref


@dataclass
class ResolvedMention:
    plan: MentionPlan
    entity: Entity
    created: bool
    matched_by: str  # "created" or the MatchMethod
    candidate: DuplicateCandidate | None = None
    warnings: list[str] = field(default_factory=list)
    # What this write added to an entity that already existed, so that retracting the run
    # can take exactly that back (services/ingest/retract.py).
    aliases_added: list[str] = field(default_factory=list)
    alias_keys_added: list[str] = field(default_factory=list)
    identifiers_added: list[tuple[str, str]] = field(default_factory=list)


def resolution_apply(
    *, access: ContextAccess, scope: str, plan: ResolutionPlan, source: str
) -> dict[Ref, ResolvedMention]:
    """Carry out ``plan`` in the caller's transaction; one entry per mention without error."""
    # Postings are written when the block ends (joining the caller's batch if one is
    # open): the entities created here are then indexed once, without a delete first.
    with search_index_batch():
        return _apply(access=access, scope=scope, plan=plan, source=source)


def _apply(
    *, access: ContextAccess, scope: str, plan: ResolutionPlan, source: str
) -> dict[Ref, ResolvedMention]:
    out: dict[Ref, ResolvedMention] = {}
    attached = _lock_attached(plan)
    changed: list[Entity] = []
    to_create: list[MentionPlan] = []
    for item in plan.plans:
        if item.error is not None:
            continue
        entity = attached.get(item.entity_id) if item.entity_id is not None else None
        if entity is None:
            to_create.append(item)
            continue
        resolved = ResolvedMention(
            plan=item, entity=entity, created=False, matched_by=str(item.method)
        )
        aliases, keys = list(entity.aliases), list(entity.alias_keys)
        if access.grants.can_write(entity.scope) and entity_absorb(
            entity, name=item.mention.name, aliases=item.mention.aliases, attributes={}
        ):
            changed.append(entity)
            resolved.aliases_added = [a for a in entity.aliases if a not in aliases]
            resolved.alias_keys_added = [k for k in entity.alias_keys if k not in keys]
        out[item.mention.ref] = resolved
    if changed:
        for entity in changed:
            entity.save(update_fields=["aliases", "alias_keys", "updated_at"])
    out |= _create(access, scope, to_create, plan.embedding_model)
    _attach_identifiers(access, out)
    _record_candidates(access, out, source)
    stale = [e.pk for e in changed] + [
        r.entity.pk for r in out.values() if r.created and r.entity.embedding is None
    ]
    entity_embeddings_enqueue(stale)
    # Search postings and duplicate candidates commit with the entities (as in entity_upsert).
    created = [r.entity for r in out.values() if r.created]
    written = [e.pk for e in changed] + [e.pk for e in created]
    # The created entities were inserted in this transaction: indexed without a delete,
    # from what was inserted rather than read back.
    entities_index(
        [e.pk for e in changed],
        inserted=[e.pk for e in created],
        texts={e.pk: EntityText(e.context_id, e.scope, e.name, tuple(e.aliases)) for e in created},
    )
    duplicates_check(written)
    return out


def _lock_attached(plan: ResolutionPlan) -> dict[int, Entity]:
    """Lock the entities mentions attach to (ordered: no deadlock between two runs);
    a merge since planning redirects to the survivor."""
    ids = {p.entity_id for p in plan.plans if p.entity_id is not None and p.error is None}
    if not ids:
        return {}
    live = entities_lock_live(ids)
    rows = Entity.objects.in_bulk(set(live.values()))  # read under the held locks
    return {pk: rows[target] for pk, target in live.items()}


def _create(
    access: ContextAccess, scope: str, plans: list[MentionPlan], model_id: str
) -> dict[Ref, ResolvedMention]:
    if not plans:
        return {}
    rows = []
    for item in plans:
        mention = item.mention
        entity = Entity(
            context=access.context,
            scope=scope,
            name=mention.name,
            type=mention.type or EntityType.OTHER,
            normalized_key=mention.key,
            aliases=[],
            alias_keys=[],
            attributes={},
            embedding=item.vector,
            embedding_model=model_id if item.vector is not None else "",
        )
        entity_absorb(entity, name=mention.name, aliases=mention.aliases, attributes={})
        rows.append(entity)
    # A key a concurrent writer created since we looked is skipped by the insert (no
    # savepoint to roll back to): its mention takes the slow, one-by-one path, whose
    # upsert matches the winner's row.
    inserted = {id(entity) for entity in instances_insert(rows, skip_conflicts=True)}
    return {
        item.mention.ref: (
            ResolvedMention(plan=item, entity=entity, created=True, matched_by="created")
            if id(entity) in inserted
            else _upsert_one(access, scope, item)
        )
        for item, entity in zip(plans, rows, strict=True)
    }


def _upsert_one(access: ContextAccess, scope: str, item: MentionPlan) -> ResolvedMention:
    result = entity_upsert(
        access=access,
        name=item.mention.name,
        scope=scope,
        type=item.mention.type or EntityType.OTHER,
        aliases=item.mention.aliases,
        allow_reserved_types=False,
    )
    return ResolvedMention(
        plan=item, entity=result.entity, created=result.created, matched_by=result.matched_by
    )


def _attach_identifiers(access: ContextAccess, resolved: dict[Ref, ResolvedMention]) -> None:
    wanted = [
        (r, kind, value) for r in resolved.values() for kind, value in r.plan.mention.identifiers
    ]
    if not wanted:
        return
    owners = {
        (scope, kind, value): entity_id
        for scope, kind, value, entity_id in EntityIdentifier.objects.filter(
            context=access.context,
            scope__in={r.entity.scope for r, _, _ in wanted},
            value__in={value for _, _, value in wanted},
        ).values_list("scope", "kind", "value", "entity_id")
    }
    new: list[EntityIdentifier] = []
    for r, kind, value in wanted:
        owner = owners.get((r.entity.scope, kind, value))
        if owner is None:
            owners[(r.entity.scope, kind, value)] = r.entity.pk
            r.identifiers_added.append((kind, value))
            new.append(
                EntityIdentifier(
                    entity=r.entity,
                    context=access.context,
                    scope=r.entity.scope,
                    kind=kind,
                    value=value,
                )
            )
        elif owner != r.entity.pk:
            r.warnings.append(
                f"identifier {kind}:{value} already belongs to entity {owner}; not moved "
                "(merge the entities to combine them)"
            )
    EntityIdentifier.objects.bulk_create(new, ignore_conflicts=True)


def _record_candidates(
    access: ContextAccess, resolved: dict[Ref, ResolvedMention], source: str
) -> None:
    rows = []
    for r in resolved.values():
        item = r.plan
        if not r.created or item.candidate_id is None or item.candidate_id == r.entity.pk:
            continue
        low, high = sorted((r.entity.pk, item.candidate_id))
        methods = ["embedding", "llm_judge"] if item.judge_reason else ["embedding"]
        r.candidate = DuplicateCandidate(
            context=access.context,
            entity_a_id=low,
            entity_b_id=high,
            score=round(float(item.candidate_score or 0.0), 4),
            methods=methods,
            source=source[:300],
        )
        rows.append(r.candidate)
    # A pair already known (perhaps dismissed by a curator) keeps its row and status.
    DuplicateCandidate.objects.bulk_create(rows, ignore_conflicts=True)
