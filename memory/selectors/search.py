"""Search over chunks, turns, facts or entities: bm25, vector, hybrid and hybrid_graph.

One entry point, ``search``, for the API, the dashboard and ``manage.py search``. Every
mode filters by the caller's read grants, narrowed by the request's scope patterns,
and every result explains itself: its BM25 rank and score, its vector rank and cosine
similarity, the fused RRF score and the graph boost (each null when the mode does not
use it or the result did not appear in that list). Turns can be narrowed to one
conversation (``thread``). docs/SEARCH.md has the details.

The results and the reading of their records are in ``search_results``; how the ranked
lists become one score, in ``search_scoring``.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Literal

from django.db.models import Q

from memory.domain.access import ContextAccess
from memory.infra.embeddings import embed_texts, embedder_unavailable
from memory.infra.metrics import SEARCH_SECONDS
from memory.kernel.errors import ValidationFailed
from memory.models import Turn
from memory.models.turn import MAX_THREAD_CHARS
from memory.search.bm25 import bm25_rank, corpus_visible_sql
from memory.search.fusion import rrf_fuse
from memory.search.models import Target
from memory.search.turn_fusion import TURN_FUSION_DEPTH
from memory.search.vector import vector_rank
from memory.selectors.search_results import (
    Explain,
    RankScore,
    SearchResult,
    result_cosine,
    results_hydrate,
)
from memory.selectors.search_scoring import (
    below_floor,
    best_refs,
    graph_scores,
    mode_scores,
    trusted_only,
    turn_scores,
    turns_only,
)

Mode = Literal["bm25", "vector", "hybrid", "hybrid_graph"]
SearchTarget = Literal["all", "chunks", "turns", "facts", "entities"]
MODES: tuple[str, ...] = ("bm25", "vector", "hybrid", "hybrid_graph")
TARGETS: dict[str, Target] = {
    "chunks": Target.CHUNK,
    "turns": Target.TURN,
    "facts": Target.FACT,
    "entities": Target.ENTITY,
}
# ``all``: what a memory holds for an agent to read, each result typed.
ALL_TARGET = "all"
ALL_TARGETS: tuple[str, ...] = ("turns", "chunks", "facts")
TARGET_CHOICES: tuple[str, ...] = (ALL_TARGET, *TARGETS)
MAX_K = 1000
MAX_QUERY_CHARS = 2000
# Query embeddings run here (the local model serializes its calls itself; an API
# embedder may run a few at once).
_EMBEDDER = ThreadPoolExecutor(max_workers=4, thread_name_prefix="search-embed")
# How deep each list is read before fusion: enough that a result ranked k-th by one
# method and unseen by the other still gets its fair share of the fused score.
FUSION_DEPTH_MIN = 50
# hybrid_graph's hop starts from the best max(k, this) hybrid candidates.
GRAPH_SEEDS_MIN = 10


@dataclass(frozen=True)
class QueryVector:
    """A query's embedding on its way, shared by several searches of the same text (the
    memory context searches facts, chunks and turns for one query: one model call)."""

    text: str
    pending: Future[list[list[float]]]


def query_vector_start(query: str) -> QueryVector:
    """Start embedding ``query`` (as ``search`` cleans it) in the background."""
    text = query.strip()
    return QueryVector(text=text, pending=_EMBEDDER.submit(embed_texts, [text]))


@dataclass
class SearchResponse:
    results: list[SearchResult]
    took_ms: float
    # Results left out by ``vector_floor``: found by vector similarity alone, below it.
    hidden: int = 0


def search_visible_q(*, access: ContextAccess, scopes: list[str] | None) -> Q:
    """The caller's read grants, narrowed to ``scopes`` patterns when given."""
    grants = access.grants.narrowed(scopes) if scopes else access.grants
    return grants.read_q("scope")


def _thread_clean(thread: str | None, *, target: str) -> str | None:
    """The thread filter as turns store it (whitespace runs as one space)."""
    if thread is None:
        return None
    if target != "turns":
        raise ValidationFailed(
            "the thread filter applies to target turns only", code="thread_needs_turns"
        )
    cleaned = " ".join(thread.split())
    if not cleaned or len(cleaned) > MAX_THREAD_CHARS or "\x00" in cleaned:
        raise ValidationFailed(
            f"thread must have 1 to {MAX_THREAD_CHARS} characters", code="invalid_thread"
        )
    return cleaned


