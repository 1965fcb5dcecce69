"""Matching: the entities of a context a query (a row of someone else's table) names.

A query (a name, perhaps a type, identifiers by kind and attributes by key) is made into
the record the duplicate comparators read (``duplicate_scoring.Record``); its candidates
are the entities sharing one of its blocking keys (``duplicate_blocking.blocking_keys``)
or one of its identifiers; each is compared field by field and scored by the context's
Fellegi–Sunter model, exactly as two entities of the context are on the duplicates page.
A candidate is a ``match`` only when the model is sure of it and the runner-up is far
behind (docs/decisions/0085). A query may also name entities by id (``reconcile_ids``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from memory.domain.access import ContextAccess
from memory.domain.entity_names import entity_normalize_key, identifier_normalize
from memory.kernel.errors import ValidationFailed
from memory.matching.blocking import MAX_BLOCK, block_limit, blocking_keys, is_rare
from memory.matching.records import records_of
from memory.matching.scoring import Record, compare
from memory.matching.weights import model_read
from memory.models import ENTITY_TYPES, Entity, EntityIdentifier
from memory.models.duplicate import DuplicateKey
from memory.selectors.entities import entities_visible
from memory.selectors.reconcile.properties import is_scalar, property_resolve

MAX_QUERIES = 100  # per batch (OpenRefine sends 10)
MAX_CANDIDATES = 25
DEFAULT_CANDIDATES = 5
# An exact name shared by many entities is still what a reconciler asks for: its
# same-words block is read this far, where a duplicate finder gives up at MAX_BLOCK.
SAME_WORDS_BLOCK = 200
# A match must be this sure, and the runner-up this many bits of log-odds behind it
# (docs/decisions/0085).
AUTO_MATCH_PROBABILITY = 0.99
AUTO_MATCH_GAP_BITS = 6.0
MAX_PROPERTY_VALUES = 20


@dataclass(frozen=True)
class ReconcileQuery:
    name: str
    types: tuple[str, ...] = ()  # none: every type
    identifiers: dict[str, frozenset[str]] = field(default_factory=dict)
    attributes: dict[str, str] = field(default_factory=dict)
    limit: int = DEFAULT_CANDIDATES


@dataclass(frozen=True)
class Feature:
    id: str  # the model's field: "name", "id:email", "attr:date_of_birth:date", "prior"
    level: str
    weight: float  # log2(m/u) of the field's level


@dataclass(frozen=True)
class ReconcileCandidate:
    entity_id: int
    name: str
    type: str
    description: str
    probability: float
    match: bool
    features: tuple[Feature, ...]

    @property
    def score(self) -> float:
        """The match probability on the 0–100 scale reconcilers show."""
        return round(100.0 * self.probability, 2)


def query_record(query: ReconcileQuery, type_: str) -> Record:
    return Record(
        id=0,
        type=type_,
        scope="",
        key=entity_normalize_key(query.name),
        attributes=dict(query.attributes),
        identifiers=dict(query.identifiers),
    )


def query_build(
    *,
    name: str,
    types: Sequence[str],
    properties: Iterable[tuple[str, Sequence[Any]]],
    limit: int | None,
    identifier_kinds: Container[str],
) -> ReconcileQuery:
    """A query from a client's fields; ValidationFailed naming what is wrong."""
    for type_ in types:
        if type_ not in ENTITY_TYPES:
            raise ValidationFailed(
                f"unknown type {type_[:40]!r}; the types are {', '.join(ENTITY_TYPES)}",
                code="invalid_type",
            )
    identifiers: dict[str, set[str]] = defaultdict(set)
    attributes: dict[str, str] = {}
    for pid, values in properties:
        ref = property_resolve(pid, identifier_kinds=identifier_kinds)
        texts = [text for value in values[:MAX_PROPERTY_VALUES] if (text := _value_text(value))]
        if ref.kind == "id":
            for text in texts:
                kind, value = identifier_normalize(ref.key, text)
                identifiers[kind].add(value)
        elif texts:
            attributes[ref.key] = texts[0]
    if not entity_normalize_key(name) and not identifiers:
        raise ValidationFailed(
            "a query needs a name with a letter or digit, or an identifier",
            code="invalid_query",
        )
    wanted = DEFAULT_CANDIDATES if limit is None else limit
    if not 1 <= wanted <= MAX_CANDIDATES:
        raise ValidationFailed(f"limit must be 1–{MAX_CANDIDATES}", code="invalid_limit")
    return ReconcileQuery(
        name=name,
        types=tuple(dict.fromkeys(types)),
        identifiers={k: frozenset(v) for k, v in identifiers.items()},
        attributes=attributes,
        limit=wanted,
    )


def _value_text(value: Any) -> str:
    """A property value as the comparators read it: an entity reference by its id."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return value.strip()[:500]
    if isinstance(value, dict):
        return str(value.get("id", "")).strip()[:500]
    return ""


def reconcile_match(
    *, access: ContextAccess, queries: Sequence[ReconcileQuery]
) -> list[list[ReconcileCandidate]]:
    """Each query's candidates, best first (a few statements per query)."""
    if len(queries) > MAX_QUERIES:
        raise ValidationFailed(f"at most {MAX_QUERIES} queries a batch", code="too_many_queries")
    model, _ = model_read(access.context.pk)
    return [_match_one(access, model, query) for query in queries]


