"""BM25 in PostgreSQL: which plan ranks a query.

The modules beside this one:

- bm25_postings.py — what indexing writes: search documents, the term dictionary and
  the posting lists (the triggers keep the statistics);
- bm25_scoring.py — Lucene's formula, a query's term statistics and the SQL pieces the
  plans share (per-posting contribution, the live/visible look-up, the tie rule);
- bm25_exact.py — the exact plan: every posting of every query term, merged and summed;
- bm25_pruning.py — MaxScore: the same top k without reading the longest lists, when
  that is estimated to pay.
"""

from __future__ import annotations

from collections import Counter

from memory.search import bm25_exact, bm25_pruning
from memory.search.analyzer import analyze_words
from memory.search.bm25_postings import (
    IndexBatch,
    IndexItem,
    postings_delete,
    postings_replace,
    postings_replace_batches,
)
from memory.search.bm25_scoring import Hit, corpus_visible_sql, query_terms, ranking_key
from memory.search.models import Target

# The search package's BM25 interface: callers import from here, not from the parts.
__all__ = [
    "Hit",
    "IndexBatch",
    "IndexItem",
    "bm25_rank",
    "corpus_visible_sql",
    "postings_delete",
    "postings_replace",
    "postings_replace_batches",
    "ranking_key",
]


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
    filter, ``bm25_scoring.corpus_visible_sql``). Scoring reads only the query terms'
    posting lists, pruned (bm25_pruning.py) when skipping the longest of them pays, else
    all of them (bm25_exact.py); both give the same ranking.
    """
    words = analyze_words(query)
    bag = Counter(term for word in words for term in word)
    terms, avgdl = query_terms(context_id=context_id, target=target, bag=bag) if bag else ([], 0)
    if not terms or limit <= 0:
        return []
    pruned = bm25_pruning.maxscore_rank(
        target=target,
        terms=terms,
        words=words,
        avgdl=avgdl,
        visible_sql=visible_sql,
        limit=limit,
    )
    if pruned is not None:
        return pruned
    return bm25_exact.exact_rank(
        target=target, terms=terms, avgdl=avgdl, visible_sql=visible_sql, limit=limit
    )
