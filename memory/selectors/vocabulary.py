"""The vocabulary an extraction prompt offers for reuse, gathered for one write scope.

Visibility: a write into scope ``org/acme/user/alex`` sees what lives in that scope and its
ancestors (``org/acme/user``, ``org/acme``, ``org``) that the writer may read — a user's
memory builds on the organisation's, never on a sibling user's private one. Lists:

- entity names and types: at most 500, most recently updated first; when more than 500
  are visible, up to 100 places go first to entities the turn names (key or alias match)
  and then to its embedding neighbours (at most 40, similarity ≥ 0.3), so an old but
  relevant entity is still offered;
- relation labels: at most 100, most used (all but retracted facts);
- attribute keys: at most 100, live facts only (current: superseded or expired facts do
  not keep a key alive), the 75 most used, then the last 25 places for the most recently
  used keys not already listed;
- action verbs: at most 100, the same 75 most used + 25 most recent rule.

Counts are observations (a re-observed fact counts each time) and come from
``PredicateUsage`` (kept by triggers on facts), not from counting facts.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from django.db import transaction

from memory.domain.entity_names import LEGAL_SUFFIXES
from memory.infra.embeddings import embedding_model_id
from memory.infra.replicas import read_connection
from memory.kernel.scopes import Grants
from memory.models import Context, Fact, FactKind, FactTrust, PredicateStatus

ENTITY_PLACES = 500
SIMILAR_PLACES = 100
LABEL_PLACES = 100
RECENT_PLACES = 25
# Below this cosine similarity an embedding neighbour is not worth a place.
SIMILAR_MIN = 0.3
MAX_NGRAMS = 4_000
HNSW_EF_SEARCH = 64
NEIGHBOUR_PLACES = 40  # of the SIMILAR_PLACES, at most this many by embedding
# The embedder reads a few hundred tokens at most: the start of a long turn stands for it.
EMBED_CHARS = 2_000

Why = Literal["named", "similar", "recent"]


@dataclass(frozen=True)
class VocabularyEntity:
    id: int
    name: str
    type: str
    why: Why


@dataclass(frozen=True)
class Vocabulary:
    scope: str
    visible_scopes: tuple[str, ...]
    entities: tuple[VocabularyEntity, ...]
    relation_labels: tuple[str, ...]
    attribute_keys: tuple[str, ...]
    action_verbs: tuple[str, ...]
    # More visible entities than places: the list is a selection, similarity first.
    entities_truncated: bool


@dataclass(frozen=True)
class _Usage:
    name: str
    used: int
    live: int
    last_used_at: float  # epoch seconds; 0 when never stamped
    observed: bool = False  # drift: not registered, not yet reviewed


def scope_lineage(scope: str) -> list[str]:
    """``a/b/c`` → ``["a/b/c", "a/b", "a"]``: the scope and its ancestors, nearest first."""
    parts = scope.split("/")
    return ["/".join(parts[:n]) for n in range(len(parts), 0, -1)]


def scopes_visible_from(*, scope: str, grants: Grants) -> list[str]:
    """The scopes a write into ``scope`` builds on: its lineage, within the read grants."""
    return [s for s in scope_lineage(scope) if grants.can_read(s)]


def vocabulary_gather(
    *,
    context: Context,
    scope: str,
    grants: Grants,
    text: str = "",
    embed: Callable[[str], list[float]] | None = None,
) -> Vocabulary:
    """The four lists for a write into ``scope`` (``scope`` already validated).

    Queries: usage sums (1); recent entities (1); rejected claims (1, three more when
    there are any); and only when more than 500 entities are visible and a turn is given:
    entities the turn names (1), then — with ``embed``, which turns the text into a
    vector, called only then — its embedding neighbours (1).
    """
    visible = scopes_visible_from(scope=scope, grants=grants)
    if not visible:
        return Vocabulary(scope, (), (), (), (), (), False)
    usage = _without_drift(context, _usage(context=context, scopes=visible))
    entities, truncated = _entities(context=context, scopes=visible, text=text, embed=embed)
    hidden_entities, hidden_names = _rejected_forms(context, visible)
    usage = {k: [u for u in items if u.name not in hidden_names] for k, items in usage.items()}
    return Vocabulary(
        scope=scope,
        visible_scopes=tuple(visible),
        entities=tuple(e for e in entities if e.id not in hidden_entities),
        relation_labels=tuple(_most_used(usage[FactKind.RELATION], count=lambda u: u.used)),
        attribute_keys=tuple(
            _most_used_then_recent([u for u in usage[FactKind.ATTRIBUTE] if u.live > 0], "live")
        ),
        action_verbs=tuple(
            _most_used_then_recent([u for u in usage[FactKind.ACTION] if u.used > 0], "used")
        ),
        entities_truncated=truncated,
    )


def _rejected_forms(context: Context, scopes: list[str]) -> tuple[set[int], set[str]]:
    """What a curator's rejections say the prompt must never offer again: the entities
    only rejected claims name and the unregistered predicates only rejected claims use.
    One query (the partial index fact_rejected), a second only when there are any."""
    rejected = list(
        Fact.objects.filter(
            context=context, trust=FactTrust.REJECTED, scope__in=scopes
        ).values_list(
            "subject_id", "object_id", "predicate_id", "predicate__name", "predicate__status"
        )[:1000]
    )
    if not rejected:
        return set(), set()
    entity_ids = {e for s, o, *_ in rejected for e in (s, o) if e is not None}
    predicate_ids = {p for _, _, p, _, status in rejected if status == PredicateStatus.OBSERVED}
    trusted = Fact.objects.filter(context=context, trust=FactTrust.TRUSTED)
    named = set(
        trusted.filter(subject_id__in=entity_ids).values_list("subject_id", flat=True).distinct()
    ) | set(trusted.filter(object_id__in=entity_ids).values_list("object_id", flat=True).distinct())
    used = set(
        trusted.filter(predicate_id__in=predicate_ids)
        .values_list("predicate_id", flat=True)
        .distinct()
    )
    names = {n for _, _, p, n, _ in rejected if p in predicate_ids and p not in used}
    return entity_ids - named, names


# Raw SQL for the two gatherer queries: they run before every prompt, and Django's
# compilation and datetime parsing cost more than PostgreSQL's work here.
_USAGE_SQL = """
SELECT u.kind, p.name, sum(u.used), sum(u.live),
       coalesce(extract(epoch FROM max(u.last_used_at)), 0)::float8, p.status = %s
