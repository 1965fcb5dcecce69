"""BM25 in PostgreSQL: writing postings and ranking with Lucene's formula in SQL.

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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import Q

from memory.pg import array_literal, int_array_literal
from memory.search.analyzer import analyze_words
from memory.search.models import SearchDoc, Target
from memory.search.sql import q_where_sql

K1 = 1.2
B = 0.75
# Below this many postings a query reads its lists in a few milliseconds: pruning
# (two statements instead of one) would not pay for itself.
MAXSCORE_MIN_POSTINGS = 5_000
# A list shorter than this is read, never probed: reading it costs less than probing
# it for the candidates of the other lists.
PROBE_MIN_DF = 1_000
# What a probe is charged, in postings read. A probe costs about ten postings read,
# merged and summed, but the estimate charges every candidate for every probed term
# while the staged probes drop most candidates after the first: 3 is the charge that
# minimised the 100k-chunk benchmark's total (1–10 swept, docs/BENCHMARKS.md).
PROBE_COST = 3
# What completing the candidates with a term by merging its whole list costs, per
# posting of that list: a merge join reads a posting in about 0.4 of the time the
# partial score's merge-and-sum takes (0.17 against 0.46 µs on the 100k-chunk
# benchmark). Many candidates and a list of common words: merging is cheaper.
MERGE_COST = 0.4
MAX_PROBED = 6  # the longest lists considered for probing
# The share of a list's postings taken to reach a floor above what a typical posting
# (tf 1 in a document of average length) scores: 0.5–0.65 of the postings score above
# a typical one on the 100k-chunk benchmark corpus, fewer the higher the floor.
RARE_POSTING_SHARE = 0.3
# θ is also seeded from the documents that hold the two strongest terms, when their
# two lists come to at most this share of the query's postings.
PAIR_SEED_SHARE = 0.4
# Scores are sums of doubles added in different orders by different plans: bounds are
# compared with this much slack so that rounding can never prune a true top-k document.
_SLACK = 1e-9

_REF_COLUMN = {
    Target.CHUNK: "chunk_id",
    Target.FACT: "fact_id",
    Target.ENTITY: "entity_id",
    Target.TURN: "turn_id",
}

# Rows that may be returned besides the scope filter: live facts and entities only.
# Scalar subqueries rather than joins, so that they stay one look-up per row when a
# merged probe stage turns nested loops off (``_plan_for_posting_lists``).
_LIVE = {
    Target.CHUNK: "TRUE",
    Target.TURN: "TRUE",
    Target.FACT: (
        "(SELECT f.status FROM memory_fact f WHERE f.id = search_searchdoc.fact_id) = 'current'"
    ),
    Target.ENTITY: (
        "(SELECT e.merged_into_id IS NULL FROM memory_entity e"
        " WHERE e.id = search_searchdoc.entity_id)"
    ),
}


@dataclass(frozen=True)
class IndexItem:
    """One chunk, fact or entity to index: its id, scope and analyzed terms."""

    ref_id: int
    scope: str
    terms: list[str]


@dataclass(frozen=True)
class Hit:
    ref_id: int
    score: float


def postings_delete(*, target: Target, ref_ids: Sequence[int]) -> None:
    """Drop items from the index (the trigger removes postings and updates statistics)."""
    if not ref_ids:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM search_searchdoc WHERE {_REF_COLUMN[target]} = ANY(%s)",  # noqa: S608
            [list(ref_ids)],
        )


def postings_replace(*, context_id: int, target: Target, items: Sequence[IndexItem]) -> None:
    """(Re-)index ``items`` in the caller's transaction: old postings out, new ones in."""
    if not items:
        return
    postings_delete(target=target, ref_ids=[item.ref_id for item in items])
    bags = [Counter(item.terms) for item in items]
    term_ids = _term_ids(
        context_id=context_id, target=target, terms=sorted({t for bag in bags for t in bag})
    )
    column = _REF_COLUMN[target]
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO search_searchdoc (context_id, target, {column}, scope, length, term_ids)
            SELECT %s, %s, x.ref, x.scope, x.len, x.terms::bigint[]
            FROM unnest(%s::bigint[], %s::text[], %s::int[], %s::text[])
                AS x(ref, scope, len, terms)
            RETURNING {column}, id
            """,  # noqa: S608
            [
                context_id,
                target.value,
                int_array_literal(item.ref_id for item in items),
                array_literal(item.scope for item in items),
                int_array_literal(sum(bag.values()) for bag in bags),
                array_literal(int_array_literal(term_ids[t] for t in bag) for bag in bags),
            ],
        )
        doc_ids = dict(cursor.fetchall())
        terms: list[int] = []
        docs: list[int] = []
        tfs: list[int] = []
        dls: list[int] = []
        for item, bag in zip(items, bags, strict=True):
            doc_id, length = doc_ids[item.ref_id], sum(bag.values())
            for term, tf in bag.items():
                terms.append(term_ids[term])
                docs.append(doc_id)
                tfs.append(tf)
                dls.append(length)
        if terms:
            cursor.execute(
                """
                INSERT INTO search_searchposting (term_id, doc_id, tf, dl)
                SELECT * FROM unnest(%s::bigint[], %s::bigint[], %s::int[], %s::int[])
                """,
                [int_array_literal(column) for column in (terms, docs, tfs, dls)],
            )


def _term_ids(*, context_id: int, target: Target, terms: list[str]) -> dict[str, int]:
    """Ids of ``terms`` in the corpus dictionary, adding the new ones.

    Sorted inserts keep two writers adding overlapping new terms from deadlocking.
    The ids are read by a second statement: its fresh snapshot also sees terms that a
    concurrent writer committed while the insert skipped them as conflicts.
    """
    if not terms:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO search_searchterm (context_id, target, text)
            SELECT %s, %s, unnest(%s::text[])
            ON CONFLICT (context_id, target, text) DO NOTHING
            """,
            [context_id, target.value, terms],
        )
        cursor.execute(
            """
            SELECT text, id FROM search_searchterm
            WHERE context_id = %s AND target = %s AND text = ANY(%s)
            """,
            [context_id, target.value, terms],
        )
        return dict(cursor.fetchall())


