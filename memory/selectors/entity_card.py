"""An entity as an agent asks for it: found by id or by any of its names (canonical name,
alias or identifier), with its aliases, identifiers, best current facts and neighbours.

One reader for the MCP ``get_entity`` tool and the memory context block; every query is
limited to the caller's read grants.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from django.db.models import Q

from memory.access import ContextAccess
from memory.entity_names import IDENTIFIER_KIND_RE, entity_normalize_key, identifier_normalize
from memory.errors import NotFound, ValidationFailed
from memory.models import Entity, EntityIdentifier, FactKind, FactStatus, FactTrust
from memory.selectors.entities import entities_visible
from memory.selectors.facts import RankedFact, entity_facts_ranked, facts_visible

MatchedBy = Literal["id", "name", "alias", "identifier"]
MAX_REF_CHARS = 500
MAX_REDIRECTS = 10
OTHER_MATCHES = 5


@dataclass(frozen=True)
class EntityMatch:
    entity: Entity
    matched_by: MatchedBy
    # Other visible entities the same name finds (another scope or type): the caller
    # can ask for one of them by id.
    others: list[Entity]


@dataclass(frozen=True)
class Neighbour:
    id: int
    name: str
    type: str
    predicate: str
    direction: Literal["out", "in"]
    fact_id: int


@dataclass(frozen=True)
class EntityCard:
    entity: Entity
    matched_by: MatchedBy
    others: list[Entity]
    identifiers: list[EntityIdentifier]
    facts: list[RankedFact]
    neighbours: list[Neighbour]


def entity_find(*, access: ContextAccess, ref: int | str) -> EntityMatch:
    """The visible live entity ``ref`` names: an id, or a name that is an entity's
    canonical name, one of its aliases or an identifier (``alex@acme.example`` or
    ``email:alex@acme.example``), compared in normalized form. A merged entity answers
    with its survivor. Name matches rank before alias and identifier matches, then the
    most recently updated wins; the rest are listed in ``others``."""
    if isinstance(ref, bool):
        raise ValidationFailed("an entity is an id or a name", code="invalid_entity")
    if isinstance(ref, int):
        entity = entities_visible(access=access).filter(pk=ref).first()
        if entity is None:
            raise NotFound(f"entity {ref} not found", code="entity_not_found")
        return EntityMatch(entity=_survivor(access, entity), matched_by="id", others=[])
    text = " ".join(ref.split())
    if not text or len(text) > MAX_REF_CHARS or "\x00" in text:
        raise ValidationFailed(
            f"an entity name has 1 to {MAX_REF_CHARS} characters", code="invalid_entity"
        )
    key = entity_normalize_key(text)
    candidates = (
        entities_visible(access=access)
        .filter(_name_q(key) | Q(pk__in=_identifier_owners(access, text)))
        .defer("embedding")
        .order_by("-updated_at", "-id")[:50]
    )
    ranked: list[tuple[int, Entity, MatchedBy]] = []
    for entity in candidates:
        by: MatchedBy = (
            "name"
            if key and entity.normalized_key == key
            else "alias"
            if key and key in entity.alias_keys
            else "identifier"
        )
        ranked.append((("name", "alias", "identifier").index(by), entity, by))
    if not ranked:
        raise NotFound(
            f"no entity you can see is named {text[:100]!r} (by name, alias or identifier)",
            code="entity_not_found",
        )
    ranked.sort(key=lambda item: item[0])  # stable: most recently updated first within a tier
    seen: dict[int, Entity] = {}
    for _, entity, _by in ranked:
        survivor = _survivor(access, entity)
        seen.setdefault(survivor.pk, survivor)
    found = list(seen.values())
    return EntityMatch(
        entity=found[0], matched_by=ranked[0][2], others=found[1 : 1 + OTHER_MATCHES]
    )


def _name_q(key: str) -> Q:
    if not key:
        return Q(pk__in=[])
    return Q(normalized_key=key) | Q(alias_keys__contains=[key])


def _identifier_owners(access: ContextAccess, text: str) -> list[int]:
    """Ids of entities holding ``text`` as an identifier value (``kind:value`` too)."""
    match = Q(value__in={text, text.lower()})
    kind, sep, value = text.partition(":")
    if sep and IDENTIFIER_KIND_RE.match(kind.strip().lower()) and value.strip():
        try:
            norm_kind, norm_value = identifier_normalize(kind, value)
        except ValidationFailed:
            pass
        else:
            match |= Q(kind=norm_kind, value=norm_value)
    rows = EntityIdentifier.objects.filter(
        match, access.grants.read_q(), context=access.context
    ).values_list("entity_id", flat=True)[:20]
    return list(rows)


def _survivor(access: ContextAccess, entity: Entity) -> Entity:
    """Follow merge redirects to the live entity (visible, or the last visible one)."""
    for _ in range(MAX_REDIRECTS):
        if entity.merged_into_id is None:
            return entity
        nxt = entities_visible(access=access).filter(pk=entity.merged_into_id).first()
        if nxt is None:
            return entity
        entity = nxt
    return entity


def entity_neighbours(*, access: ContextAccess, entity: Entity, limit: int = 20) -> list[Neighbour]:
    """Entities joined to ``entity`` by current visible relation facts, newest first:
    up to ``limit`` it points at and ``limit`` pointing at it (two queries)."""
    relations = (
        facts_visible(access=access)
        .filter(kind=FactKind.RELATION, status=FactStatus.CURRENT, trust=FactTrust.TRUSTED)
        .order_by("-recorded_at", "-id")
    )
    out = relations.filter(subject=entity).exclude(object=entity)
    into = relations.filter(object=entity).exclude(subject=entity)
    neighbours = [
        Neighbour(other_id, name, type_, predicate, "out", fact_id)
        for fact_id, other_id, name, type_, predicate in out.values_list(
            "pk", "object_id", "object__name", "object__type", "predicate__name"
        )[:limit]
    ]
    neighbours += [
        Neighbour(other_id, name, type_, predicate, "in", fact_id)
        for fact_id, other_id, name, type_, predicate in into.values_list(
            "pk", "subject_id", "subject__name", "subject__type", "predicate__name"
        )[:limit]
    ]
    return neighbours


def entity_card(
    *, access: ContextAccess, ref: int | str, facts_limit: int = 20, neighbours_limit: int = 20
) -> EntityCard:
    """``entity_find`` and what an agent needs to know about the entity it finds."""
    match = entity_find(access=access, ref=ref)
    entity = match.entity
    identifiers = list(
        EntityIdentifier.objects.filter(access.grants.read_q(), entity=entity).order_by(
            "kind", "value"
        )
    )
    return EntityCard(
        entity=entity,
        matched_by=match.matched_by,
        others=match.others,
        identifiers=identifiers,
        facts=entity_facts_ranked(access=access, entity=entity, limit=facts_limit),
        neighbours=entity_neighbours(access=access, entity=entity, limit=neighbours_limit),
    )
