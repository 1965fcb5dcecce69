"""Graph evidence for ``hybrid_graph``: keyword seeds, one bounded hop around the best
hybrid candidates, personalized PageRank, and the graph's own ranking of the records.

1. **Seeds.** Visible keyword nodes that match the query by text (one of the query's
   1–3-word phrases equals a keyword: weight 1) or by embedding (the
   ``KEYWORD_SEEDS_BY_VECTOR`` nearest keywords, through their HNSW index, with cosine
   similarity ≥ ``KEYWORD_SIMILARITY_MIN``: weight = the similarity). One statement.
2. **One hop, one statement.** From the keyword seeds and from the best hybrid
   candidates to their neighbours: keyword links (keyword–chunk, or keyword–document
   when the phrase sits in no single chunk), chunk–document, fact–entity (subject and
   object), fact–document, fact–turn, keyword–entity (the keyword's text is the entity's
   normalized name) and entity–fact–entity. Each branch is an index probe bounded by
   ``NEIGHBOURS_PER_NODE`` rows a node, and every node is read through the caller's
   scope filter, so an invisible record is never reached and never passes mass on.
3. **Density.** Personalized PageRank (damping 0.85) restarting at the keyword seeds,
   weighted by match strength: mass reaches a candidate through the keywords, documents,
   facts and entities it shares with the seeds and with the other candidates. Candidates
   restart nowhere, so a candidate's own fused score never feeds back into its density.

The result is a ranking of the target's records by density. The selector fuses it into
hybrid's ranking as one more reciprocal-rank list with a small weight (docs/SEARCH.md):
with no matching keyword the graph ranks nothing and ``hybrid_graph`` ranks as hybrid.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from django.db.models import Q

from memory.domain.entity_names import entity_normalize_key
from memory.infra.replicas import read_connection
from memory.models import Chunk, Document, Entity, Fact, Keyword, KeywordLink, Turn, fact_live_q
from memory.search.keywords import keyphrase_words
from memory.search.models import Target
from memory.search.sql import q_where_sql

KEYWORD_SEEDS_BY_VECTOR = 10
KEYWORD_SIMILARITY_MIN = 0.5
# The rows one node may bring in through one kind of edge: a common keyword links
# thousands of chunks, and the hop must stay a few index probes.
NEIGHBOURS_PER_NODE = 50
DAMPING = 0.85
ITERATIONS = 30

# ("k" keyword | "c" chunk | "d" document | "f" fact | "e" entity | "t" turn, id)
Node = tuple[str, int]
Edge = tuple[Node, Node]
_TARGET_KIND = {Target.CHUNK: "c", Target.FACT: "f", Target.ENTITY: "e", Target.TURN: "t"}

_KEYWORD = Keyword._meta.db_table
_LINK = KeywordLink._meta.db_table
_CHUNK = Chunk._meta.db_table
_FACT = Fact._meta.db_table
_ENTITY = Entity._meta.db_table
_DOCUMENT = Document._meta.db_table
_TURN = Turn._meta.db_table


def _phrases(query: str, longest: int = 3) -> list[str]:
    words = keyphrase_words(query).split()
    return [
        " ".join(words[i : i + n]) for n in range(1, longest + 1) for i in range(len(words) - n + 1)
    ]


def _rows(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    with read_connection().cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def _seed_rows(
    *, context_id: int, query: str, embedding: list[float] | None, visible: Q
) -> dict[int, tuple[str, float]]:
    """Visible keywords matching the query: id → (text, weight), in one statement."""
    link_where, link_params = q_where_sql(KeywordLink, visible)
    # A keyword is visible when one of its links is.
    seen = (
        f"EXISTS (SELECT 1 FROM {_LINK} WHERE {_LINK}.keyword_id = {_KEYWORD}.id"  # noqa: S608
        f" AND {link_where})"
    )
    sql = (
        f"SELECT {_KEYWORD}.id, {_KEYWORD}.text, 1.0::float8 FROM {_KEYWORD}"  # noqa: S608 - tables from the models
        f" WHERE {_KEYWORD}.context_id = %s AND {_KEYWORD}.text = ANY(%s) AND {seen}"
    )
    params: list[Any] = [context_id, _phrases(query), *link_params]
    if embedding is not None:
        literal = "[" + ",".join(repr(float(x)) for x in embedding) + "]"
        # Ordered by the bare distance, so the keywords' HNSW index answers it (its walk
        # keeps hnsw.ef_search candidates of every context before the filters).
        sql += (
            f" UNION ALL (SELECT {_KEYWORD}.id, {_KEYWORD}.text,"  # noqa: S608
            f" 1 - ({_KEYWORD}.embedding <=> %s::vector) FROM {_KEYWORD}"
            f" WHERE {_KEYWORD}.context_id = %s AND {_KEYWORD}.embedding IS NOT NULL"
            f" AND {seen} ORDER BY {_KEYWORD}.embedding <=> %s::vector LIMIT %s)"
        )
        params += [literal, context_id, *link_params, literal, KEYWORD_SEEDS_BY_VECTOR]
    seeds: dict[int, tuple[str, float]] = {}
    for pk, text, weight in _rows(sql, params):
        if weight >= KEYWORD_SIMILARITY_MIN and weight > seeds.get(pk, ("", 0.0))[1]:
            seeds[pk] = (text, float(weight))
    return seeds


def keyword_seeds(
    *, context_id: int, query: str, embedding: list[float] | None, visible: Q
) -> dict[int, float]:
    """Visible keywords matching the query: id → weight (1 for a text match, else the
    cosine similarity). A keyword is visible when one of its links is."""
    seeds = _seed_rows(context_id=context_id, query=query, embedding=embedding, visible=visible)
    return {pk: weight for pk, (_, weight) in seeds.items()}


def _keyword_links_branch(visible: Q) -> tuple[str, list[Any]]:
    """Seed keyword → the chunks (or documents) it is linked to, a bounded few each."""
    where, params = q_where_sql(KeywordLink, visible)
    sql = (
        "SELECT 'k', seed.id, CASE WHEN l.chunk_id IS NULL THEN 'd' ELSE 'c' END,"  # noqa: S608
        " coalesce(l.chunk_id, l.document_id) FROM seed CROSS JOIN LATERAL"
        f" (SELECT {_LINK}.chunk_id, {_LINK}.document_id FROM {_LINK}"
        f" WHERE {_LINK}.keyword_id = seed.id AND {where} LIMIT {NEIGHBOURS_PER_NODE}) l"
    )
    return sql, params


def _keyword_entities_branch(context_id: int, visible: Q) -> tuple[str, list[Any]]:
    """Seed keyword → the live entities whose normalized name it is."""
    where, params = q_where_sql(Entity, visible)
    sql = (
        f"SELECT 'k', seed.id, 'e', e.id FROM seed CROSS JOIN LATERAL"  # noqa: S608
        f" (SELECT {_ENTITY}.id FROM {_ENTITY} WHERE {_ENTITY}.context_id = %s"
        f" AND {_ENTITY}.normalized_key = seed.key AND {_ENTITY}.merged_into_id IS NULL"
        f" AND {where} LIMIT {NEIGHBOURS_PER_NODE}) e"
    )
    return sql, [context_id, *params]


def _endpoint_branch(source: str, column: str, visible: Q) -> tuple[str, list[Any]]:
    """Rows of the CTE ``source`` (``node``, ``fact``, ``subject_id``, ``object_id``) →
    fact–entity edges to the visible endpoints."""
    where, params = q_where_sql(Entity, visible)
    sql = (
        f"SELECT 'f', {source}.fact, 'e', {_ENTITY}.id FROM {source}"  # noqa: S608
        f" JOIN {_ENTITY} ON {_ENTITY}.id = {source}.{column} AND {where}"
    )
    return sql, params


def _chunk_branches(visible: Q) -> list[tuple[str, list[Any]]]:
    link_where, link_params = q_where_sql(KeywordLink, visible)
    return [
        (
            f"SELECT 'c', {_LINK}.chunk_id, 'k', {_LINK}.keyword_id FROM {_LINK}"  # noqa: S608
            f" WHERE {_LINK}.chunk_id = ANY(%s) AND {link_where}",
            ["@candidates", *link_params],
        ),
        (
            f"SELECT 'c', {_CHUNK}.id, 'd', {_CHUNK}.document_id FROM {_CHUNK}"  # noqa: S608
            f" WHERE {_CHUNK}.id = ANY(%s)",
            ["@candidates"],
        ),
        _keyword_links_branch(visible),
    ]


def _fact_branches(context_id: int, visible: Q) -> tuple[str, list[Any], list[Any]]:
    """The candidate facts' rows as a CTE ``hop`` and the edges from them."""
    doc_where, doc_params = q_where_sql(Document, visible)
    turn_where, turn_params = q_where_sql(Turn, visible)
    hop = (
        f"SELECT {_FACT}.id AS fact, {_FACT}.subject_id, {_FACT}.object_id,"  # noqa: S608
        f" {_FACT}.document_id, {_FACT}.turn_id FROM {_FACT} WHERE {_FACT}.id = ANY(%s)"
    )
    branches = [
        _endpoint_branch("hop", "subject_id", visible),
        _endpoint_branch("hop", "object_id", visible),
        (
            f"SELECT 'f', hop.fact, 'd', {_DOCUMENT}.id FROM hop"  # noqa: S608
            f" JOIN {_DOCUMENT} ON {_DOCUMENT}.id = hop.document_id AND {doc_where}",
            doc_params,
        ),
        (
            f"SELECT 'f', hop.fact, 't', {_TURN}.id FROM hop"  # noqa: S608
            f" JOIN {_TURN} ON {_TURN}.id = hop.turn_id AND {turn_where}",
            turn_params,
        ),
        _keyword_entities_branch(context_id, visible),
        _keyword_links_branch(visible),
    ]
    return hop, ["@candidates"], branches