@dataclass(frozen=True)
class _QueryTerm:
    term_id: int
    weight: float  # qtf · idf
    df: int
    bound: float  # no posting of the term adds more than this to a score
    frequency: float = 0.0  # df / N: the chance that a document holds the term
    text: str = ""


def _query_terms(
    *, context_id: int, target: Target, bag: Counter[str]
) -> tuple[list[_QueryTerm], float]:
    """The query's known terms with their weights, and the corpus's average length."""
    with connection.cursor() as cursor:
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
            _QueryTerm(
                term_id=term_id,
                weight=weight,
                df=df,
                bound=weight * share,
                frequency=df / n,
                text=text,
            )
        )
    return terms, avgdl


def bm25_rank(
    *,
    context_id: int,
    target: Target,
    query: str,
    visible_sql: tuple[str, list[object]],
    limit: int,
) -> list[Hit]:
    """The ``limit`` best visible items for ``query``, best first (ties by id).

    ``visible_sql`` is a WHERE fragment over ``search_searchdoc`` (the caller's scope
    filter). Scoring reads only the query terms' posting lists; the filter is applied to
    the best-scored documents first and widened to all of them only if too few of the
    best are visible.
    """
    words = analyze_words(query)
    bag = Counter(term for word in words for term in word)
    terms, avgdl = _query_terms(context_id=context_id, target=target, bag=bag) if bag else ([], 0)
    if not terms or limit <= 0:
        return []
    if len(terms) > 1 and sum(t.df for t in terms) >= MAXSCORE_MIN_POSTINGS:
        pruned = _maxscore_ranked(
            target=target,
            terms=terms,
            words=words,
            avgdl=avgdl,
            visible_sql=visible_sql,
            limit=limit,
        )
        if pruned is not None:
            return pruned
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
    return limit if target in (Target.CHUNK, Target.TURN) else max(limit * 4, 100)


