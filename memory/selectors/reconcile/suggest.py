"""What a reconciling client shows while a person types and looks: entities, types and
properties that complete a prefix, and the small card of one entity (the preview)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.db.models import Count
from rapidfuzz import fuzz

from memory.domain.access import ContextAccess
from memory.domain.entity_names import entity_normalize_key
from memory.kernel.errors import ValidationFailed
from memory.models import ENTITY_TYPES, Entity, EntityIdentifier, Predicate, PredicateStatus
from memory.selectors.entities import entities_visible, entity_list
from memory.selectors.reconcile.match import ReconcileQuery, reconcile_match

MAX_SUGGEST = 25


@dataclass(frozen=True)
class Suggestion:
    id: str
    name: str
    description: str = ""


def suggest_entities(
    *, access: ContextAccess, prefix: str, type_: str | None = None, limit: int = 10
) -> list[Suggestion]:
    """Entities whose words start with the prefix's words (or an alias equal to it), then
    the fuzzy candidates of the prefix as a name (a slip, a respelling)."""
    limit = max(1, min(limit, MAX_SUGGEST))
    if not entity_normalize_key(prefix):
        return []
    if type_ is not None and type_ not in ENTITY_TYPES:
        raise ValidationFailed(f"unknown type {type_[:40]!r}", code="invalid_type")
    rows = list(
        entity_list(access=access, q=prefix, type=type_).values_list("pk", "name", "type", "scope")[
            :limit
        ]
    )
    out = [Suggestion(str(pk), name, f"{t} · {scope}") for pk, name, t, scope in rows]
    if len(out) < limit:
        seen = {s.id for s in out}
        query = ReconcileQuery(name=prefix, types=(type_,) if type_ else (), limit=limit)
        for candidate in reconcile_match(access=access, queries=[query])[0]:
            if str(candidate.entity_id) not in seen and len(out) < limit:
                out.append(
                    Suggestion(str(candidate.entity_id), candidate.name, candidate.description)
                )
    return out


def suggest_types(*, prefix: str, limit: int = 10) -> list[Suggestion]:
    wanted = prefix.strip().casefold()
    ranked = sorted(
        ENTITY_TYPES,
        key=lambda t: (not t.startswith(wanted), -fuzz.partial_ratio(wanted, t), t),
    )
    kept = [t for t in ranked if not wanted or wanted in t or fuzz.ratio(wanted, t) >= 60]
    return [Suggestion(t, t) for t in kept[: max(1, min(limit, MAX_SUGGEST))]]


def properties_known(
    *, access: ContextAccess, type_: str | None = None, with_facts: bool = False
) -> list[Suggestion]:
    """The context's identifier kinds and attribute keys (and predicates, for data
    extension), those of entities of ``type_`` when given, most used first."""
    entities = entities_visible(access=access).filter(merged_into__isnull=True)
    identifiers = EntityIdentifier.objects.filter(access.grants.read_q(), context=access.context)
    if type_:
        entities = entities.filter(type=type_)
        identifiers = identifiers.filter(entity__type=type_)
    out = [
        Suggestion(f"id:{kind}", kind, "identifier")
        for kind in identifiers.values("kind")
        .annotate(n=Count("pk"))
        .order_by("-n", "kind")
        .values_list("kind", flat=True)[:100]
    ]
    out += [Suggestion(f"attr:{key}", key, "attribute") for key in _attribute_keys(entities)]
    if with_facts:
        predicates = Predicate.objects.filter(
            context=access.context, status=PredicateStatus.REGISTERED
        )
        if type_:
            predicates = predicates.filter(subject_types__contains=[type_]) | predicates.filter(
                subject_types=[]
            )
        out += [
            Suggestion(f"fact:{name}", name.replace("_", " "), "fact")
            for name in predicates.order_by("name").values_list("name", flat=True)[:200]
        ]
    return out


def _attribute_keys(entities: Any) -> list[str]:
    """Attribute keys of a recent sample of the entities, most used first (the keys of
    a seeded spreadsheet are on all its rows: a sample finds them without a scan)."""
    sample = entities.order_by("-updated_at").values_list("attributes", flat=True)[:2_000]
    counts: dict[str, int] = defaultdict(int)
    for attributes in sample:
        if isinstance(attributes, dict):
            for key in attributes:
                counts[key] += 1
    return sorted(counts, key=lambda k: (-counts[k], k))[:200]


def suggest_properties(
    *, access: ContextAccess, prefix: str, type_: str | None = None, limit: int = 10
) -> list[Suggestion]:
    wanted = prefix.strip().casefold()
    known = properties_known(access=access, type_=type_, with_facts=True)

    def rank(s: Suggestion) -> tuple[bool, float]:
        name = s.name.casefold()
        return (not name.startswith(wanted), -fuzz.partial_ratio(wanted, name))

    kept = [
        s
        for s in sorted(known, key=rank)
        if not wanted or wanted in s.name.casefold() or fuzz.partial_ratio(wanted, s.name) >= 80
    ]
    return kept[: max(1, min(limit, MAX_SUGGEST))]


@dataclass
class PreviewCard:
    entity: Entity
    facts: list[tuple[str, str]]  # (predicate, value) of the best current facts


def preview_card(*, access: ContextAccess, entity_id: int) -> PreviewCard | None:
    from memory.selectors.facts import entity_facts_ranked

    entity = entities_visible(access=access).filter(pk=entity_id).defer("embedding").first()
    if entity is None:
        return None
    while entity.merged_into_id is not None:  # a redirect shows the entity it went into
        target = entities_visible(access=access).filter(pk=entity.merged_into_id).first()
        if target is None:
            return None
        entity = target
    ranked = entity_facts_ranked(access=access, entity=entity, limit=5)
    facts = [
        (
            r.fact.predicate.name.replace("_", " "),
            r.fact.object.name if r.fact.object is not None else r.fact.value_text,
        )
        for r in ranked
    ]
    return PreviewCard(entity=entity, facts=facts)