def _facts_of(node_column: str, visible: Q, *, order: str = "") -> tuple[str, list[Any]]:
    """A lateral read of the visible live facts whose ``node_column`` is ``c.id``."""
    where, params = q_where_sql(Fact, visible & fact_live_q())
    sql = (
        f"SELECT {_FACT}.id, {_FACT}.subject_id, {_FACT}.object_id FROM {_FACT}"  # noqa: S608
        f" WHERE {_FACT}.{node_column} = c.id AND {where} {order} LIMIT {NEIGHBOURS_PER_NODE}"
    )
    return sql, params


def _entity_hop(visible: Q) -> tuple[str, list[Any]]:
    """Each candidate entity's newest visible live facts, as subject and as object."""
    recent = f"ORDER BY {_FACT}.recorded_at DESC"
    as_subject, p1 = _facts_of("subject_id", visible, order=recent)
    as_object, p2 = _facts_of("object_id", visible, order=recent)
    sql = (
        "SELECT c.id AS node, f.id AS fact, f.subject_id, f.object_id"  # noqa: S608
        " FROM unnest(%s::bigint[]) AS c(id) CROSS JOIN LATERAL"
        f" (({as_subject}) UNION ALL ({as_object})) f"
    )
    return sql, ["@candidates", *p1, *p2]


