"""How a search's ranked lists become one score per record: reciprocal rank fusion, the
turns' score sum and windows, the graph boost; and the filters applied to the scores
(trusted facts only, turns the filters allow, the vector floor), the best k by them."""

from __future__ import annotations

from django.db.models import Q

from memory.domain.access import ContextAccess
from memory.infra.replicas import read_connection
from memory.models import Fact, FactTrust, Turn
from memory.search.bm25 import ranking_key
from memory.search.fusion import RRF_K, rrf_fuse
from memory.search.graph import graph_ranking
from memory.search.models import Target
from memory.search.turn_fusion import normalized_sum, window_boosts
from memory.selectors.search_results import Explain

# The graph's list against BM25's and the vector's (1 each): at the default graph_alpha
# 0.3 it weighs 0.05, about three places near the top. On SciFact (docs/BENCHMARKS.md)
# the graph's density at 0.3 cost 0.054 nDCG@10 against hybrid, at 0.05 0.002.
GRAPH_LIST_WEIGHT = 1 / 6

_TOLD_SQL = f"SELECT id FROM {Fact._meta.db_table} WHERE id = ANY(%s) AND trust = ANY(%s)"  # noqa: S608 - the table name from the model


def trusted_only(scores: dict[int, float], *, include_pending: bool) -> dict[int, float]:
    """The facts agents may be told (one fixed statement over the candidates: every facts
    search runs it, and building it with the ORM cost more than running it)."""
    if not scores:
        return scores
    trusts = [FactTrust.TRUSTED, FactTrust.PENDING] if include_pending else [FactTrust.TRUSTED]
    with read_connection().cursor() as cursor:
        cursor.execute(_TOLD_SQL, [list(scores), [str(t) for t in trusts]])
        told = {row[0] for row in cursor.fetchall()}
    return {ref: score for ref, score in scores.items() if ref in told}


def turn_scores(explains: dict[int, Explain], *, context_id: int, visible: Q) -> dict[int, float]:
    """Turns: normalized score sum plus turn windows (memory.search.turn_fusion)."""
    bm25 = [(ref, e.bm25.score) for ref, e in _by_rank(explains, "bm25") if e.bm25]
    vector = [(ref, e.vector.score) for ref, e in _by_rank(explains, "vector") if e.vector]
    fused = normalized_sum(bm25, vector)
    for ref, value in fused.items():
        explains[ref].fused = value
    scores = dict(fused)
    for ref, boost in window_boosts(fused, context_id=context_id, visible=visible).items():
        explains.setdefault(ref, Explain()).window_boost = boost
        scores[ref] = scores.get(ref, 0.0) + boost
    return scores


def below_floor(explain: Explain | None, floor: float | None) -> bool:
    if floor is None or explain is None or explain.bm25 is not None or explain.vector is None:
        return False
    return explain.vector.score < floor


def best_refs(scores: dict[int, float], k: int) -> list[int]:
    """The ``k`` best ids, ranked as BM25 ranks them: sums of the same contributions
    added in another order may differ in the last bit, and must still tie by id."""
    return sorted(scores, key=lambda ref: ranking_key(scores[ref], ref))[:k]


def mode_scores(explains: dict[int, Explain], *, mode: str) -> dict[int, float]:
    if mode == "bm25":
        return {ref: e.bm25.score for ref, e in explains.items() if e.bm25 is not None}
    if mode == "vector":
        return {ref: e.vector.score for ref, e in explains.items() if e.vector is not None}
    fused = rrf_fuse(
        [
            [ref for ref, e in _by_rank(explains, "bm25")],
            [ref for ref, e in _by_rank(explains, "vector")],
        ]
    )
    for ref, value in fused.items():
        explains[ref].fused = value
    return fused


def _by_rank(explains: dict[int, Explain], which: str) -> list[tuple[int, Explain]]:
    ranked = [(ref, e) for ref, e in explains.items() if getattr(e, which) is not None]
    return sorted(ranked, key=lambda item: getattr(item[1], which).rank)


def graph_scores(
    *,
    access: ContextAccess,
    explains: dict[int, Explain],
    fused: dict[int, float],
    query: str,
    embedding: list[float],
    target: Target,
    visible: Q,
    alpha: float,
    seeds: int,
) -> dict[int, float]:
    """Hybrid's scores plus the graph's ranking as one more reciprocal-rank list:
    ``score = fused + α · GRAPH_LIST_WEIGHT / (60 + graph rank)`` (see
    memory.search.graph). The graph only adds: a record it does not reach keeps hybrid's
    score, and with no matching keyword the order is hybrid's. The hop starts from the
    ``seeds`` best."""
    if alpha <= 0:
        ranking: list[int] = []
    else:
        ranking = graph_ranking(
            context_id=access.context.pk,
            target=target,
            candidates=best_refs(fused, seeds),
            query=query,
            embedding=embedding,
            visible=visible,
        )
    weight = alpha * GRAPH_LIST_WEIGHT
    boosts = {ref: weight / (RRF_K + rank) for rank, ref in enumerate(ranking, start=1)}
    scores: dict[int, float] = {}
    for ref in set(fused) | set(boosts):
        explain = explains.setdefault(ref, Explain())
        explain.graph_boost = boosts.get(ref, 0.0)
        scores[ref] = fused.get(ref, 0.0) + explain.graph_boost
    return scores


def turns_only(scores: dict[int, float], *, visible: Q) -> dict[int, float]:
    kept = set(Turn.objects.filter(visible, pk__in=list(scores)).values_list("pk", flat=True))
    return {ref: score for ref, score in scores.items() if ref in kept}
