"""BM25 scoring: Lucene's formula, the query's term statistics and the SQL pieces that
both ranking plans (bm25_exact.py, bm25_pruning.py) are built from.

score(d, q) = Σ_t qtf(t) · idf(t) · tf / (tf + k1 · (1 − b + b · dl / avgdl))
idf(t)      = ln(1 + (N − df + 0.5) / (df + 0.5)),  k1 = 1.2, b = 0.75

This is Lucene's BM25Similarity since Lucene 8, which dropped the constant (k1 + 1)
numerator (it changes no ranking), and what ``bm25s`` computes with ``method="lucene"``.
N and avgdl come from ``SearchStats`` and df is counted from the posting lists the
query reads anyway, so nothing about a term's frequency is stored where concurrent
writers would queue on it. Statistics are per corpus (context × target) and ignore
scopes: scope grants filter results, not statistics.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from memory.infra.replicas import read_connection
from memory.search.bm25_postings import REF_COLUMN
from memory.search.models import SearchDoc, Target
from memory.search.sql import q_where_sql

K1 = 1.2
B = 0.75

# Rows that may be returned besides the scope filter: live facts and entities only.
# Scalar subqueries rather than joins, so that they stay one look-up per row when a
# merged probe stage turns nested loops off (``plan_for_posting_lists``).
_LIVE = {
    Target.CHUNK: "TRUE",
    Target.TURN: "TRUE",
    # Expired items are dropped by the items selector, which asks for a margin.
    Target.ITEM: "TRUE",
    Target.FACT: (
        "(SELECT f.status FROM memory_fact f WHERE f.id = search_searchdoc.fact_id) = 'current'"
    ),
    Target.ENTITY: (
        "(SELECT e.merged_into_id IS NULL FROM memory_entity e"
        " WHERE e.id = search_searchdoc.entity_id)"
    ),
}


@dataclass(frozen=True)
class Hit:
    ref_id: int
    score: float


@dataclass(frozen=True)
class QueryTerm:
    term_id: int
    weight: float  # qtf · idf
    df: int
    bound: float  # no posting of the term adds more than this to a score
    frequency: float = 0.0  # df / N: the chance that a document holds the term
    text: str = ""


def query_terms(
    *, context_id: int, target: Target, bag: Counter[str]
) -> tuple[list[QueryTerm], float]:
    """The query's known terms with their weights, and the corpus's average length."""
    with read_connection().cursor() as cursor:
        cursor.execute(
            """
            SELECT t.id, t.text, t.df, t.max_tf, t.min_dl, s.doc_count, s.total_length
            FROM search_searchstats s
            JOIN search_searchterm t ON t.context_id = s.context_id AND t.target = s.target
            WHERE s.context_id = %s AND s.target = %s AND s.doc_count > 0
              AND t.text = ANY(%s) AND t.df > 0
            ORDER BY t.id
            """,
            [context_id, target.value, list(bag)],
        )
        rows = cursor.fetchall()
    if not rows:
        return [], 0.0
    n, total = rows[0][5], rows[0][6]
    avgdl = total / n
    terms = []
    for term_id, text, df, max_tf, min_dl, _, _ in rows:
        weight = bag[text] * math.log(1 + (n - df + 0.5) / (df + 0.5))
        # tf / (tf + k1·(1 − b + b·dl/avgdl)) grows with tf and shrinks with dl.
        share = max_tf / (max_tf + K1 * (1 - B + B * min_dl / avgdl)) if max_tf else 1.0
        terms.append(
            QueryTerm(
                term_id=term_id,
                weight=weight,
                df=df,
                bound=weight * share,
                frequency=df / n,
                text=text,
            )
        )
    return terms, avgdl


def length_params(avgdl: float) -> tuple[float, float]:
    """k1·(1 − b) and k1·b/avgdl: the two constants of ``contribution_sql``."""
    return K1 * (1 - B), K1 * B / avgdl


def contribution_sql(*, weight: str = "%s::float8", alias: str = "") -> str:
    """One posting's share of a score, ``w · tf / (tf + k1·(1 − b) + k1·b·dl/avgdl)``,
    with k1·(1 − b) and k1·b/avgdl as the next two parameters."""
    p = f"{alias}." if alias else ""
    return f"{weight} * {p}tf / ({p}tf + %s::float8 + %s::float8 * {p}dl)"


def posting_list_sql() -> str:
    """One term's contributions in doc_id order (parameters: weight, the two length
    constants, term id); the lists of a query are merged and summed per document as a
    stream (Merge Append + GroupAggregate)."""
    return (
        f"(SELECT doc_id, {contribution_sql()} AS s"  # noqa: S608 - a fixed expression
        " FROM search_searchposting WHERE term_id = %s ORDER BY doc_id)"
    )


def visible_rows_sql(target: Target, scored: str, where: str, *, last: bool = False) -> str:
    """The rows (ref, score) of ``scored`` (a CTE of doc_id, score) whose search document
    is live and passes ``where``, the caller's scope filter; ref is its chunk, fact or
    entity id. One primary-key look-up per row. ``last``: only once ``scored`` is
    complete — OFFSET 0 keeps the planner from pushing the look-up down to every
    candidate of a probe plan's first stage (the seed wants it pushed down: it drops
    invisible seeds before scoring them)."""
    return f"""(
        SELECT ref, score FROM (
            SELECT (
                SELECT search_searchdoc.{REF_COLUMN[target]} FROM search_searchdoc
                WHERE search_searchdoc.id = s.doc_id AND {_LIVE[target]} AND {where}
            ) AS ref, s.score
            FROM {scored} s
            {"OFFSET 0" if last else ""}
        ) looked_up
        WHERE ref IS NOT NULL
    ) visible_rows"""  # noqa: S608 - identifiers from fixed tables, values are parameters


def ranking_key(score: float, ref_id: int) -> tuple[int, int]:
    """``tied_sql`` in Python, for callers that rank scores again: best first, scores
    equal to 1e-9 taken as ties, broken by id."""
    return -round(score * 1e9), ref_id


def tied_sql(score: str) -> str:
    """Best first, with scores equal to 1e-9 taken as ties (then broken by id).

    Equal BM25 scores (same term frequencies and lengths) come out a unit in the last
    place apart when their contributions are added in different orders — a pruned and
    an unpruned plan do — and the tie-break by id must not depend on that."""
    return f"round({score} * 1e9) DESC"


def hits_from(refs: list[Any], scores: list[Any]) -> list[Hit]:
    return [Hit(ref_id=int(r), score=float(s)) for r, s in zip(refs, scores, strict=True)]


def plan_for_posting_lists(cursor: Any, *, merge_joins: bool = False) -> None:
    """The planner cannot estimate the size of a posting list, so it is told: no hash
    aggregate (it would guess a few hundred groups), no parallel workers (their start-up
    costs more than the scan) and, for merged probe stages, no nested loops (it would
    guess a few candidates and probe the list once for each). Local to the caller's
    transaction."""
    cursor.execute(
        "SELECT set_config('enable_hashagg', 'off', true),"
        " set_config('max_parallel_workers_per_gather', '0', true),"
        " set_config('enable_nestloop', %s, true)",
        ["off" if merge_joins else "on"],
    )


def corpus_visible_sql(q: Q) -> tuple[str, list[object]]:
    """The WHERE fragment for ``SearchDoc`` rows matching a scope filter (``Grants.read_q``)."""
    sql, params = q_where_sql(SearchDoc, q)
    return sql, list(params)