FROM memory_predicateusage u
JOIN memory_predicate p ON p.id = u.predicate_id
WHERE u.context_id = %s AND u.scope = ANY(%s) AND u.kind = ANY(%s)
  AND p.status <> %s AND NOT p.exclude_from_prompt
GROUP BY u.kind, p.name, p.status
"""


def _usage(*, context: Context, scopes: list[str]) -> dict[str, list[_Usage]]:
    kinds = [FactKind.RELATION, FactKind.ATTRIBUTE, FactKind.ACTION]
    by_kind: dict[str, list[_Usage]] = {kind: [] for kind in kinds}
    with read_connection().cursor() as cursor:
        cursor.execute(
            _USAGE_SQL,
            [
                PredicateStatus.OBSERVED,
                context.pk,
                scopes,
                [str(k) for k in kinds],
                PredicateStatus.REJECTED,
            ],
        )
        for kind, name, used, live, last, observed in cursor.fetchall():
            by_kind[kind].append(_Usage(name, int(used), int(live), float(last), bool(observed)))
    return by_kind


def _without_drift(context: Context, by_kind: dict[str, list[_Usage]]) -> dict[str, list[_Usage]]:
    """The prompt must not teach drift: an observed form with a confident registered match
    (``is_located_in`` → ``located_in``) counts towards that registered name instead.
    Aliased forms are no rows of their own and rejected ones are not selected. Without the
    embedder only spelling (typos, inverse names) can match; the lists still work."""
    drift = sorted({u.name for items in by_kind.values() for u in items if u.observed})
    if not drift:
        return by_kind
    matches = _confident_matches(context, drift)
    out: dict[str, list[_Usage]] = {}
    for kind, items in by_kind.items():
        merged: dict[str, _Usage] = {}
        for u in items:
            name = matches.get(u.name, u.name) if u.observed else u.name
            prior = merged.get(name)
            merged[name] = (
                _Usage(name, u.used, u.live, u.last_used_at, u.observed and name == u.name)
                if prior is None
                else _Usage(
                    name,
                    prior.used + u.used,
                    prior.live + u.live,
                    max(prior.last_used_at, u.last_used_at),
                    prior.observed,
                )
            )
        out[kind] = list(merged.values())
    return out


def _confident_matches(context: Context, names: list[str]) -> dict[str, str]:
    from memory.kernel.errors import ServiceUnavailable
    from memory.selectors.drift import drift_ranker

    try:
        ranker = drift_ranker(context=context)
        ranker.prepare(names)
        ranked = {name: ranker.rank(name, limit=1) for name in names}
    except ServiceUnavailable:
        return {}
    return {name: top[0].name for name, top in ranked.items() if top and top[0].confident}


def _most_used(items: list[_Usage], *, count: Any) -> list[str]:
    ranked = sorted((u for u in items if count(u) > 0), key=lambda u: (-count(u), u.name))
    return [u.name for u in ranked[:LABEL_PLACES]]


def _most_used_then_recent(items: list[_Usage], field: Literal["used", "live"]) -> list[str]:
    """The most used, keeping the last RECENT_PLACES for recent keys not already listed."""
    by_count = sorted(items, key=lambda u: (-getattr(u, field), u.name))
    if len(by_count) <= LABEL_PLACES:
        return [u.name for u in by_count]
    head = by_count[: LABEL_PLACES - RECENT_PLACES]
    rest = sorted(
        by_count[len(head) :],
        key=lambda u: (-u.last_used_at, u.name),
    )
    return [u.name for u in head] + [u.name for u in rest[:RECENT_PLACES]]


def _entities(
    *,
    context: Context,
    scopes: list[str],
    text: str,
    embed: Callable[[str], list[float]] | None,
) -> tuple[list[VocabularyEntity], bool]:
    recent = _recent(context, scopes)
    truncated = len(recent) > ENTITY_PLACES
    if not truncated or not text:
        return [VocabularyEntity(i, n, t, "recent") for i, n, t in recent[:ENTITY_PLACES]], (
            truncated
        )
    chosen: dict[int, VocabularyEntity] = {}
    for entity_id, name, type_ in _named_in(context=context, scopes=scopes, text=text):
        chosen.setdefault(entity_id, VocabularyEntity(entity_id, name, type_, "named"))
    if embed is not None and len(chosen) < SIMILAR_PLACES:
        vector = embed(text[:EMBED_CHARS])
        for entity_id, name, type_ in _neighbours(context=context, scopes=scopes, vector=vector):
            if len(chosen) >= SIMILAR_PLACES:
                break
            chosen.setdefault(entity_id, VocabularyEntity(entity_id, name, type_, "similar"))
    for entity_id, name, type_ in recent:
        if len(chosen) >= ENTITY_PLACES:
            break
        chosen.setdefault(entity_id, VocabularyEntity(entity_id, name, type_, "recent"))
    return list(chosen.values()), truncated


def _recent(context: Context, scopes: list[str]) -> list[tuple[int, str, str]]:
    """The newest live entities over the scopes (one more than the places, to tell whether
    there are more): a UNION ALL of per-scope top-Ns, each one short range of the
    ``entity_scope_recent`` index."""
    part = (
        "(SELECT id, name, type, updated_at FROM memory_entity "
        "WHERE context_id = %s AND scope = %s AND merged_into_id IS NULL "
        "ORDER BY updated_at DESC, id DESC LIMIT %s)"
    )
    sql = (
        "SELECT id, name, type FROM ("  # noqa: S608  (a fixed template; values are parameters)
        + " UNION ALL ".join([part] * len(scopes))
        + ") AS recent ORDER BY updated_at DESC, id DESC LIMIT %s"
    )
    params: list[Any] = []
    for scope in scopes:
        params += [context.pk, scope, ENTITY_PLACES + 1]
    with read_connection().cursor() as cursor:
        cursor.execute(sql, [*params, ENTITY_PLACES + 1])
        return [(int(i), str(n), str(t)) for i, n, t in cursor.fetchall()]


def turn_ngrams(text: str) -> list[str]:
    """Word n-grams (1–4) of ``text`` in normalized-key form, as entity keys are stored."""
    folded = unicodedata.normalize("NFKC", text).casefold().replace("&", " and ")
    tokens = re.sub(r"[\W_]+", " ", folded).split()
    grams: dict[str, None] = {}
    # Position by position, so a long turn's cap still covers its beginning fully.
    for start in range(len(tokens)):
        for n in range(1, min(4, len(tokens) - start) + 1):
            gram = tokens[start : start + n]
            while len(gram) > 1 and gram[-1] in LEGAL_SUFFIXES:
                gram = gram[:-1]
            grams[" ".join(gram)] = None
            if len(grams) >= MAX_NGRAMS:
                return list(grams)
    return list(grams)


# No ORDER BY here: ordered by recency, the planner walks the whole recency index hoping
# for matches; unordered, it reads the few rows the key index and the alias GIN index name.
_NAMED_SQL = """
SELECT id, name, type, extract(epoch FROM updated_at)::float8
FROM memory_entity
WHERE context_id = %s AND merged_into_id IS NULL AND scope = ANY(%s)
  AND (normalized_key = ANY(%s::varchar[]) OR alias_keys && %s::varchar[])