def _ranked(
    *,
    target: Target,
    terms: list[_QueryTerm],
    avgdl: float,
    visible_sql: tuple[str, list[object]],
    depth: int | None,
    limit: int,
) -> tuple[list[Hit], bool]:
    """Hits, and whether the ``depth`` cut was reached (more matches may exist).

    One index-only scan per term, each in doc_id order, merged and summed per document
    as a stream (Merge Append + GroupAggregate). The planner cannot estimate the size of
    a posting list (see ``_plan_for_posting_lists``).
    """
    where, where_params = visible_sql
    branch = (
        f"(SELECT doc_id, {_contribution()} AS s"  # noqa: S608 - a fixed expression
        " FROM search_searchposting WHERE term_id = %s ORDER BY doc_id)"
    )
    k0, kdl = K1 * (1 - B), K1 * B / avgdl
    params: list[Any] = []
    for term in terms:
        params += [term.weight, k0, kdl, term.term_id]
    sql = f"""
        WITH scored AS (
            SELECT doc_id, sum(s) AS score
            FROM ({" UNION ALL ".join([branch] * len(terms))}) AS contributions
            GROUP BY doc_id
        ),
        best AS (SELECT doc_id, score FROM scored ORDER BY {_tied("score")}, doc_id LIMIT %s),
        visible AS (
            SELECT ref, score FROM {_visible(target, "best", where)}
            ORDER BY {_tied("score")}, ref
            LIMIT %s
        )
        SELECT (SELECT count(*) FROM best),
               coalesce(array_agg(ref ORDER BY {_tied("score")}, ref), '{{}}'),
               coalesce(array_agg(score ORDER BY {_tied("score")}, ref), '{{}}')
        FROM visible
    """  # noqa: S608 - identifiers come from fixed tables above, values are parameters
    params += [depth, *where_params, limit]
    with transaction.atomic(), connection.cursor() as cursor:
        _plan_for_posting_lists(cursor)
        cursor.execute(sql, params)
        kept, refs, scores = cursor.fetchone()
    hits = [Hit(ref_id=int(r), score=float(s)) for r, s in zip(refs, scores, strict=True)]
    return hits, depth is not None and kept >= depth


def _visible(target: Target, scored: str, where: str, *, last: bool = False) -> str:
    """The rows (ref, score) of ``scored`` (a CTE of doc_id, score) whose search document
    is live and passes ``where``, the caller's scope filter; ref is its chunk, fact or
    entity id. One primary-key look-up per row. ``last``: only once ``scored`` is
    complete — OFFSET 0 keeps the planner from pushing the look-up down to every
    candidate of a probe plan's first stage (the seed wants it pushed down: it drops
    invisible seeds before scoring them)."""
    return f"""(
        SELECT ref, score FROM (
            SELECT (
                SELECT search_searchdoc.{_REF_COLUMN[target]} FROM search_searchdoc
                WHERE search_searchdoc.id = s.doc_id AND {_LIVE[target]} AND {where}
            ) AS ref, s.score
            FROM {scored} s
            {"OFFSET 0" if last else ""}
        ) looked_up
        WHERE ref IS NOT NULL
    ) visible_rows"""  # noqa: S608 - identifiers from fixed tables, values are parameters


def ranking_key(score: float, ref_id: int) -> tuple[int, int]:
    """``_tied`` in Python, for callers that rank scores again: best first, scores
    equal to 1e-9 taken as ties, broken by id."""
    return -round(score * 1e9), ref_id


def _tied(score: str) -> str:
    """Best first, with scores equal to 1e-9 taken as ties (then broken by id).

    Equal BM25 scores (same term frequencies and lengths) come out a unit in the last
    place apart when their contributions are added in different orders — a pruned and
    an unpruned plan do — and the tie-break by id must not depend on that."""
    return f"round({score} * 1e9) DESC"


def _contribution(*, weight: str = "%s::float8", alias: str = "") -> str:
    """One posting's share of a score, ``w · tf / (tf + k1·(1 − b) + k1·b·dl/avgdl)``,
    with k1·(1 − b) and k1·b/avgdl as the next two parameters."""
    p = f"{alias}." if alias else ""
    return f"{weight} * {p}tf / ({p}tf + %s::float8 + %s::float8 * {p}dl)"