def _match_one(
    access: ContextAccess, model: Any, query: ReconcileQuery
) -> list[ReconcileCandidate]:
    types = query.types or ENTITY_TYPES
    keys_by_type = {t: blocking_keys(query_record(query, t)) for t in types}
    holders = _key_holders(access.context.pk, keys_by_type)
    found: set[int] = set()
    rare: dict[str, set[str]] = defaultdict(set)
    for (type_, key), members in holders.items():
        if is_rare(key, len(members) + 1):  # the query is one of the key's holders
            rare[type_].add(key)
        limit = SAME_WORDS_BLOCK if key.startswith("w:") else block_limit(key)
        if len(members) <= limit:
            found.update(members)
    found.update(_identifier_holders(access, query, types))
    # Live entities only (records_of reads no redirect); the grants are checked on
    # each record's scope rather than by one more statement.
    records = records_of(access.context.pk, found)
    scored: list[tuple[float, float, Record, list[dict[str, Any]]]] = []
    for record in records.values():
        if record.type not in types or not access.grants.can_read(record.scope):
            continue
        mine = query_record(query, record.type)
        comparisons = compare(mine, record, rare=rare.get(record.type, set()))
        probability, explain = model.score(comparisons, record.type)
        log_odds = sum(f["weight"] for f in explain)
        scored.append((probability, log_odds, record, explain))
    scored.sort(key=lambda s: (-s[1], s[2].id))
    best = scored[: query.limit]
    names = dict(
        Entity.objects.filter(pk__in=[r.id for _, _, r, _ in best]).values_list("pk", "name")
    )
    named = _named_exactly(access, query, best[0][2]) if best else False
    out = []
    for rank, (probability, log_odds, record, explain) in enumerate(best):
        runner_up = scored[1][1] if len(scored) > 1 else -math.inf
        sure = rank == 0 and (named or probability >= AUTO_MATCH_PROBABILITY)
        out.append(
            ReconcileCandidate(
                entity_id=record.id,
                name=names.get(record.id, record.key),
                type=record.type,
                description=_description(record),
                probability=probability,
                match=sure and (named or log_odds - runner_up >= AUTO_MATCH_GAP_BITS),
                features=tuple(
                    Feature(f["field"], str(f["level"]), float(f["weight"])) for f in explain
                ),
            )
        )
    return out


def _named_exactly(access: ContextAccess, query: ReconcileQuery, top: Record) -> bool:
    """Whether the best candidate is the one entity of the asked type whose name is the
    query's name exactly (once case and spacing are set aside): a match without the
    model's say, as a reconciler expects of an exact, unique name (docs/decisions/0118).
    A query that asks for no type, or a name two entities share, still needs the model."""
    wanted = entity_normalize_key(query.name)
    if not query.types or not wanted or top.key != wanted:
        return False
    holders = entities_visible(access=access).filter(
        type__in=query.types, normalized_key=wanted, merged_into__isnull=True
    )
    return holders.count() == 1


def _key_holders(
    context_id: int, keys_by_type: dict[str, set[str]]
) -> dict[tuple[str, str], list[int]]:
    """The entities holding each (type, key), at most one past the key's block (one
    statement, through the ``duplicate_key_lookup`` index)."""
    wanted = sorted((t, k) for t, keys in keys_by_type.items() for k in keys)
    if not wanted:
        return {}
    table = DuplicateKey._meta.db_table
    sql = f"""
        SELECT q.type, q.key, h.entity_id
        FROM unnest(%s::text[], %s::text[]) AS q(type, key)
        CROSS JOIN LATERAL (
            SELECT k.entity_id FROM {table} k
            WHERE k.context_id = %s AND k.type = q.type AND k.key = q.key
            LIMIT CASE WHEN q.key LIKE 'w:%%' THEN %s ELSE %s END
        ) h
    """  # noqa: S608 - table names from the models, values are parameters
    out: dict[tuple[str, str], list[int]] = defaultdict(list)
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            [
                [t for t, _ in wanted],
                [k for _, k in wanted],
                context_id,
                SAME_WORDS_BLOCK + 1,
                MAX_BLOCK + 1,
            ],
        )
        for type_, key, entity_id in cursor.fetchall():
            out[(type_, key)].append(entity_id)
    return out


def _identifier_holders(
    access: ContextAccess, query: ReconcileQuery, types: Sequence[str]
) -> set[int]:
    if not query.identifiers:
        return set()
    held: set[int] = set()
    for kind, values in query.identifiers.items():
        held.update(
            EntityIdentifier.objects.filter(
                context=access.context, kind=kind, value__in=sorted(values)
            ).values_list("entity_id", flat=True)[:MAX_BLOCK]
        )
    return held


def _description(record: Record) -> str:
    """What tells a candidate from its namesakes in a reconciler's list: its type, scope
    and first few attributes."""
    shown = [f"{k}: {v}" for k, v in list(record.attributes.items())[:3] if is_scalar(v)]
    return " · ".join([record.type, record.scope, *shown])[:300]


def reconcile_ids(access: ContextAccess, ids: Sequence[str]) -> list[ReconcileCandidate]:
    """The entities a query names by id (a merged one by the entity it went into): sure
    matches when there is one."""
    pks = {int(i) for i in ids if i.strip().isdigit() and len(i.strip()) < 19}
    visible = entities_visible(access=access).defer("embedding")
    found: dict[int, Entity] = {}
    for entity in visible.filter(pk__in=sorted(pks)):
        hops = 0
        while entity.merged_into_id is not None and hops < 20:
            target = visible.filter(pk=entity.merged_into_id).first()
            if target is None:
                break
            entity, hops = target, hops + 1
        if entity.merged_into_id is None:
            found[entity.pk] = entity
    records = records_of(access.context.pk, found)
    return [
        ReconcileCandidate(
            entity_id=pk,
            name=entity.name,
            type=entity.type,
            description=_description(records[pk]) if pk in records else entity.type,
            probability=1.0,
            match=len(found) == 1,
            features=(Feature("id", "equal", 0.0),),
        )
        for pk, entity in sorted(found.items())
    ]