LIMIT %s
"""
NAMED_READ_LIMIT = 2_000


def _named_in(*, context: Context, scopes: list[str], text: str) -> list[tuple[int, str, str]]:
    """Entities whose key or an alias key is a word n-gram of the turn, newest first."""
    grams = turn_ngrams(text)
    if not grams:
        return []
    with read_connection().cursor() as cursor:
        cursor.execute(_NAMED_SQL, [context.pk, scopes, grams, grams, NAMED_READ_LIMIT])
        rows = cursor.fetchall()
    rows.sort(key=lambda r: (-r[3], -r[0]))
    return [(int(i), str(n), str(t)) for i, n, t, _ in rows[:SIMILAR_PLACES]]


_NEIGHBOURS_SQL = """
SELECT id, name, type, embedding <=> %s::vector
FROM memory_entity
WHERE context_id = %s AND merged_into_id IS NULL AND scope = ANY(%s)
  AND embedding IS NOT NULL AND embedding_model = %s
ORDER BY embedding <=> %s::vector
LIMIT %s
"""


def _neighbours(
    *, context: Context, scopes: list[str], vector: list[float]
) -> list[tuple[int, str, str]]:
    """The turn's nearest entities (HNSW), kept when similarity ≥ SIMILAR_MIN."""
    literal = "[" + ",".join(f"{x:.7g}" for x in vector) + "]"
    connection = read_connection()  # a replica in a read scope
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        # A scope filter drops HNSW candidates after the index scan: look a little further
        # than the default, not as far as resolution does (this runs before every prompt).
        cursor.execute(f"SET LOCAL hnsw.ef_search = {HNSW_EF_SEARCH}")
        # Vectors of another model (before a reembed) are not comparable with the turn's.
        cursor.execute(
            _NEIGHBOURS_SQL,
            [literal, context.pk, scopes, embedding_model_id(), literal, NEIGHBOUR_PLACES],
        )
        rows = cursor.fetchall()
    return [(int(i), str(n), str(t)) for i, n, t, d in rows if 1.0 - float(d) >= SIMILAR_MIN]
