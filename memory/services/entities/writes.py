"""Entity writes: upsert by identifier or normalized key, edits and deletion."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from django.db import IntegrityError, transaction
from django.db.models import Q

from memory.domain.access import ContextAccess
from memory.domain.entity_names import (
    entity_clean_name,
    entity_normalize_key,
    entity_type_coerced,
    entity_type_coerced_warning,
    entity_type_normalize,
    identifier_normalize,
)
from memory.infra.locks import rows_lock_ordered
from memory.infra.queueing import entity_embeddings_enqueue
from memory.infra.transactions import write_transaction
from memory.kernel.errors import Conflict, NotFound, ValidationFailed
from memory.kernel.scopes import scope_validate
from memory.kernel.wording import counted
from memory.models import Entity, EntityIdentifier, Fact, Role
from memory.search.indexing import entities_index
from memory.services.audit import audit_record
from memory.services.duplicates.finder import duplicates_check

MatchedBy = Literal["created", "identifier", "key", "alias"]
MAX_ALIASES = 100


@dataclass(frozen=True)
class IdentifierInput:
    kind: str
    value: str


@dataclass
class EntityUpsertResult:
    entity: Entity
    created: bool
    matched_by: MatchedBy
    warnings: list[str] = field(default_factory=list)


def entities_lock_live(
    ids: Iterable[int], *, names: dict[int, str] | None = None
) -> dict[int, int]:
    """Lock the entities (one ``SELECT … FOR NO KEY UPDATE`` in id order, the order every
    writer and merge uses) and map each id to its live entity's id (merged → survivor),
    locked too; ids that no longer exist are left out. ``NO KEY``: writers of one entity
    queue behind each other, but a row that only *points* at it (a duplicate candidate, a
    fact's object) does not wait — its foreign-key check takes ``FOR KEY SHARE``, which a
    plain ``FOR UPDATE`` blocks, and two runs each holding what the other's candidates
    point at deadlocked (docs/decisions/0058). Only deletes take ``FOR UPDATE``. Only
    ids, redirects and names are read, not whole rows with their vectors: callers that
    need rows load them under the held locks. ``names``, when given, receives each live
    entity's name as locked (what a fact written now is indexed with).

    Whoever resolved an entity before a merge committed holds a stale instance; the merge
    holds these row locks until it commits, so the redirect is read *under the lock*, never
    from the caller's copy. A survivor is locked after its redirect (out of id order, but
    a merged row is never locked again by a merge, so that cannot deadlock with one).
    """
    # One plain statement with the ids as an array: it runs on every write.
    rows = _lock_rows(sorted(set(ids)))
    redirects: dict[int, int | None] = {pk: target for pk, target, _ in rows}
    named = {pk: name for pk, _, name in rows}
    live: dict[int, int] = {}
    for pk in sorted(redirects):
        current, seen = pk, {pk}
        while (target := redirects[current]) is not None and target not in seen:
            if target not in redirects:
                for row in _lock_rows([target]):
                    redirects[row[0]], named[row[0]] = row[1], row[2]
            seen.add(target)
            current = target
        live[pk] = current
    if names is not None:
        names.update({pk: named[pk] for pk in live.values() if pk in named})
    return live


def _lock_rows(ids: list[int]) -> list[tuple[int, int | None, str]]:
    rows = rows_lock_ordered(Entity._meta.db_table, ids, columns="id, merged_into_id, name")
    return [(int(pk), target, name) for pk, target, name in rows]


def entities_lock(ids: Iterable[int], *, for_delete: bool = False) -> list[int]:
    """Lock these entity rows as they are, redirects not followed (a merge and its undo
    lock merged rows themselves), in ascending id order like every writer
    (docs/decisions/0119); returns the ids that exist. ``for_delete``: ``FOR UPDATE``, for
    the paths that delete entity rows; every other writer takes ``FOR NO KEY UPDATE``."""
    rows = rows_lock_ordered(
        Entity._meta.db_table, ids, strength="UPDATE" if for_delete else "NO KEY UPDATE"
    )
    return [int(pk) for (pk,) in rows]


def _clean_identifiers(
    identifiers: list[IdentifierInput] | list[dict[str, str]],
) -> list[tuple[str, str]]:
    cleaned: list[tuple[str, str]] = []
    for item in identifiers:
        kind, value = (
            (item.kind, item.value)
            if isinstance(item, IdentifierInput)
            else (str(item.get("kind", "")), str(item.get("value", "")))
        )
        cleaned.append(identifier_normalize(kind, value))
    return list(dict.fromkeys(cleaned))


def _clean_aliases(aliases: list[str]) -> list[str]:
    if len(aliases) > MAX_ALIASES:
        raise ValidationFailed(f"at most {MAX_ALIASES} aliases", code="too_many_aliases")
    return list(dict.fromkeys(entity_clean_name(a) for a in aliases))


def _find_existing(
    *, access: ContextAccess, scope: str, type_: str, key: str, identifiers: list[tuple[str, str]]
) -> tuple[Entity | None, MatchedBy]:
    context = access.context
    if identifiers:
        match = Q()
        for kind, value in identifiers:
            match |= Q(kind=kind, value=value)
        found = (
            EntityIdentifier.objects.filter(match, context=context, scope=scope)
            .select_related("entity")
            .first()
        )
        if found is not None:
            # A merged entity is followed to its survivor under the lock, below.
            return found.entity, "identifier"
    live = Entity.objects.filter(context=context, scope=scope, type=type_, merged_into__isnull=True)
    by_key = live.filter(normalized_key=key).first()
    if by_key is not None:
        return by_key, "key"
    by_alias = live.filter(alias_keys__contains=[key]).order_by("pk").first()
    if by_alias is not None:
        return by_alias, "alias"
    return None, "created"


def entity_find(
    *, access: ContextAccess, name: str, scope: str | None, type: str | None = None
) -> Entity | None:
    """The live entity an upsert of this name would match (by key, then alias), read
    without a lock; None when it would create one, or when the name or scope is not
    valid (the upsert itself says why). A writer that will upsert several entities
    locks the ones found here together, in id order, first."""
    try:
        clean_name = entity_clean_name(name)
        found, _ = _find_existing(
            access=access,
            scope=scope_validate(scope or ""),
            type_=entity_type_normalize(type),
            key=entity_normalize_key(clean_name),
            identifiers=[],
        )
    except ValidationFailed:  # a ScopeError too
        return None
    return found


def entity_absorb(
    entity: Entity, *, name: str, aliases: list[str], attributes: dict[str, Any]
) -> bool:
    """Add what a matching write brings (new spellings as aliases, attributes)."""
    changed = False
    for alias in [name, *aliases]:
        key = entity_normalize_key(alias)
        if (
            alias != entity.name
            and alias not in entity.aliases
            and len(entity.aliases) < MAX_ALIASES
        ):
            entity.aliases.append(alias)
            changed = True
        if key != entity.normalized_key and key not in entity.alias_keys:
            entity.alias_keys.append(key)
            changed = True
    for attr, value in attributes.items():
        if entity.attributes.get(attr) != value:
            entity.attributes[attr] = value
            changed = True
    return changed


def _attach_identifiers(
    *, entity: Entity, identifiers: list[tuple[str, str]], warnings: list[str]
) -> None:
    for kind, value in identifiers:
        owner = EntityIdentifier.objects.filter(
            context=entity.context, scope=entity.scope, kind=kind, value=value
        ).first()
        if owner is None:
            try:
                with transaction.atomic():
                    EntityIdentifier.objects.create(
                        entity=entity,
                        context=entity.context,
                        scope=entity.scope,
                        kind=kind,
                        value=value,
                    )
            except IntegrityError:
                owner = EntityIdentifier.objects.get(
                    context=entity.context, scope=entity.scope, kind=kind, value=value
                )
        if owner is not None and owner.entity_id != entity.pk:
            warnings.append(
                f"identifier {kind}:{value} already belongs to entity {owner.entity_id}; "
                "not moved (merge the entities to combine them)"
            )


@write_transaction
def entity_upsert(
    *,
    access: ContextAccess,
    name: str,
    scope: str,
    type: str | None = None,
    aliases: list[str] | None = None,
    identifiers: list[IdentifierInput] | list[dict[str, str]] | None = None,
    attributes: dict[str, Any] | None = None,
    seeded: bool = False,
    allow_reserved_types: bool = True,
) -> EntityUpsertResult:
    """Create an entity or match an existing one: identifier → normalized key → alias.

    A match gains the new spelling as an alias, the new identifiers and attributes.
    Concurrent upserts of the same key end with one entity (the unique constraint on
    live keys decides; the loser re-reads the winner).
    """
    scope = scope_validate(scope)
    access.require_write(scope)
    clean_name = entity_clean_name(name)
    type_ = entity_type_normalize(type, allow_reserved=allow_reserved_types)
    key = entity_normalize_key(clean_name)
    clean_aliases = _clean_aliases(aliases or [])
    clean_ids = _clean_identifiers(identifiers or [])
    attrs = dict(attributes or {})
    warnings: list[str] = []
    if entity_type_coerced(type, type_):
        warnings.append(entity_type_coerced_warning(clean_name, type or ""))

    existing, matched_by = _find_existing(
        access=access, scope=scope, type_=type_, key=key, identifiers=clean_ids
    )
    created = changed = False
    if existing is None:
        entity = Entity(
            context=access.context,
            scope=scope,
            name=clean_name,
            type=type_,
            normalized_key=key,
            aliases=[],
            alias_keys=[],
            attributes={},
            seeded=seeded,
        )
        entity_absorb(entity, name=clean_name, aliases=clean_aliases, attributes=attrs)
        try:
            with transaction.atomic():
                entity.save()
            created = True
        except IntegrityError:
            # Another writer created the same key between our read and our insert.
            existing = Entity.objects.get(
                context=access.context,
                scope=scope,
                type=type_,
                normalized_key=key,
                merged_into__isnull=True,
            )
            matched_by = "key"
    if existing is not None:
        # Under the lock: a merge that committed since the lookup redirects to its survivor.
        live = entities_lock_live([existing.pk])
        if existing.pk not in live:
            raise NotFound("the entity was deleted while this write ran", code="entity_not_found")
        entity = Entity.objects.get(pk=live[existing.pk])
        changed = entity_absorb(entity, name=clean_name, aliases=clean_aliases, attributes=attrs)
        if seeded and not entity.seeded:
            entity.seeded = changed = True
        if changed:
            entity.save()
    _attach_identifiers(entity=entity, identifiers=clean_ids, warnings=warnings)
    if created or changed:
        entity_embeddings_enqueue([entity.pk])
        entities_index([entity.pk])  # search postings commit with the entity
    if created or changed or clean_ids:
        duplicates_check([entity.pk])  # candidates commit with the entity
    if seeded:
        audit_record(
            context=access.context,
            actor=access.user,
            action="entity_seed",
            target_type="entity",
            target_id=entity.pk,
            summary=f"{'seeded' if created else 'marked canonical'} {entity.name} ({entity.type})",
            after={"id": entity.pk, "created": created},
        )
    return EntityUpsertResult(
        entity=entity,
        created=created,
        matched_by="created" if created else matched_by,
        warnings=warnings,
    )


def _snapshot(entity: Entity) -> dict[str, Any]:
    return {
        "name": entity.name,
        "type": entity.type,
        "aliases": list(entity.aliases),
        "attributes": dict(entity.attributes),
        "identifiers": [{"kind": i.kind, "value": i.value} for i in entity.identifiers.all()],
    }


@write_transaction
def entity_update(
    *,
    access: ContextAccess,
    entity: Entity,
    name: str | None = None,
    type: str | None = None,
    aliases: list[str] | None = None,
    attributes: dict[str, Any] | None = None,
    identifiers_add: list[IdentifierInput] | list[dict[str, str]] | None = None,
) -> Entity:
    """A curator's edit. Renaming re-keys the entity; a key clash is refused (merge instead)."""
    access.require_role(Role.CURATOR)
    access.require_write(entity.scope)
    entities_lock([entity.pk])
    entity = Entity.objects.get(pk=entity.pk)
    if entity.merged_into_id is not None:
        raise Conflict("this entity was merged; edit the surviving entity", code="entity_merged")
    before = _snapshot(entity)
    if name is not None:
        entity.name = entity_clean_name(name)
        entity.normalized_key = entity_normalize_key(entity.name)
    if type is not None:
        entity.type = entity_type_normalize(type)
    if aliases is not None:
        entity.aliases = _clean_aliases(aliases)
        entity.alias_keys = list(
            dict.fromkeys(
                k
                for k in (entity_normalize_key(a) for a in entity.aliases)
                if k != entity.normalized_key
            )
        )
    if attributes is not None:
        entity.attributes = dict(attributes)
    clash = Entity.objects.filter(
        context=entity.context,
        scope=entity.scope,
        type=entity.type,
        normalized_key=entity.normalized_key,
        merged_into__isnull=True,
    ).exclude(pk=entity.pk)
    if clash.exists():
        raise Conflict(
            f"another {entity.type} in this scope already has the key "
            f"{entity.normalized_key!r} (entity {clash.first().pk}); merge them instead",  # type: ignore[union-attr]
            code="entity_key_taken",
        )
    entity.save()
    warnings: list[str] = []
    _attach_identifiers(
        entity=entity, identifiers=_clean_identifiers(identifiers_add or []), warnings=warnings
    )
    if warnings:
        raise Conflict("; ".join(warnings), code="identifier_taken")
    entity_embeddings_enqueue([entity.pk])
    entities_index([entity.pk])
    duplicates_check([entity.pk])  # re-scored: kept, changed or withdrawn
    audit_record(
        context=access.context,
        actor=access.user,
        action="entity_update",
        target_type="entity",
        target_id=entity.pk,
        summary=f"edited {entity.name}",
        before=before,
        after=_snapshot(entity),
        undo={"op": "entity_restore", "entity_id": entity.pk, "restore": before},
    )
    return entity


@write_transaction
def entity_delete(*, access: ContextAccess, entity: Entity) -> int:
    """Delete an entity with the facts that mention it; the audit event keeps them all."""
    access.require_role(Role.CURATOR)
    access.require_write(entity.scope)
    entities_lock([entity.pk], for_delete=True)
    entity = Entity.objects.get(pk=entity.pk)
    if entity.merged_from.exists():
        raise Conflict(
            "entities were merged into this one; undo those merges first",
            code="entity_has_merges",
        )
    facts = Fact.objects.filter(Q(subject=entity) | Q(object=entity))
    kept = list(
        facts.values(
            "id",
            "subject_id",
            "predicate__name",
            "object_id",
            "value",
            "scope",
            "status",
            "confidence",
            "recorded_at",
        )
    )
    snapshot = {**_snapshot(entity), "id": entity.pk, "scope": entity.scope, "facts": kept}
    count = len(kept)
    facts.delete()
    entity.delete()
    audit_record(
        context=access.context,
        actor=access.user,
        action="entity_delete",
        target_type="entity",
        target_id=snapshot["id"],
        summary=f"deleted {snapshot['name']} and {counted(count, 'fact')}",
        before=snapshot,
    )
    return count
