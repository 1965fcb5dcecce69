"""MaxScore pruning: the exact BM25 top k without reading the longest posting lists.

A lower bound θ on the k-th best visible score is seeded from a few fully scored
documents (``_seed_threshold``); the longest lists whose bounds sum below θ are then
probed instead of read (``_probe_plan`` prices the choice), and the candidates from the
lists read are completed with the probed terms in stages that drop them as soon as they
cannot reach θ. The result is exactly the top k of the exact plan (bm25_exact.py), which
tests/search/test_bm25_pruning.py checks on a fixture; docs/SEARCH.md explains the method
and docs/BENCHMARKS.md records how the constants below were chosen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from memory.infra.pg_arrays import array_literal, int_array_literal
from memory.infra.replicas import read_connection
from memory.search.bm25_scoring import (
    K1,
    Hit,
    QueryTerm,
    contribution_sql,
    hits_from,
    length_params,
    plan_for_posting_lists,
    posting_list_sql,
    tied_sql,
    visible_rows_sql,
)
from memory.search.models import Target

# Below this many postings a query reads its lists in a few milliseconds: pruning
# (two statements instead of one) would not pay for itself.
MAXSCORE_MIN_POSTINGS = 5_000
# A list shorter than this is read, never probed: reading it costs less than probing
# it for the candidates of the other lists.
PROBE_MIN_DF = 1_000
# What a probe is charged, in postings read. A probe costs about ten postings read,
# merged and summed, but the estimate charges every candidate for every probed term
# while the staged probes drop most candidates after the first: 3 is the charge that
# minimised the 100k-chunk benchmark's total (the sweep: docs/BENCHMARKS.md).
PROBE_COST = 3
# What completing the candidates with a term by merging its whole list costs, per
# posting of that list: a merge join reads a posting in well under half the time the
# partial score's merge-and-sum takes (measured: docs/BENCHMARKS.md). Many candidates
# and a list of common words: merging is cheaper.
MERGE_COST = 0.4
MAX_PROBED = 6  # the longest lists considered for probing
# The share of a list's postings taken to reach a floor above what a typical posting
# (tf 1 in a document of average length) scores: on the benchmark corpus over half of
# a list's postings score above a typical one, fewer the higher the floor
# (docs/BENCHMARKS.md).
RARE_POSTING_SHARE = 0.3
# θ is also seeded from the documents that hold the two strongest terms, when their
# two lists come to at most this share of the query's postings.
PAIR_SEED_SHARE = 0.4
# Scores are sums of doubles added in different orders by different plans: bounds are
# compared with this much slack so that rounding can never prune a true top-k document.
_SLACK = 1e-9


def maxscore_rank(
    *,
    target: Target,
    terms: list[QueryTerm],
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
    if len(terms) < 2 or sum(t.df for t in terms) < MAXSCORE_MIN_POSTINGS:
        return None
    if not any(t.df >= PROBE_MIN_DF for t in terms):
        return None
    k0, kdl = length_params(avgdl)
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
                SELECT c.doc_id, c.score + coalesce({contribution_sql(alias="p")}, 0) AS score
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
                    SELECT sum({contribution_sql()}) AS s
                    FROM search_searchposting WHERE term_id = %s AND doc_id = c.doc_id
                ) p"""  # noqa: S608 - a fixed expression
        params += [term.weight, k0, kdl, term.term_id]
        stages.append(
            f"candidates_{i} AS (SELECT doc_id, score FROM ({stage}) s WHERE score >= %s)"  # noqa: S608
        )
        params.append(floor - still_to_probe)
    params += [*where_params, limit]
    last = visible_rows_sql(target, f"candidates_{len(probed)}", where, last=True)
    sql = f"""
        WITH partial AS (
            SELECT doc_id, sum(s) AS score
            FROM ({" UNION ALL ".join([posting_list_sql()] * len(read))}) AS contributions
            GROUP BY doc_id
        ),
        {", ".join(stages)},
        visible AS (
            SELECT ref, score FROM {last}
            ORDER BY {tied_sql("score")}, ref
            LIMIT %s
        )
        SELECT coalesce(array_agg(ref ORDER BY {tied_sql("score")}, ref), '{{}}'),
               coalesce(array_agg(score ORDER BY {tied_sql("score")}, ref), '{{}}')
        FROM visible
    """  # noqa: S608 - identifiers come from fixed tables above, values are parameters
    connection = read_connection()  # a replica in a read scope
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        plan_for_posting_lists(cursor, merge_joins=plan.merged)
        cursor.execute(sql, params)
        refs, scores = cursor.fetchone()
    return hits_from(refs, scores)


@dataclass(frozen=True)
class _ProbePlan:
    probed: list[QueryTerm]  # strongest first
    merged: bool  # completed by merging the probed lists, not by probing per candidate


def _probe_plan(terms: list[QueryTerm], theta: float) -> _ProbePlan | None:
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


def _candidates_estimate(read: list[QueryTerm], floor: float) -> float:
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
    terms: list[QueryTerm],
    leads: list[QueryTerm],
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
    its rarer words, so the pairs bring θ much closer to the true k-th best than the
    single term alone (docs/BENCHMARKS.md), and the closer θ is, the more lists can be
    probed instead of read."""
    strongest = leads
    pair = _seed_pair(strongest, total_df=sum(t.df for t in terms))
    single_depth, pair_depth = _seed_depths(
        limit=limit, filtered=visible_sql[0] != "TRUE", paired=pair is not None
    )
    seeds = [
        f"""(SELECT doc_id FROM search_searchposting WHERE term_id = %s
            ORDER BY {contribution_sql(weight="1.0::float8")} DESC, doc_id LIMIT %s)"""  # noqa: S608
    ]
    params: list[Any] = [strongest[0].term_id, k0, kdl, single_depth]
    if pair is not None:
        # Merged on doc_id: both lists are read in index order, one pass each.
        seeds.append(
            f"""(SELECT a.doc_id FROM search_searchposting a
                JOIN search_searchposting b ON b.term_id = %s AND b.doc_id = a.doc_id
                WHERE a.term_id = %s
                ORDER BY {contribution_sql(alias="a")} + {contribution_sql(alias="b")} DESC,
                    a.doc_id
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
                SELECT sum({contribution_sql(weight="q.w", alias="p")}) AS score
                FROM unnest(%s::bigint[], %s::float8[]) AS q(term_id, w)
                JOIN search_searchposting p ON p.term_id = q.term_id AND p.doc_id = seed.doc_id
            ) full_score
        )
        SELECT score FROM {visible_rows_sql(target, "scored", where)}
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
    with read_connection().cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return float(row[0]) if row else 0.0


def _word_leads(terms: list[QueryTerm], words: list[list[str]]) -> list[QueryTerm]:
    """One term per query word, strongest word first: the word's rarest known term (the
    whole word: its documents hold its parts too), ranked by the bounds of all the
    word's terms together."""
    known = {t.text: t for t in terms}
    strength: dict[int, tuple[float, QueryTerm]] = {}
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


def _seed_pair(strongest: list[QueryTerm], *, total_df: int) -> tuple[QueryTerm, QueryTerm] | None:
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
    good enough: the depths below are the ones that pruned as well as deeper seeding
    and came closest to the true k-th best of the splits tried on the 100k-chunk
    benchmark (docs/BENCHMARKS.md). A scope filter needs enough seeds for k of them to
    be visible — a filter keeping a tenth of the corpus, ten times k."""
    if filtered:
        return max(limit * 20, 200), (max(limit * 10, 100) if paired else 0)
    return (max(limit, 10), max(limit * 2, 40)) if paired else (max(limit * 2, 20), 0)