def _maxscore_ranked(
    *,
    target: Target,
    terms: list[_QueryTerm],
    words: list[list[str]],
    avgdl: float,
    visible_sql: tuple[str, list[object]],
    limit: int,
) -> list[Hit] | None:
    """The exact top ``limit`` without reading the longest posting lists (MaxScore), or
    None when no list can be skipped or skipping would not pay.

    A lower bound θ on the k-th best visible score comes from fully scoring the best
    postings of the term with the highest bound. The longest lists whose bounds sum to
    less than θ are then *probed* instead of read: a document holding only those terms
    scores below θ and cannot be in the top k, so every document that can is in one of
    the lists that are read. Their partial scores are completed one probed term at a
    time, strongest first, and after each a document is dropped as soon as its score
    plus the bounds of the terms still to probe falls below θ — most are gone before
    the first probe. Common words, with long lists and small weights, are what is
    probed; short lists are read even when they could be skipped, since reading a
    posting costs less than probing one. Many candidates are completed by merging the
    probed lists with them instead of probing once per candidate: a merge join reads
    a list in doc_id order for less than half of what the partial score's
    merge-and-sum costs a posting.
    """
    if not any(t.df >= PROBE_MIN_DF for t in terms):
        return None
    k0, kdl = K1 * (1 - B), K1 * B / avgdl
    theta = _seed_threshold(
        target=target,
        terms=terms,
        leads=_word_leads(terms, words),
        k0=k0,
        kdl=kdl,
        visible_sql=visible_sql,
        limit=limit,
    )
    if theta <= 0:
        return None
    plan = _probe_plan(terms, theta)
    if plan is None:
        return None
    probed = plan.probed
    read = [t for t in terms if t not in probed]
    where, where_params = visible_sql
    branch = (
        f"(SELECT doc_id, {_contribution()} AS s"  # noqa: S608 - a fixed expression
        " FROM search_searchposting WHERE term_id = %s ORDER BY doc_id)"
    )
    floor = theta * (1 - _SLACK)  # what a document must be able to reach to stay
    params: list[Any] = []
    for term in read:
        params += [term.weight, k0, kdl, term.term_id]
    still_to_probe = sum(t.bound for t in probed)
    params.append(floor - still_to_probe)
    stages = ["candidates_0 AS (SELECT doc_id, score FROM partial WHERE score >= %s)"]
    for i, term in enumerate(probed, start=1):
        still_to_probe -= term.bound
        if plan.merged:
            # With nested loops off: the list merged with the candidates, both in
            # doc_id order, never probed once per candidate.
            stage = f"""
                SELECT c.doc_id, c.score + coalesce({_contribution(alias="p")}, 0) AS score
                FROM candidates_{i - 1} c
                LEFT JOIN search_searchposting p ON p.term_id = %s AND p.doc_id = c.doc_id
            """  # noqa: S608 - a fixed expression
        else:
            # An aggregate keeps the planner from turning the probe into a join that
            # reads the whole list: it runs once per remaining candidate.
            stage = f"""
                SELECT c.doc_id, c.score + coalesce(p.s, 0) AS score
                FROM candidates_{i - 1} c
                CROSS JOIN LATERAL (
                    SELECT sum({_contribution()}) AS s
                    FROM search_searchposting WHERE term_id = %s AND doc_id = c.doc_id
                ) p"""  # noqa: S608 - a fixed expression
        params += [term.weight, k0, kdl, term.term_id]
        stages.append(
            f"candidates_{i} AS (SELECT doc_id, score FROM ({stage}) s WHERE score >= %s)"  # noqa: S608
        )
        params.append(floor - still_to_probe)
    params += [*where_params, limit]
    sql = f"""
        WITH partial AS (
            SELECT doc_id, sum(s) AS score
            FROM ({" UNION ALL ".join([branch] * len(read))}) AS contributions
            GROUP BY doc_id
        ),
        {", ".join(stages)},
        visible AS (
            SELECT ref, score FROM {_visible(target, f"candidates_{len(probed)}", where, last=True)}
            ORDER BY {_tied("score")}, ref
            LIMIT %s
        )
        SELECT coalesce(array_agg(ref ORDER BY {_tied("score")}, ref), '{{}}'),
               coalesce(array_agg(score ORDER BY {_tied("score")}, ref), '{{}}')
        FROM visible
    """  # noqa: S608 - identifiers come from fixed tables above, values are parameters
    with transaction.atomic(), connection.cursor() as cursor:
        _plan_for_posting_lists(cursor, merge_joins=plan.merged)
        cursor.execute(sql, params)
        refs, scores = cursor.fetchone()
    return [Hit(ref_id=int(r), score=float(s)) for r, s in zip(refs, scores, strict=True)]