def _thread_sql(
    visible_sql: tuple[str, list[object]], thread: str | None
) -> tuple[str, list[object]]:
    """The BM25 visibility fragment narrowed to one conversation's turns."""
    if thread is None:
        return visible_sql
    where, params = visible_sql
    turn_table = Turn._meta.db_table
    return (
        f"({where}) AND (SELECT t.thread FROM {turn_table} t"  # noqa: S608 - a model's table
        " WHERE t.id = search_searchdoc.turn_id) = %s",
        [*params, thread],
    )


def _validate(*, query: str, mode: str, k: int, target: str, graph_alpha: float) -> str:
    if mode not in MODES:
        raise ValidationFailed(f"mode must be one of {', '.join(MODES)}", code="invalid_mode")
    if target not in TARGET_CHOICES:
        raise ValidationFailed(
            f"target must be one of {', '.join(TARGET_CHOICES)}", code="invalid_target"
        )
    if not 1 <= k <= MAX_K:
        raise ValidationFailed(f"k must be between 1 and {MAX_K}", code="invalid_k")
    if not 0.0 <= graph_alpha <= 1.0:
        raise ValidationFailed("graph_alpha must be between 0 and 1", code="invalid_graph_alpha")
    cleaned = query.strip()
    if not cleaned or len(cleaned) > MAX_QUERY_CHARS:
        raise ValidationFailed(
            f"query must have 1 to {MAX_QUERY_CHARS} characters", code="invalid_query"
        )
    return cleaned


def search(
    *,
    access: ContextAccess,
    query: str,
    mode: str = "hybrid",
    k: int = 10,
    scopes: list[str] | None = None,
    target: str = "chunks",
    graph_alpha: float = 0.3,
    vector_floor: float | None = None,
    thread: str | None = None,
    query_vector: QueryVector | None = None,
    include_pending: bool = False,
    ranked_only: bool = False,
) -> SearchResponse:
    """The ``k`` best visible ``target`` records for ``query`` under ``mode`` (for turns,
    of the conversation ``thread`` when given). Facts are the trusted ones, with the
    pending ones too when ``include_pending`` (each says its ``trust``).

    ``query_vector``, from ``query_vector_start`` for this same query, saves embedding it
    again; the results are the same. ``ranked_only`` answers the ranked ids with their
    scores and explanations and leaves their text, scope and meta empty, for a caller
    that reads the records itself (the memory context).

    With ``vector_floor``, a result among them that only vector similarity found (no BM25
    match) and whose cosine is below the floor is left out and counted in ``hidden``: the
    nearest neighbours of an unrelated query are still someone's nearest."""
    started = time.perf_counter()
    query = _validate(query=query, mode=mode, k=k, target=target, graph_alpha=graph_alpha)
    if target == ALL_TARGET:
        return _search_all(
            access=access,
            query=query,
            mode=mode,
            k=k,
            scopes=scopes,
            graph_alpha=graph_alpha,
            vector_floor=vector_floor,
            thread=thread,
            query_vector=query_vector,
            started=started,
            include_pending=include_pending,
        )
    thread = _thread_clean(thread, target=target)
    kind = TARGETS[target]
    visible = search_visible_q(access=access, scopes=scopes)
    # Turns' own rows carry the thread; graph expansion reads other records by scope only.
    visible_rows = visible & Q(thread=thread) if thread is not None else visible
    context_id = access.context.pk
    depth = _fusion_depth(mode=mode, k=k, kind=kind)
    explains: dict[int, Explain] = {}
    # The query vector is computed while PostgreSQL scores BM25: the model runs in this
    # process and the SQL in the server's, so on two cores the two overlap.
    pending: Future[list[list[float]]] | None = None
    if mode != "bm25":
        if query_vector is not None and query_vector.text == query:
            pending = query_vector.pending
        else:
            pending = _EMBEDDER.submit(embed_texts, [query])
    if mode != "vector":
        hits = bm25_rank(
            context_id=context_id,
            target=kind,
            query=query,
            visible_sql=_thread_sql(corpus_visible_sql(visible), thread),
            limit=depth,
        )
        for rank, hit in enumerate(hits, start=1):
            explains.setdefault(hit.ref_id, Explain()).bm25 = RankScore(rank, hit.score)
    embedding: list[float] | None = None
    if pending is not None:
        embedding = _query_vector(pending)
        for rank, vhit in enumerate(
            vector_rank(
                context_id=context_id,
                target=kind,
                embedding=embedding,
                visible=visible_rows,
                limit=depth,
            ),
            start=1,
        ):
            explains.setdefault(vhit.ref_id, Explain()).vector = RankScore(rank, vhit.similarity)
    if kind == Target.TURN and mode in ("hybrid", "hybrid_graph"):
        scores = turn_scores(explains, context_id=context_id, visible=visible_rows)
    else:
        scores = mode_scores(explains, mode=mode)
    if mode == "hybrid_graph":
        assert embedding is not None
        scores = graph_scores(
            access=access,
            explains=explains,
            fused=scores,
            query=query,
            embedding=embedding,
            target=kind,
            visible=visible,
            alpha=graph_alpha,
            seeds=max(k, GRAPH_SEEDS_MIN),
        )
        if kind == Target.TURN:  # the graph may reach turns the filters exclude
            scores = turns_only(scores, visible=visible_rows)
    if kind == Target.FACT:
        scores = trusted_only(scores, include_pending=include_pending)
    best = best_refs(scores, k)
    kept = [ref for ref in best if not below_floor(explains.get(ref), vector_floor)]
    if ranked_only:
        results = [
            SearchResult(kind.value, ref, "", scores[ref], "", explains.get(ref, Explain()))
            for ref in kept
        ]
    else:
        results = results_hydrate(kind, kept, scores=scores, explains=explains)
    took = time.perf_counter() - started
    SEARCH_SECONDS.labels(mode=mode, target=target).observe(took)
    return SearchResponse(results=results, took_ms=took * 1000, hidden=len(best) - len(kept))