def _turn_hop(visible: Q) -> tuple[str, list[Any]]:
    """The facts extracted from each candidate turn."""
    facts, params = _facts_of("turn_id", visible)
    sql = (
        "SELECT c.id AS node, f.id AS fact, f.subject_id, f.object_id"  # noqa: S608
        f" FROM unnest(%s::bigint[]) AS c(id) CROSS JOIN LATERAL ({facts}) f"
    )
    return sql, ["@candidates", *params]


def _hop_statement(*, context_id: int, target: Target, visible: Q) -> tuple[str, list[Any]]:
    """One statement for the whole hop: CTEs ``seed`` (the keyword seeds) and, for facts,
    entities and turns, ``hop`` (the candidates' facts), then a UNION ALL of the edge
    branches. ``@candidates`` marks where the candidate ids go."""
    ctes = ["seed AS (SELECT * FROM unnest(%s::bigint[], %s::text[]) AS s(id, key))"]
    params: list[Any] = ["@seed_ids", "@seed_keys"]
    if target == Target.CHUNK:
        branches = _chunk_branches(visible)
    elif target == Target.FACT:
        hop, hop_params, branches = _fact_branches(context_id, visible)
        ctes.append(f"hop AS ({hop})")
        params += hop_params
    else:
        hop, hop_params = _entity_hop(visible) if target == Target.ENTITY else _turn_hop(visible)
        ctes.append(f"hop AS ({hop})")
        params += hop_params
        kind = _TARGET_KIND[target]
        branches = [
            (f"SELECT '{kind}', hop.node, 'f', hop.fact FROM hop", []),  # noqa: S608
            _endpoint_branch("hop", "subject_id", visible),
            _endpoint_branch("hop", "object_id", visible),
            _keyword_entities_branch(context_id, visible),
        ]
    sql = "WITH " + ", ".join(ctes) + " " + " UNION ALL ".join(f"({b})" for b, _ in branches)
    for _, branch_params in branches:
        params += branch_params
    return sql, params