@dataclass(frozen=True)
class _ProbePlan:
    probed: list[_QueryTerm]  # strongest first
    merged: bool  # completed by merging the probed lists, not by probing per candidate


def _probe_plan(terms: list[_QueryTerm], theta: float) -> _ProbePlan | None:
    """The terms to probe rather than read, and how; None when reading every list is
    estimated to cost least.

    Any set of terms whose bounds sum below θ may be probed. Each choice is priced in
    postings: the lists read, plus the cheaper way to complete the candidates —
    documents whose partial score from the lists read can still reach θ — with the
    probed terms: ``PROBE_COST`` per candidate and term (fewer in truth: each stage
    drops some), or ``MERGE_COST`` per posting of the probed lists. The choices are the
    subsets of the longest lists, so a query costs at most 2^``MAX_PROBED`` estimates.
    """
    floor = theta * (1 - _SLACK)
    longest = sorted((t for t in terms if t.df >= PROBE_MIN_DF), key=lambda t: (-t.df, t.term_id))
    longest = longest[:MAX_PROBED]
    best: _ProbePlan | None = None
    best_cost = float(sum(t.df for t in terms))  # reading every list
    for mask in range(1, 1 << len(longest)):
        probed = [t for i, t in enumerate(longest) if mask >> i & 1]
        ceiling = sum(t.bound for t in probed)
        if ceiling >= floor:
            continue
        read = [t for t in terms if t not in probed]
        probing = PROBE_COST * _candidates_estimate(read, floor - ceiling) * len(probed)
        merging = MERGE_COST * sum(t.df for t in probed)
        cost = sum(t.df for t in read) + min(probing, merging)
        if cost < best_cost:
            strongest_first = sorted(probed, key=lambda t: (-t.bound, t.term_id))
            best, best_cost = _ProbePlan(strongest_first, merged=merging < probing), cost
    return best


def _candidates_estimate(read: list[_QueryTerm], floor: float) -> float:
    """How many documents of the lists in ``read`` may score ``floor`` from them.

    The documents of a list whose bound reaches the floor alone — all of them when a
    typical posting (tf 1, average length: ``weight / (1 + k1)``) reaches it, else
    ``RARE_POSTING_SHARE`` of them — plus the expected number holding a pair or a
    triple of terms that reach it only together (terms taken as independent:
    N · f1 · f2 = df1 · f2)."""
    alone = [t for t in read if t.bound >= floor]
    rest = [t for t in read if t.bound < floor]
    estimate = sum(
        t.df * (1.0 if t.weight / (1 + K1) >= floor else RARE_POSTING_SHARE) for t in alone
    )
    for i, a in enumerate(rest):
        for j in range(i + 1, len(rest)):
            b = rest[j]
            if a.bound + b.bound >= floor:
                estimate += a.df * b.frequency
                continue
            for c in rest[j + 1 :]:
                if a.bound + b.bound + c.bound >= floor:
                    estimate += a.df * b.frequency * c.frequency
    return estimate


