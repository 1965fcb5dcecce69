"""Vector search with pgvector's HNSW index (cosine), correct under scope filters.

pgvector 0.6 (the embedded server's version) has no iterative index scans: an HNSW
scan yields ``hnsw.ef_search`` candidates and a filter applied afterwards can leave fewer
than k. So:

1. when the visible rows are few (≤ ``EXACT_SCAN_MAX``), scan them exactly — a few
   thousand distance computations cost about what a graph walk costs (measured:
   ~8 µs a row here, docs/BENCHMARKS.md) and are always right;
2. otherwise walk the graph with ``ef_search`` raised in proportion to how much the
   filter removes, and widen it (×4, up to ``EF_SEARCH_MAX``) while fewer than k
   visible rows come back;
3. if even that is short, fall back to the exact scan.

So a filtered query returns k rows whenever k visible rows exist.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, QuerySet, Value
from pgvector.django import CosineDistance

from memory.infra.replicas import read_connection
from memory.models import Chunk, Entity, Item, Turn, fact_live_q
from memory.search.models import FactVector, SearchStats, Target

# Defaults of the settings MEMORY_SEARCH_EXACT_SCAN_MAX and MEMORY_SEARCH_EF_SEARCH
# (read per call, so tests and benchmarks can move them).
EXACT_SCAN_MAX = 5_000
EF_SEARCH_MIN = 100
EF_SEARCH_MAX = 1000


def _exact_scan_max() -> int:
    return int(getattr(settings, "MEMORY_SEARCH_EXACT_SCAN_MAX", EXACT_SCAN_MAX))


def _ef_search_min() -> int:
    return int(getattr(settings, "MEMORY_SEARCH_EF_SEARCH", EF_SEARCH_MIN))


@dataclass(frozen=True)
class VectorHit:
    ref_id: int
    similarity: float  # cosine similarity, 1 − cosine distance


def _visible_rows(*, context_id: int, target: Target, visible: Q) -> QuerySet[Any]:
    if target == Target.CHUNK:
        rows: QuerySet[Any] = Chunk.objects.filter(visible, context_id=context_id)
    elif target == Target.TURN:
        rows = Turn.objects.filter(visible, context_id=context_id)
    elif target == Target.ITEM:
        rows = Item.objects.filter(visible, context_id=context_id)
    elif target == Target.ENTITY:
        rows = Entity.objects.filter(visible, context_id=context_id, merged_into__isnull=True)
    else:
        rows = FactVector.objects.filter(visible, fact_live_q("fact__"), context_id=context_id)
    return rows.filter(embedding__isnull=False)


# One fixed statement: building the ORM aggregate took longer than running it, three
# times for every memory context block.
_CORPUS_SIZES_SQL = f"""
SELECT coalesce(sum(doc_count) FILTER (WHERE context_id = %s), 0), coalesce(sum(doc_count), 0)
FROM {SearchStats._meta.db_table} WHERE target = %s
"""  # noqa: S608 - the table name from the model


def _corpus_sizes(*, context_id: int, target: Target) -> tuple[int, int]:
    """Rows of this context and of all contexts: the HNSW index holds every context."""
    with read_connection().cursor() as cursor:
        cursor.execute(_CORPUS_SIZES_SQL, [context_id, target.value])
        mine, everyone = cursor.fetchone()
    return int(mine), int(everyone)


def _visible_count(rows: QuerySet[Any], exact_max: int) -> int:
    """How many rows a filter leaves, as far as choosing the plan needs: exactly up to
    ``exact_max`` (then they are scanned exactly), else an estimate never below it.

    The planner's estimate comes first. Far above the cap (four times) it is taken as it
    is: counting 5,001 rows cost more than the walk of a filter that keeps most of them (a
    store's search under a wide namespace prefix). Otherwise the rows are counted up to
    the cap, and past it the count is a lower bound only, which walked the graph of a wide
    filter as if it kept a sliver, at the widest ef_search; so then it is half the
    planner's estimate, never below the bound: a filter near the bound (one team of ten)
    walks as it did. An estimate that is wrong costs time, never results: a walk short of
    rows widens, then scans exactly."""
    estimate = _estimated_rows(rows)
    if estimate > 4 * exact_max:
        return estimate
    counted = int(rows.values("pk")[: exact_max + 1].count())
    return counted if counted <= exact_max else max(counted, estimate // 2)


def _estimated_rows(rows: QuerySet[Any]) -> int:
    """The planner's estimate of how many rows ``rows`` holds; no row is read."""
    sql, params = rows.values("pk").query.sql_with_params()
    with read_connection().cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        (plan,) = cursor.fetchone()
    if isinstance(plan, str):  # psycopg hands json back decoded, a driver may not
        plan = json.loads(plan)
    return int(plan[0]["Plan"]["Plan Rows"])


def _exact(rows: QuerySet[Any], embedding: list[float], limit: int) -> list[VectorHit]:
    # "+ 0" hides the ORDER BY from the HNSW index: every visible row is measured.
    ranked = rows.annotate(distance=CosineDistance("embedding", embedding) + Value(0.0))
    return _hits(ranked.order_by("distance", "pk")[:limit])


def _hits(rows: QuerySet[Any]) -> list[VectorHit]:
    return [
        VectorHit(ref_id=pk, similarity=1.0 - d) for pk, d in rows.values_list("pk", "distance")
    ]


def _hnsw(rows: QuerySet[Any], embedding: list[float], limit: int, ef: int) -> list[VectorHit]:
    connection = read_connection()  # a replica in a read scope
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(ef)])
        ranked = rows.annotate(distance=CosineDistance("embedding", embedding))
        return _hits(ranked.order_by(F("distance"))[:limit])


def vector_rank(
    *, context_id: int, target: Target, embedding: list[float], visible: Q, limit: int
) -> list[VectorHit]:
    """The ``limit`` visible rows nearest to ``embedding``, nearest first."""
    rows = _visible_rows(context_id=context_id, target=target, visible=visible)
    exact_max = _exact_scan_max()
    mine, everyone = _corpus_sizes(context_id=context_id, target=target)
    if mine <= exact_max:
        return _exact(rows, embedding, limit)
    visible_rows = mine
    if visible:  # a scope filter: how much of the context does it leave?
        visible_rows = _visible_count(rows, exact_max)
        if visible_rows <= exact_max:
            return _exact(rows, embedding, limit)
    # The share of the index's rows this query may return; the graph walk must look at
    # about limit / share candidates to keep limit of them.
    share = visible_rows / max(everyone, 1)
    ef = min(max(_ef_search_min(), int(2 * limit / share)), EF_SEARCH_MAX)
    while True:
        hits = _hnsw(rows, embedding, limit, max(ef, limit))
        if len(hits) >= limit:
            return hits
        if ef >= EF_SEARCH_MAX:
            return _exact(rows, embedding, limit)
        ef = min(ef * 4, EF_SEARCH_MAX)