def graph_edges(
    *,
    context_id: int,
    target: Target,
    candidates: list[int],
    seeds: dict[int, tuple[str, float]],
    visible: Q,
) -> set[Edge]:
    """The edges one hop from the keyword seeds and from ``candidates`` (visible records
    of ``target``), read in one statement."""
    sql, params = _hop_statement(context_id=context_id, target=target, visible=visible)
    values = {
        "@seed_ids": list(seeds),
        "@seed_keys": [entity_normalize_key(text) for text, _ in seeds.values()],
        "@candidates": candidates,
    }
    bound = [values[p] if isinstance(p, str) and p in values else p for p in params]
    return {((a, int(x)), (b, int(y))) for a, x, b, y in _rows(sql, bound) if y is not None}


def _pagerank(edges: set[Edge], restart: dict[Node, float]) -> dict[Node, float]:
    """Personalized PageRank on the undirected graph (power iteration); mass at nodes
    without edges returns to the restart distribution."""
    nodes = sorted({n for edge in edges for n in edge} | set(restart))
    index = {node: i for i, node in enumerate(nodes)}
    pairs = [(index[a], index[b]) for a, b in edges if a != b]
    src = np.array([a for a, b in pairs] + [b for a, b in pairs], dtype=np.int64)
    dst = np.array([b for a, b in pairs] + [a for a, b in pairs], dtype=np.int64)
    degree = np.bincount(src, minlength=len(nodes)).astype(np.float64)
    p = np.zeros(len(nodes))
    for node, weight in restart.items():
        p[index[node]] = weight
    r = p.copy()
    for _ in range(ITERATIONS):
        share = np.divide(r, degree, out=np.zeros_like(r), where=degree > 0)
        spread = DAMPING * np.bincount(dst, weights=share[src], minlength=len(nodes))
        dangling = DAMPING * r[degree == 0].sum()
        r = (1 - DAMPING + dangling) * p + spread
    return {node: float(r[i]) for node, i in index.items()}


def graph_ranking(
    *,
    context_id: int,
    target: Target,
    candidates: list[int],
    query: str,
    embedding: list[float] | None,
    visible: Q,
) -> list[int]:
    """Records of ``target`` the graph reaches from the query's keyword seeds, densest
    first (ties by id); empty when no visible keyword matches the query."""
    seeds = _seed_rows(context_id=context_id, query=query, embedding=embedding, visible=visible)
    total = sum(weight for _, weight in seeds.values())
    if not seeds or total <= 0:
        return []
    edges = graph_edges(
        context_id=context_id, target=target, candidates=candidates, seeds=seeds, visible=visible
    )
    if not edges:
        return []
    restart = {("k", pk): weight / total for pk, (_, weight) in seeds.items()}
    kind = _TARGET_KIND[target]
    density = {
        pk: flow
        for (node_kind, pk), flow in _pagerank(edges, restart).items()
        if node_kind == kind and flow > 0
    }
    return sorted(density, key=lambda pk: (-density[pk], pk))