def _seed_threshold(
    *,
    target: Target,
    terms: list[_QueryTerm],
    leads: list[_QueryTerm],
    k0: float,
    kdl: float,
    visible_sql: tuple[str, list[object]],
    limit: int,
) -> float:
    """The k-th best full score among the visible seed documents (0 when fewer than k
    of them are visible): a score the true k-th best reaches, since the seeds are real
    candidates with their real scores.

    The seeds are the documents that hold the strongest query word most (``leads``: a
    word stands for its parts, ``cd4`` for ``cd`` and ``4``) and, when the two strongest
    words' lists are short next to the query's, the documents that hold both, best by
    the two words' contributions. The best documents of a query tend to hold several of
    its rarer words, so the pairs bring θ close to the true k-th best (a median 0.86 of
    it from the single term alone, 0.998 with the pairs, on the 100k-chunk benchmark),
    and the closer θ is, the more lists can be probed instead of read."""
    strongest = leads
    pair = _seed_pair(strongest, total_df=sum(t.df for t in terms))
    single_depth, pair_depth = _seed_depths(
        limit=limit, filtered=visible_sql[0] != "TRUE", paired=pair is not None
    )
    seeds = [
        f"""(SELECT doc_id FROM search_searchposting WHERE term_id = %s
            ORDER BY {_contribution(weight="1.0::float8")} DESC, doc_id LIMIT %s)"""  # noqa: S608
    ]
    params: list[Any] = [strongest[0].term_id, k0, kdl, single_depth]
    if pair is not None:
        # Merged on doc_id: both lists are read in index order, one pass each.
        seeds.append(
            f"""(SELECT a.doc_id FROM search_searchposting a
                JOIN search_searchposting b ON b.term_id = %s AND b.doc_id = a.doc_id
                WHERE a.term_id = %s
                ORDER BY {_contribution(alias="a")} + {_contribution(alias="b")} DESC, a.doc_id
                LIMIT %s)"""  # noqa: S608 - a fixed expression; values are parameters
        )
        shorter, longer = sorted(pair, key=lambda t: (t.df, t.term_id))
        params += [longer.term_id, shorter.term_id, shorter.weight, k0, kdl]
        params += [longer.weight, k0, kdl, pair_depth]
    where, where_params = visible_sql
    sql = f"""
        WITH seed AS ({" UNION ".join(seeds)}),
        scored AS (
            -- LATERAL: a primary-key probe per (document, term), never a scan of a list.
            SELECT seed.doc_id, full_score.score
            FROM seed
            CROSS JOIN LATERAL (
                SELECT sum({_contribution(weight="q.w", alias="p")}) AS score
                FROM unnest(%s::bigint[], %s::float8[]) AS q(term_id, w)
                JOIN search_searchposting p ON p.term_id = q.term_id AND p.doc_id = seed.doc_id
            ) full_score
        )
        SELECT score FROM {_visible(target, "scored", where)}
        ORDER BY score DESC
        LIMIT 1 OFFSET %s
    """  # noqa: S608 - identifiers come from fixed tables above, values are parameters
    params += [
        k0,
        kdl,
        int_array_literal(t.term_id for t in terms),
        array_literal(t.weight for t in terms),
        *where_params,
        limit - 1,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return float(row[0]) if row else 0.0


def _word_leads(terms: list[_QueryTerm], words: list[list[str]]) -> list[_QueryTerm]:
    """One term per query word, strongest word first: the word's rarest known term (the
    whole word: its documents hold its parts too), ranked by the bounds of all the
    word's terms together."""
    known = {t.text: t for t in terms}
    strength: dict[int, tuple[float, _QueryTerm]] = {}
    for word in words:
        present = [known[text] for text in dict.fromkeys(word) if text in known]
        if not present:
            continue
        lead = min(present, key=lambda t: (t.df, t.term_id))
        bound = sum(t.bound for t in present)
        if bound > strength.get(lead.term_id, (0.0, lead))[0]:
            strength[lead.term_id] = (bound, lead)
    ranked = sorted(strength.values(), key=lambda item: (-item[0], item[1].df, item[1].term_id))
    return [lead for _, lead in ranked]


def _seed_pair(
    strongest: list[_QueryTerm], *, total_df: int
) -> tuple[_QueryTerm, _QueryTerm] | None:
    """The two strongest words' terms, when merging their lists costs at most
    ``PAIR_SEED_SHARE`` of the query's postings (else the seeding would cost about
    what it could save: a two-word query's pair is the whole query)."""
    if len(strongest) < 2:
        return None
    first, second = strongest[0], strongest[1]
    if first.df + second.df > PAIR_SEED_SHARE * total_df:
        return None
    return first, second


def _seed_depths(*, limit: int, filtered: bool, paired: bool) -> tuple[int, int]:
    """How many seeds to take from the strongest term's list and from the pair's.

    Each seed costs a probe per query term, so fewer is cheaper, and θ only has to be
    good enough: on the 100k-chunk benchmark 20 single-term seeds prune about as many
    queries as 100 did, and 10 + 40 with a pair came closest to the true k-th best of
    the splits tried (docs/BENCHMARKS.md). A scope filter needs enough seeds for k of
    them to be visible — a filter keeping a tenth of the corpus, ten times k."""
    if filtered:
        return max(limit * 20, 200), (max(limit * 10, 100) if paired else 0)
    return (max(limit, 10), max(limit * 2, 40)) if paired else (max(limit * 2, 20), 0)


def _plan_for_posting_lists(cursor: Any, *, merge_joins: bool = False) -> None:
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
