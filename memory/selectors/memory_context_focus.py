"""The memory block keeps to the entities a question names.

- Once a question names an entity, a fact about others is in the block only where it
  answers through that entity: it has the entity at one end ("Who works at EvilCorp?"
  lists its employees); a relation question reaches it through the entity's neighbour and
  it gives the kind of thing asked for ("Where does Dana's manager live?": a place, not
  the others who live there too); or it names the entity in its words (a value, a
  namesake's fact). A fact about others that the search found because it shares a word
  with the question ("know", "works") is left out and counted.
- A named entity of which nothing trusted is known gets one line that says so, with how
  many of its facts wait for review — never what they claim.

Questions that name no entity are not touched.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Count, Q

from memory.domain.access import ContextAccess
from memory.domain.entity_names import entity_normalize_key
from memory.models import Entity, EntityType, Fact, FactTrust, fact_live_q
from memory.selectors.entity_linking import EntityLink
from memory.selectors.fact_relevance import FactCandidate
from memory.selectors.facts import RANK_MIN_CONFIDENCE, facts_visible
from memory.selectors.memory_context_layout import ContextLine, NothingTrusted


def named_keys(links: list[EntityLink]) -> frozenset[str]:
    """The name keys (names and aliases) of the entities a question names."""
    keys = {link.entity.normalized_key for link in links}
    keys.update(key for link in links for key in link.entity.alias_keys)
    return frozenset(key for key in keys if key)


def in_focus(candidate: FactCandidate, keys: frozenset[str]) -> bool:
    """Whether a candidate is about a named entity: at one of its ends, reached through
    it and giving what the question asks for, or naming it. With no entity named
    (``keys`` empty), every candidate is."""
    if not keys or candidate.linked:
        return True
    if candidate.hop:
        return _gives_what_is_asked(candidate)
    statement = f" {_statement_key(candidate.fact)} "
    return any(f" {key} " in statement for key in keys)


def _gives_what_is_asked(candidate: FactCandidate) -> bool:
    """A fact reached through a neighbour answers unless the question asks for a kind of
    entity and the fact's far end is an entity of another kind (a value, or an entity of
    no known kind, may be what is asked for). A sibling — standing to the neighbour as the
    named entity does — answers only when its far end is exactly what is asked for: "Who
    are Dana's colleagues?" is answered by the others at her employer, "Where does Jon
    live?" and "What does Project Beacon depend on?" are not answered by the others who
    live in his town or depend on the same thing."""
    answer = candidate.explain["answer"]
    if answer["fits"]:
        return True
    if candidate.sibling:
        return False
    return answer["asked"] in (None, "value") or answer["given"] in ("value", EntityType.OTHER)


def _statement_key(fact: Fact) -> str:
    """The fact's words, folded as entity names are (the predicate left out: its words are
    the relation, not a name)."""
    other = fact.object.name if fact.object is not None else fact.value_text
    return entity_normalize_key(f"{fact.subject.name} {other}")


def nothing_trusted(
    *, access: ContextAccess, entities: list[Entity], lines: Iterable[ContextLine]
) -> list[NothingTrusted]:
    """The ``entities`` of which no trusted fact is known, each with the number of its
    facts awaiting review that the caller may read. ``lines``: the block's candidate facts;
    an entity at one end of a trusted one is known, and only the others are counted (one
    query, none when every entity is known)."""
    known: set[int] = set()
    for line in lines:
        if line.data["trust"] == FactTrust.TRUSTED:
            known.add(line.data["subject"]["id"])
            if line.data["object"] is not None:
                known.add(line.data["object"]["id"])
    unknown = [entity for entity in entities if entity.pk not in known]
    if not unknown:
        return []
    counts: dict[str, Count] = {}
    for entity in unknown:
        about = Q(subject_id=entity.pk) | Q(object_id=entity.pk)
        trusted = Q(trust=FactTrust.TRUSTED, confidence__gte=RANK_MIN_CONFIDENCE)
        counts[f"trusted_{entity.pk}"] = Count("pk", filter=about & trusted)
        counts[f"pending_{entity.pk}"] = Count("pk", filter=about & Q(trust=FactTrust.PENDING))
    ids = [entity.pk for entity in unknown]
    found = (
        facts_visible(access=access)
        .filter(fact_live_q())
        .filter(Q(subject_id__in=ids) | Q(object_id__in=ids))
        .aggregate(**counts)
    )
    return [
        NothingTrusted(entity=entity, awaiting_review=found[f"pending_{entity.pk}"])
        for entity in unknown
        # The candidates read a bounded number of facts: one crowded out is still known.
        if not found[f"trusted_{entity.pk}"]
    ]
