"""Exact BM25 ranking: every posting of every query term read, merged and summed.

The plan every query can take (bm25.py tries MaxScore pruning, bm25_pruning.py, first):
one index-only scan per term, each in doc_id order, merged and summed per document as a
stream. The scope filter is applied to the best-scored documents first and widened to
all of them only if too few of the best are visible.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from memory.infra.replicas import read_connection
from memory.search.bm25_scoring import (
    Hit,
    QueryTerm,
    hits_from,
    length_params,
    plan_for_posting_lists,
    posting_list_sql,
    tied_sql,
    visible_rows_sql,
)
from memory.search.models import Target


def exact_rank(
    *,
    target: Target,
    terms: list[QueryTerm],
    avgdl: float,
    visible_sql: tuple[str, list[object]],
    limit: int,
) -> list[Hit]:
    """The ``limit`` best visible items holding any of ``terms``, best first (ties by id)."""
    depth: int | None = _ranking_depth(target=target, visible_sql=visible_sql, limit=limit)
    while True:
        rows, full = _ranked(
            target=target,
            terms=terms,
            avgdl=avgdl,
            visible_sql=visible_sql,
            depth=depth,
            limit=limit,
        )
        if len(rows) >= limit or not full:
            return rows
        depth = None  # too few of the best are visible: filter every match


def _ranking_depth(*, target: Target, visible_sql: tuple[str, list[object]], limit: int) -> int:
    """How many of the best documents to score before the scope filter.

    A filter that keeps a tenth of the corpus needs about ten times the limit; live
    facts and entities only need a margin for the superseded and merged ones. Every
    indexed chunk is live, so without a filter the best ``limit`` are the answer (each
    one more costs a look-up of its chunk id)."""
    if visible_sql[0] != "TRUE":
        return max(limit * 50, 1000)
    return limit if target in (Target.CHUNK, Target.TURN, Target.ITEM) else max(limit * 4, 100)


def _ranked(
    *,
    target: Target,
    terms: list[QueryTerm],
    avgdl: float,
    visible_sql: tuple[str, list[object]],
    depth: int | None,
    limit: int,
) -> tuple[list[Hit], bool]:
    """Hits, and whether the ``depth`` cut was reached (more matches may exist).

    One index-only scan per term, each in doc_id order, merged and summed per document
    as a stream (Merge Append + GroupAggregate). The planner cannot estimate the size of
    a posting list (see ``plan_for_posting_lists``).
    """
    where, where_params = visible_sql
    k0, kdl = length_params(avgdl)
    params: list[Any] = []
    for term in terms:
        params += [term.weight, k0, kdl, term.term_id]
    sql = f"""
        WITH scored AS (
            SELECT doc_id, sum(s) AS score
            FROM ({" UNION ALL ".join([posting_list_sql()] * len(terms))}) AS contributions
            GROUP BY doc_id
        ),
        best AS (SELECT doc_id, score FROM scored ORDER BY {tied_sql("score")}, doc_id LIMIT %s),
        visible AS (
            SELECT ref, score FROM {visible_rows_sql(target, "best", where)}
            ORDER BY {tied_sql("score")}, ref
            LIMIT %s
        )
        SELECT (SELECT count(*) FROM best),
               coalesce(array_agg(ref ORDER BY {tied_sql("score")}, ref), '{{}}'),
               coalesce(array_agg(score ORDER BY {tied_sql("score")}, ref), '{{}}')
        FROM visible
    """  # noqa: S608 - identifiers come from fixed tables above, values are parameters
    params += [depth, *where_params, limit]
    connection = read_connection()  # a replica in a read scope
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        plan_for_posting_lists(cursor)
        cursor.execute(sql, params)
        kept, refs, scores = cursor.fetchone()
    return hits_from(refs, scores), depth is not None and kept >= depth
