"""Reconciliation: which entities of a context a row of someone else's table names.

A query (a name, perhaps a type, identifiers by kind and attributes by key) is made into
the record the duplicate comparators read (``duplicate_scoring.Record``); its candidates
are the entities sharing one of its blocking keys (``duplicate_blocking.blocking_keys``)
or one of its identifiers; each is compared field by field and scored by the context's
Fellegi–Sunter model, exactly as two entities of the context are on the duplicates page.
A candidate is a ``match`` only when the model is sure of it and the runner-up is far
behind (docs/decisions/0085).

Property ids, in queries, suggestions and data extension: ``id:KIND`` an identifier
kind, ``attr:KEY`` an attribute key, ``fact:PREDICATE`` a predicate's current facts
(data extension only). A bare id is an identifier kind the context uses, else an
attribute key (else, in data extension, a predicate).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from django.db import connection
from django.db.models import Count
from rapidfuzz import fuzz

from memory.domain.access import ContextAccess
from memory.domain.entity_names import entity_normalize_key, identifier_normalize
from memory.kernel.errors import ValidationFailed
from memory.matching.blocking import MAX_BLOCK, block_limit, blocking_keys, is_rare
from memory.matching.records import records_of
from memory.matching.scoring import Record, compare
from memory.matching.weights import model_read
from memory.models import (
    ENTITY_TYPES,
    Entity,
    EntityIdentifier,
    Fact,
    FactStatus,
    Predicate,
    PredicateStatus,
)
from memory.models.duplicate import DuplicateKey
from memory.selectors.entities import entities_visible, entity_list

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
MAX_EXTEND_IDS = 500
MAX_EXTEND_PROPERTIES = 50
MAX_SUGGEST = 25


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


# --- properties ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PropertyRef:
    kind: str  # "id", "attr" or "fact"
    key: str

    @property
    def id(self) -> str:
        return f"{self.kind}:{self.key}"


def identifier_kinds(access: ContextAccess) -> set[str]:
    return set(
        EntityIdentifier.objects.filter(access.grants.read_q(), context=access.context)
        .values_list("kind", flat=True)
        .distinct()
    )


class IdentifierKinds:
    """The context's identifier kinds, read the first time a bare property id needs
    them (a batch of ``attr:`` and ``id:`` properties never does)."""

    def __init__(self, access: ContextAccess) -> None:
        self.access = access
        self._kinds: set[str] | None = None

    def __contains__(self, kind: object) -> bool:
        if self._kinds is None:
            self._kinds = identifier_kinds(self.access)
        return kind in self._kinds


def property_resolve(
    pid: str, *, identifier_kinds: Container[str], predicates: set[str] | None = None
) -> PropertyRef:
    """What a property id names (module docstring); ValidationFailed if it names nothing."""
    text = pid.strip()
    kind, sep, key = text.partition(":")
    if sep and kind in ("id", "attr", "fact") and key.strip():
        if kind == "fact" and predicates is None:
            raise ValidationFailed(
                f"property {text[:80]!r}: facts are not compared when matching; use id: "
                "or attr: properties",
                code="invalid_property",
            )
        return PropertyRef(kind, key.strip())
    if not text:
        raise ValidationFailed("a property id cannot be empty", code="invalid_property")
    if text in identifier_kinds:
        return PropertyRef("id", text)
    if predicates is not None and text in predicates:
        return PropertyRef("fact", text)
    return PropertyRef("attr", text)


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


# --- matching -----------------------------------------------------------------------------


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
    model's say, as a reconciler expects of an exact, unique name (docs/decisions/0114).
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
    shown = [f"{k}: {v}" for k, v in list(record.attributes.items())[:3] if _is_scalar(v)]
    return " · ".join([record.type, record.scope, *shown])[:300]


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) and value != ""


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


# --- suggest ------------------------------------------------------------------------------


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


# --- data extension -----------------------------------------------------------------------

ExtendValue = dict[str, Any]  # {"id", "name"} | {"str"} | {"int"} | {"float"} | {"date"}


@dataclass(frozen=True)
class ExtendColumn:
    ref: PropertyRef
    name: str
    object_type: str | None = None  # a relation predicate's object type, when it has one


def extend_columns(*, access: ContextAccess, pids: Sequence[str]) -> list[ExtendColumn]:
    if not pids or len(pids) > MAX_EXTEND_PROPERTIES:
        raise ValidationFailed(
            f"ask for 1–{MAX_EXTEND_PROPERTIES} properties", code="invalid_extend"
        )
    predicates = {
        p.name: p
        for p in Predicate.objects.filter(context=access.context).exclude(
            status=PredicateStatus.REJECTED
        )
    }
    kinds = identifier_kinds(access)
    columns = []
    for pid in pids:
        ref = property_resolve(pid, identifier_kinds=kinds, predicates=set(predicates))
        predicate = predicates.get(ref.key) if ref.kind == "fact" else None
        if ref.kind == "fact" and predicate is None:
            raise ValidationFailed(
                f"no predicate {ref.key[:80]!r} in this context", code="invalid_property"
            )
        object_type = None
        if predicate is not None and len(predicate.object_types) == 1:
            object_type = predicate.object_types[0]
        label = ref.key.replace("_", " ") if ref.kind == "fact" else ref.key
        columns.append(ExtendColumn(ref, label, object_type))
    return columns


def extend_rows(
    *, access: ContextAccess, ids: Sequence[str], columns: Sequence[ExtendColumn]
) -> dict[str, dict[str, list[ExtendValue]]]:
    """Each asked entity's values of each column: current facts of the predicate
    (an entity as ``{id, name}``, a value by its type), the attribute, the identifiers.
    An id that names no visible entity gets empty columns."""
    if len(ids) > MAX_EXTEND_IDS:
        raise ValidationFailed(f"at most {MAX_EXTEND_IDS} ids", code="invalid_extend")
    pks = {i: int(i) for i in ids if i.strip().isdigit() and len(i) < 19}
    entities = {
        e.pk: e
        for e in entities_visible(access=access)
        .filter(pk__in=sorted(set(pks.values())))
        .only("pk", "attributes", "merged_into_id")
    }
    rows: dict[str, dict[str, list[ExtendValue]]] = {
        i: {c.ref.id: [] for c in columns} for i in ids
    }
    facts = _current_facts(
        access, sorted(entities), [c.ref.key for c in columns if c.ref.kind == "fact"]
    )
    identifiers: dict[tuple[int, str], list[str]] = defaultdict(list)
    id_kinds = [c.ref.key for c in columns if c.ref.kind == "id"]
    if id_kinds:
        for entity_id, kind, value in (
            EntityIdentifier.objects.filter(entity_id__in=sorted(entities), kind__in=id_kinds)
            .order_by("kind", "value")
            .values_list("entity_id", "kind", "value")
        ):
            identifiers[(entity_id, kind)].append(value)
    for text, pk in pks.items():
        entity = entities.get(pk)
        if entity is None:
            continue
        for column in columns:
            ref = column.ref
            if ref.kind == "attr":
                held = (entity.attributes or {}).get(ref.key)
                cells = [extend_value(held)] if held is not None and _is_scalar(held) else []
            elif ref.kind == "id":
                cells = [{"str": v} for v in identifiers.get((pk, ref.key), [])]
            else:
                cells = facts.get((pk, ref.key), [])
            rows[text][ref.id] = cells
    return rows


def _current_facts(
    access: ContextAccess, subject_ids: list[int], predicates: list[str]
) -> dict[tuple[int, str], list[ExtendValue]]:
    out: dict[tuple[int, str], list[ExtendValue]] = defaultdict(list)
    if not subject_ids or not predicates:
        return out
    facts = (
        Fact.objects.filter(
            access.grants.read_q(),
            context=access.context,
            subject_id__in=subject_ids,
            predicate__name__in=predicates,
            status=FactStatus.CURRENT,
        )
        .select_related("object")
        .only("subject_id", "predicate__name", "object__id", "object__name", "value", "kind")
        .order_by("subject_id", "-confidence", "-id")[:20_000]
    )
    for fact in facts:
        key = (fact.subject_id, fact.predicate.name)
        if fact.object is not None:
            out[key].append({"id": str(fact.object.pk), "name": fact.object.name})
        elif fact.value is not None and _is_scalar(fact.value):
            out[key].append(extend_value(fact.value))
        elif fact.value is not None:
            out[key].append({"str": str(fact.value)[:1000]})
    return out


def extend_value(value: Any) -> ExtendValue:
    """A value in the extension's typed form (a date-time only when it is one)."""
    if isinstance(value, bool):
        return {"str": "true" if value else "false"}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, float):
        return {"float": value} if math.isfinite(value) else {"str": str(value)}
    text = str(value)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return {"str": text}
    if "T" not in text and len(text) == 10:
        day = date.fromisoformat(text)
        return {"date": f"{day.isoformat()}T00:00:00Z"}
    if moment.tzinfo is None:
        return {"date": moment.strftime("%Y-%m-%dT%H:%M:%SZ")}
    return {"date": moment.isoformat().replace("+00:00", "Z")}


# --- preview ------------------------------------------------------------------------------


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
