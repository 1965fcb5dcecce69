"""Hybrid fusion for conversation turns: normalized score sums and turn windows.

A turn is short and leans on the turns around it ("Yes, last Saturday!" answers the
question asked just before it), so for turns:

1. **Fusion** — each list's scores are min–max normalized over the list and summed with
   weights (``BM25_WEIGHT`` for BM25, the rest for cosine), each list read
   ``TURN_FUSION_DEPTH`` deep. Reciprocal rank fusion over deep lists rewards a turn that
   both lists rank in the thirties above one that either ranks first; normalized scores
   keep how far ahead the first is.
2. **Windows** — a turn's score gains ``WINDOW_WEIGHTS[i - 1]`` × the larger fused score
   of its two neighbours at distance i in its conversation (ordered by ``said_at``, then
   by id, among the turns the caller may read). A neighbour of a strong turn can enter
   the results with no score of its own.

Measured on LoCoMo (docs/BENCHMARKS.md, docs/decisions/0049): recall@10 0.56 (RRF over lists 50
deep) → 0.72. Chunks keep reciprocal rank fusion (SciFact is measured with it).
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db.models import Q

from memory.infra.replicas import read_connection
from memory.models import Turn
from memory.search.sql import q_where_sql

TURN_FUSION_DEPTH = 100
BM25_WEIGHT = 0.7
WINDOW_WEIGHTS: tuple[float, ...] = (0.5, 0.3)


def normalized_sum(
    bm25: Sequence[tuple[int, float]], vector: Sequence[tuple[int, float]]
) -> dict[int, float]:
    """BM25_WEIGHT · minmax(bm25) + (1 − BM25_WEIGHT) · minmax(cosine), over (id, score)
    lists ranked best first; a turn missing from a list gets 0 from it."""
    fused: dict[int, float] = {}
    for ranked, weight in ((bm25, BM25_WEIGHT), (vector, 1.0 - BM25_WEIGHT)):
        if not ranked:
            continue
        high, low = ranked[0][1], ranked[-1][1]
        spread = high - low
        for ref, score in ranked:
            share = (score - low) / spread if spread > 0 else 1.0
            fused[ref] = fused.get(ref, 0.0) + weight * share
    return fused


def window_boosts(fused: dict[int, float], *, context_id: int, visible: Q) -> dict[int, float]:
    """What each turn gains from its neighbours' fused scores (``WINDOW_WEIGHTS``), for
    the fused turns and their visible neighbours."""
    reach = len(WINDOW_WEIGHTS)
    neighbours = _neighbours(list(fused), context_id=context_id, reach=reach, visible=visible)
    # Every turn that borders a fused one: its own neighbours are needed too.
    around: dict[int, list[list[int]]] = {}
    for ref, (before, after) in neighbours.items():
        around[ref] = [
            [n for n in (_at(before, i), _at(after, i)) if n is not None] for i in range(reach)
        ]
        for i, other in enumerate(before):
            around.setdefault(other, [[] for _ in range(reach)])[i].append(ref)
        for i, other in enumerate(after):
            around.setdefault(other, [[] for _ in range(reach)])[i].append(ref)
    boosts: dict[int, float] = {}
    for ref, rings in around.items():
        boost = 0.0
        for weight, ring in zip(WINDOW_WEIGHTS, rings, strict=True):
            boost += weight * max((fused.get(n, 0.0) for n in ring), default=0.0)
        if boost > 0:
            boosts[ref] = boost
    return boosts


def _at(ids: list[int], i: int) -> int | None:
    return ids[i] if i < len(ids) else None


def _neighbours(
    ids: list[int], *, context_id: int, reach: int, visible: Q
) -> dict[int, tuple[list[int], list[int]]]:
    """For each turn in ``ids`` with a thread: up to ``reach`` visible turns of the same
    conversation before it (nearest first) and after it, in one statement.

    The candidates' conversations are read whole and numbered in order (``said_at``,
    then id): one index range per conversation, a few hundred rows for a thread filter,
    where a look-up per candidate and side cost ~0.4 ms each (docs/decisions/0049)."""
    if not ids:
        return {}
    table = Turn._meta.db_table
    where, params = q_where_sql(Turn, visible)
    lags = ", ".join(
        f"lag({table}.id, {i}) OVER w AS before_{i}, lead({table}.id, {i}) OVER w AS after_{i}"
        for i in range(1, reach + 1)
    )
    sql = f"""
        SELECT * FROM (
            SELECT {table}.id, {lags} FROM {table}
            WHERE {table}.context_id = %s
              AND {table}.thread IN (
                  SELECT DISTINCT thread FROM {table} WHERE id = ANY(%s) AND thread <> ''
              )
              AND {where}
            WINDOW w AS (PARTITION BY {table}.thread ORDER BY {table}.said_at, {table}.id)
        ) ordered
        WHERE ordered.id = ANY(%s)
    """  # noqa: S608 - table names from the model, values are parameters
    found: dict[int, tuple[list[int], list[int]]] = {}
    with read_connection().cursor() as cursor:
        cursor.execute(sql, [context_id, ids, *params, ids])
        for ref, *around in cursor:
            before = [n for n in around[0::2] if n is not None]
            after = [n for n in around[1::2] if n is not None]
            found[ref] = (before, after)
    return found
