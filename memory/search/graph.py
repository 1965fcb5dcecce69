"""Graph density for ``hybrid_graph``: keyword seeds, a small visible graph around the
hybrid candidates, and personalized PageRank.

1. **Seeds.** Keyword nodes that match the query by text (the query's 1–3-word phrases
   equal a keyword) or by embedding (the ``KEYWORD_SEEDS_BY_VECTOR`` nearest keywords
   with cosine similarity ≥ ``KEYWORD_SIMILARITY_MIN``).
2. **Expansion.** Two hops from the seeds and from the hybrid candidates over keyword
   links (keyword–chunk, or keyword–document when the phrase sits in no single chunk),
   chunk–document, the
   documents' facts (``Fact.document``), fact–entity (subject and object) and
   keyword–entity (the keyword's text is the entity's normalized name), and turn–fact
   (the facts extracted from a turn, ``Fact.turn``). Every node is
   read through the caller's scope filter, so invisible records are never reached and
   never pass mass on. Each neighbour query reads at most ``NEIGHBOURS_CAP`` rows.
3. **Density.** Personalized PageRank (damping 0.85) restarting at the keyword seeds,
   weighted by match strength. The graph around the candidates is built too, so mass
   reaches a candidate through the keywords, documents, facts and entities it shares
   with other records near the query. A record's density is its PageRank, scaled so the
   densest record has 1. Candidates restart nowhere, so a candidate's own fused score
   never feeds back into its boost; with no matching keyword there is no boost and
   hybrid_graph ranks exactly like hybrid.

The selector combines: score = (1 − α) · fused / max fused + α · density.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import numpy as np
from django.db.models import Exists, OuterRef, Q, QuerySet
from pgvector.django import CosineDistance

from memory.domain.entity_names import entity_normalize_key
from memory.models import Chunk, Document, Entity, Fact, Keyword, KeywordLink, Turn, fact_live_q
from memory.search.keywords import keyphrase_words
from memory.search.models import Target

KEYWORD_SEEDS_BY_VECTOR = 10
KEYWORD_SIMILARITY_MIN = 0.5
NEIGHBOURS_CAP = 500
HOPS = 2
DAMPING = 0.85
ITERATIONS = 30

# ("k" keyword | "c" chunk | "d" document | "f" fact | "e" entity | "t" turn, id)
Node = tuple[str, int]
_TARGET_KIND = {Target.CHUNK: "c", Target.FACT: "f", Target.ENTITY: "e", Target.TURN: "t"}


def _phrases(query: str, longest: int = 3) -> list[str]:
    words = keyphrase_words(query).split()
    return [
        " ".join(words[i : i + n]) for n in range(1, longest + 1) for i in range(len(words) - n + 1)
    ]


def keyword_seeds(
    *, context_id: int, query: str, embedding: list[float] | None, visible: Q
) -> dict[int, float]:
    """Visible keywords matching the query: id → weight (1 for a text match, else the
    cosine similarity). A keyword is visible when one of its links is."""
    keywords = Keyword.objects.filter(context_id=context_id).filter(
        Exists(KeywordLink.objects.filter(visible, keyword=OuterRef("pk")))
    )
    seeds: dict[int, float] = {}
    if embedding is not None:
        nearest = (
            keywords.filter(embedding__isnull=False)
            .annotate(distance=CosineDistance("embedding", embedding))
            .order_by("distance", "pk")
            .values_list("pk", "distance")[:KEYWORD_SEEDS_BY_VECTOR]
        )
        for pk, distance in nearest:
            if 1.0 - distance >= KEYWORD_SIMILARITY_MIN:
                seeds[pk] = 1.0 - distance
    for pk in keywords.filter(text__in=_phrases(query)).values_list("pk", flat=True):
        seeds[pk] = 1.0
    return seeds


def _neighbours(kind: str, ids: set[int], *, context_id: int, visible: Q) -> set[tuple[Node, Node]]:
    """Edges from nodes of one kind to their visible neighbours."""
    edges: set[tuple[Node, Node]] = set()
    cap = NEIGHBOURS_CAP
    if kind == "k":
        for keyword, chunk, document in KeywordLink.objects.filter(
            visible, keyword_id__in=ids
        ).values_list("keyword_id", "chunk_id", "document_id")[:cap]:
            edges.add((("k", keyword), ("c", chunk) if chunk else ("d", document)))
        texts = dict(Keyword.objects.filter(pk__in=ids).values_list("pk", "text"))
        by_key = {entity_normalize_key(text): pk for pk, text in texts.items()}
        for entity, key in Entity.objects.filter(
            visible, context_id=context_id, merged_into__isnull=True, normalized_key__in=by_key
        ).values_list("pk", "normalized_key")[:cap]:
            edges.add((("k", by_key[key]), ("e", entity)))
    elif kind == "c":
        for chunk, document in Chunk.objects.filter(visible, pk__in=ids).values_list(
            "pk", "document_id"
        ):
            edges.add((("c", chunk), ("d", document)))
        for chunk, keyword in KeywordLink.objects.filter(visible, chunk_id__in=ids).values_list(
            "chunk_id", "keyword_id"
        )[:cap]:
            edges.add((("c", chunk), ("k", keyword)))
    elif kind == "d":
        for document, keyword in KeywordLink.objects.filter(
            visible, document_id__in=ids, chunk__isnull=True
        ).values_list("document_id", "keyword_id")[:cap]:
            edges.add((("d", document), ("k", keyword)))
        for fact, document in (
            _facts(visible).filter(document_id__in=ids).values_list("pk", "document_id")[:cap]
        ):
            edges.add((("d", document), ("f", fact)))
    elif kind == "f":
        rows = _facts(visible).filter(pk__in=ids).values_list(*_FACT_COLUMNS)
        edges |= _fact_edges(list(rows), visible=visible)
        for fact, turn in (
            _facts(visible)
            .filter(pk__in=ids, turn__isnull=False)
            .filter(Exists(Turn.objects.filter(visible, pk=OuterRef("turn_id"))))
            .values_list("pk", "turn_id")[:cap]
        ):
            edges.add((("f", fact), ("t", turn)))
    elif kind == "t":
        # A turn reaches the facts extracted from it, and through them their entities.
        for fact, turn in (
            _facts(visible).filter(turn_id__in=ids).values_list("pk", "turn_id")[:cap]
        ):
            edges.add((("t", turn), ("f", fact)))
    elif kind == "e":
        facts = _facts(visible).filter(Q(subject_id__in=ids) | Q(object_id__in=ids))
        rows = facts.order_by("-recorded_at", "-pk").values_list(*_FACT_COLUMNS)[:cap]
        edges |= _fact_edges(list(rows), visible=visible)
    return edges


_FACT_COLUMNS = ("pk", "subject_id", "object_id", "document_id")


def _facts(visible: Q) -> QuerySet[Fact]:
    return Fact.objects.filter(visible, fact_live_q())


def _fact_edges(
    rows: list[tuple[int, int, int | None, int | None]], *, visible: Q
) -> set[tuple[Node, Node]]:
    """Fact–entity and fact–document edges, to the visible endpoints only."""
    entity_ids = {s for _, s, _, _ in rows} | {o for _, _, o, _ in rows if o}
    document_ids = {d for _, _, _, d in rows if d}
    seen_entities = set(
        Entity.objects.filter(visible, pk__in=entity_ids).values_list("pk", flat=True)
    )
    seen_documents = set(
        Document.objects.filter(visible, pk__in=document_ids).values_list("pk", flat=True)
    )
    edges: set[tuple[Node, Node]] = set()
    for fact, subject, object_, document in rows:
        for entity in (subject, object_):
            if entity in seen_entities:
                edges.add((("f", fact), ("e", entity)))
        if document in seen_documents:
            edges.add((("f", fact), ("d", document)))
    return edges


def _graph(seeds: Iterable[Node], *, context_id: int, visible: Q) -> set[tuple[Node, Node]]:
    """Edges found within ``HOPS`` hops of the seeds."""
    edges: set[tuple[Node, Node]] = set()
    seen: set[Node] = set(seeds)
    frontier = set(seen)
    for _ in range(HOPS):
        by_kind: dict[str, set[int]] = defaultdict(set)
        for kind, pk in frontier:
            by_kind[kind].add(pk)
        found: set[tuple[Node, Node]] = set()
        for kind in sorted(by_kind):
            found |= _neighbours(kind, by_kind[kind], context_id=context_id, visible=visible)
        edges |= found
        frontier = {node for edge in found for node in edge} - seen
        seen |= frontier
        if not frontier:
            break
    return edges


def _normalized(weights: dict[Node, float]) -> dict[Node, float]:
    total = sum(weights.values())
    return {node: w / total for node, w in weights.items()} if total > 0 else {}


def _pagerank(edges: set[tuple[Node, Node]], restart: dict[Node, float]) -> dict[Node, float]:
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


def graph_boosts(
    *,
    context_id: int,
    target: Target,
    candidates: dict[int, float],
    query: str,
    embedding: list[float] | None,
    visible: Q,
) -> dict[int, float]:
    """Graph density in [0, 1] of the candidates and of the target records the
    expansion reached (id → density); empty when no visible keyword matches the query."""
    kind = _TARGET_KIND[target]
    keywords = keyword_seeds(
        context_id=context_id, query=query, embedding=embedding, visible=visible
    )
    restart = _normalized({("k", pk): weight for pk, weight in keywords.items()})
    if not restart:
        return {}
    seeds = set(restart) | {(kind, pk) for pk in candidates}
    edges = _graph(seeds, context_id=context_id, visible=visible)
    if not edges:
        return {}
    rank = _pagerank(edges, restart)
    targets = {pk: flow for (node_kind, pk), flow in rank.items() if node_kind == kind}
    top = max(targets.values(), default=0.0)
    if top <= 0:
        return {}
    return {pk: flow / top for pk, flow in targets.items() if flow > 0}