def _search_all(
    *,
    access: ContextAccess,
    query: str,
    mode: str,
    k: int,
    scopes: list[str] | None,
    graph_alpha: float,
    vector_floor: float | None,
    thread: str | None,
    query_vector: QueryVector | None,
    started: float,
    include_pending: bool,
) -> SearchResponse:
    """Turns, chunks and facts, each searched as its own target (one embedding of the
    query) and fused by reciprocal rank: each target's scores are on a scale of their
    own, its ranks are not. Each result keeps its type and its own explanation; ``score``
    is the fused one. A ``thread`` narrows the search to that conversation's turns."""
    if thread is not None:
        _thread_clean(thread, target="turns")
        targets: tuple[str, ...] = ("turns",)
    else:
        targets = ALL_TARGETS
    if mode != "bm25" and query_vector is None:
        query_vector = query_vector_start(query)
    by_target: list[list[SearchResult]] = []
    hidden = 0
    for target in targets:
        response = search(
            access=access,
            query=query,
            mode=mode,
            k=k,
            scopes=scopes,
            target=target,
            graph_alpha=graph_alpha,
            vector_floor=vector_floor,
            thread=thread,
            query_vector=query_vector,
            include_pending=include_pending,
        )
        by_target.append(response.results)
        hidden += response.hidden
    keyed = {(r.type, r.id): r for results in by_target for r in results}
    fused = rrf_fuse([[(r.type, r.id) for r in results] for results in by_target])
    # Ties (the same rank in two targets) go to the closer in meaning (cosines share one
    # scale across targets), then by type and id.
    best = sorted(fused, key=lambda key: (-fused[key], -result_cosine(keyed[key]), key))[:k]
    results = [replace(keyed[key], score=fused[key]) for key in best]
    return SearchResponse(
        results=results, took_ms=(time.perf_counter() - started) * 1000, hidden=hidden
    )


def _fusion_depth(*, mode: str, k: int, kind: Target) -> int:
    """How deep each list is read: k for one list; deeper for a fusion."""
    if mode in ("bm25", "vector"):
        return k
    if kind == Target.TURN:
        return min(max(k, TURN_FUSION_DEPTH), MAX_K)
    return min(max(2 * k, FUSION_DEPTH_MIN), MAX_K)


def _query_vector(pending: Future[list[list[float]]]) -> list[float]:
    try:
        return pending.result()[0]
    except Exception as exc:  # an API embedder down or misconfigured: a 503, not a 500
        raise embedder_unavailable(exc, hint="bm25 mode still works") from exc
