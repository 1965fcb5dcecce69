"""Which entity a name means: the one resolution rule behind every "entity by name" input.

MCP ``get_entity`` and ``find_facts``, the memory context block's ``entity`` and the REST
fact filters (``subject=``/``object=``) all resolve through ``resolve_entity_name``, so one
name finds the same entity on every face, and keeps finding it after unrelated edits.

The rule, best first:
1. exactness — the text equals (case-insensitively, whitespace folded) an entity's name, one
   of its aliases or one of its identifiers; only then the normalized key of a name or an
   alias ("Acme Corp" and "ACME Inc." share the key ``acme``, but "Acme Corp" means the
   entity named so);
2. the caller's own scope — the scope it names (``prefer_scope``) or one of its ancestors,
   then a scope its grants may write to, then the scopes it may only read;
3. within that, a name before an alias before an identifier;
4. a stable order: the oldest entity (lowest id). Never ``updated_at``: an unrelated edit
   must not change what a name means.
The other entities the text matched are returned as ``other_matches`` for the caller to
pick by id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from django.db.models import Case, IntegerField, Q, Value, When

from memory.domain.access import ContextAccess
from memory.domain.entity_names import (
    IDENTIFIER_KIND_RE,
    entity_name_folded,
    entity_normalize_key,
    identifier_normalize,
)
from memory.kernel.errors import NotFound, ValidationFailed
from memory.models import Entity, EntityIdentifier
from memory.selectors.entities import entities_visible

# "name"/"alias": the text is the name or an alias (case-insensitively); "identifier": one
# of the entity's identifiers; "key": only the normalized key of its name or an alias.
MatchedBy = Literal["id", "name", "alias", "identifier", "key"]
MAX_REF_CHARS = 500
MAX_REDIRECTS = 10
OTHER_MATCHES = 5
# Candidates read per lookup; exact name matches are read first so they are never cut off.
MAX_CANDIDATES = 100


@dataclass(frozen=True)
class EntityResolution:
    entity: Entity
    matched_by: MatchedBy
    # Other visible entities the same text finds (another scope or type, or the same key),
    # in the rule's order: the caller can ask for one of them by id.
    other_matches: list[Entity]


def resolve_entity_name(
    *, access: ContextAccess, ref: int | str, prefer_scope: str | None = None
) -> EntityResolution:
    """The visible live entity ``ref`` means: an id, or a name, alias or identifier
    (``alex@acme.example`` or ``email:alex@acme.example``) ranked by the module's rule.
    A merged entity answers with its survivor. NotFound when nothing visible matches;
    ValidationFailed for an empty, overlong or NUL-bearing text."""
    if isinstance(ref, bool):
        raise ValidationFailed("an entity is an id or a name", code="invalid_entity")
    if isinstance(ref, int):
        entity = entities_visible(access=access).filter(pk=ref).first()
        if entity is None:
            raise NotFound(f"entity {ref} not found", code="entity_not_found")
        return EntityResolution(entity=_survivor(access, entity), matched_by="id", other_matches=[])
    text = " ".join(ref.split())
    if not text or len(text) > MAX_REF_CHARS or "\x00" in text:
        raise ValidationFailed(
            f"an entity name has 1 to {MAX_REF_CHARS} characters", code="invalid_entity"
        )
    ranked = _ranked_candidates(access, text, prefer_scope)
    if not ranked:
        raise NotFound(
            f"no entity you can see is named {text[:100]!r} (by name, alias or identifier)",
            code="entity_not_found",
        )
    survivors: dict[int, Entity] = {}
    for _, entity, _by in ranked:
        survivor = _survivor(access, entity)
        survivors.setdefault(survivor.pk, survivor)
    found = list(survivors.values())
    return EntityResolution(
        entity=found[0], matched_by=ranked[0][2], other_matches=found[1 : 1 + OTHER_MATCHES]
    )


def _ranked_candidates(
    access: ContextAccess, text: str, prefer_scope: str | None
) -> list[tuple[tuple[int, int, int, int], Entity, MatchedBy]]:
    key = entity_normalize_key(text)
    folded = entity_name_folded(text)
    identifier_owners = set(_identifier_owners(access, text))
    candidates = (
        entities_visible(access=access)
        .filter(_key_q(key) | Q(name__iexact=text) | Q(pk__in=identifier_owners))
        .annotate(
            exact_name=Case(
                When(name__iexact=text, then=Value(0)),
                default=Value(1),
                output_field=IntegerField(),
            )
        )
        .defer("embedding")
        .order_by("exact_name", "id")[:MAX_CANDIDATES]
    )
    ranked: list[tuple[tuple[int, int, int, int], Entity, MatchedBy]] = []
    for entity in candidates:
        by = _matched_by(entity, folded, identifier_owners)
        exactness = 1 if by == "key" else 0
        kind = ("name", "alias", "identifier", "key").index(by)
        ranked.append(
            (
                (exactness, _scope_rank(access, entity.scope, prefer_scope), kind, entity.pk),
                entity,
                by,
            )
        )
    ranked.sort(key=lambda item: item[0])
    return ranked


def _matched_by(entity: Entity, folded: str, identifier_owners: set[int]) -> MatchedBy:
    if entity_name_folded(entity.name) == folded:
        return "name"
    if any(entity_name_folded(alias) == folded for alias in entity.aliases):
        return "alias"
    if entity.pk in identifier_owners:
        return "identifier"
    return "key"


def _scope_rank(access: ContextAccess, scope: str, prefer_scope: str | None) -> int:
    """0: the caller's own scope or an ancestor of it; 1: a scope it may write to;
    2: a scope it may only read."""
    if prefer_scope and (scope == prefer_scope or prefer_scope.startswith(scope + "/")):
        return 0
    return 1 if access.grants.can_write(scope) else 2


def _key_q(key: str) -> Q:
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
