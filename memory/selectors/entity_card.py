"""An entity as an agent asks for it: found by id or by any of its names (canonical name,
alias or identifier; memory.selectors.entity_lookup decides which entity a name means),
with its aliases, identifiers, best current facts and neighbours.

One reader for the MCP ``get_entity`` tool and the memory context block; every query is
limited to the caller's read grants.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from memory.domain.access import ContextAccess
from memory.models import Entity, EntityIdentifier, FactKind, FactStatus, FactTrust
from memory.selectors.entity_lookup import MatchedBy, resolve_entity_name
from memory.selectors.facts import RankedFact, entity_facts_ranked, facts_visible


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
    other_matches: list[Entity]
    identifiers: list[EntityIdentifier]
    facts: list[RankedFact]
    neighbours: list[Neighbour]


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
    """The entity ``ref`` means (``resolve_entity_name``) and what an agent needs to know
    about it."""
    match = resolve_entity_name(access=access, ref=ref)
    entity = match.entity
    identifiers = list(
        EntityIdentifier.objects.filter(access.grants.read_q(), entity=entity).order_by(
            "kind", "value"
        )
    )
    return EntityCard(
        entity=entity,
        matched_by=match.matched_by,
        other_matches=match.other_matches,
        identifiers=identifiers,
        facts=entity_facts_ranked(access=access, entity=entity, limit=facts_limit),
        neighbours=entity_neighbours(access=access, entity=entity, limit=neighbours_limit),
    )
