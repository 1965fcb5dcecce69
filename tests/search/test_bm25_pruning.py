"""MaxScore pruning (memory/search/bm25.py) returns exactly the unpruned top k."""

from __future__ import annotations

import math
import random

import bm25s
import pytest
from django.db.models import Max, Min

from memory.access import ContextAccess
from memory.models import Chunk
from memory.scopes import Grants
from memory.search import bm25
from memory.search.analyzer import analyze
from memory.search.bm25 import bm25_rank, corpus_visible_sql
from memory.search.models import SearchPosting, SearchTerm, Target
from memory.search.texts import chunk_index_text
from memory.services.documents import document_create

COMMON = ["patients", "study", "cells", "results", "protein"]
RARE = ["zebrafish", "glaxosmithkline", "mononucleosomes", "carvedilol", "econometrica"]
QUERIES = [
    "zebrafish patients study",
    "carvedilol cells results protein",
    "econometrica study",
    "mononucleosomes glaxosmithkline patients cells",
    "patients study cells",
]


@pytest.fixture
def corpus(access: ContextAccess) -> list[Chunk]:
    """Common words in most documents, each rare word in a few, lengths that vary."""
    rng = random.Random(5)
    for i in range(160):
        words = [w for w in COMMON if rng.random() < 0.7] * rng.randint(1, 3)
        words += [w for w in RARE if rng.random() < 0.06]
        words += [f"filler{rng.randint(0, 400)}" for _ in range(rng.randint(3, 40))]
        rng.shuffle(words)
        scope = "org/a" if i % 3 else "org/b"
        document_create(access=access, title=f"Doc {i}", text=" ".join(words) + ".", scope=scope)
    return list(Chunk.objects.filter(context=access.context).select_related("document"))


def _ranked(access: ContextAccess, query: str, *, prune: bool, grants: str = "*") -> list:
    visible = corpus_visible_sql(Grants.from_strings([f"read:{grants}"]).read_q())
    saved = bm25.MAXSCORE_MIN_POSTINGS, bm25.PROBE_COST
    bm25.MAXSCORE_MIN_POSTINGS, bm25.PROBE_COST = (0, 0) if prune else (10**12, 20)
    try:
        return bm25_rank(
            context_id=access.context.pk,
            target=Target.CHUNK,
            query=query,
            visible_sql=visible,
            limit=10,
        )
    finally:
        bm25.MAXSCORE_MIN_POSTINGS, bm25.PROBE_COST = saved


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("grants", ["*", "org/b"])
def test_pruned_top_k_equals_the_full_ranking(
    access: ContextAccess, corpus: list[Chunk], query: str, grants: str
) -> None:
    pruned = _ranked(access, query, prune=True, grants=grants)
    full = _ranked(access, query, prune=False, grants=grants)
    assert len(pruned) == 10
    assert [h.ref_id for h in pruned] == [h.ref_id for h in full]
    for a, b in zip(pruned, full, strict=True):
        assert math.isclose(a.score, b.score, rel_tol=1e-12)


def test_pruning_skips_common_terms_and_matches_bm25s(
    access: ContextAccess, corpus: list[Chunk]
) -> None:
    query = "zebrafish patients study"
    terms, avgdl = bm25._query_terms(
        context_id=access.context.pk, target=Target.CHUNK, bag=bm25.Counter(analyze(query))
    )
    saved = bm25.PROBE_COST
    bm25.PROBE_COST = 0
    try:
        pruned = bm25._maxscore_ranked(
            target=Target.CHUNK, terms=terms, avgdl=avgdl, visible_sql=("TRUE", []), limit=5
        )
    finally:
        bm25.PROBE_COST = saved
    assert pruned is not None, "the rare term's documents outscore the common terms' bounds"
    model = bm25s.BM25(method="lucene", k1=1.2, b=0.75, dtype="float64")
    model.index(
        [analyze(chunk_index_text(title=c.document.title, text=c.text)) for c in corpus],
        show_progress=False,
    )
    scores = model.get_scores(analyze(query))
    expected = sorted(
        ((float(s), c.pk) for c, s in zip(corpus, scores, strict=True)), key=lambda x: (-x[0], x[1])
    )[:5]
    assert [h.ref_id for h in pruned] == [pk for _, pk in expected]
    for hit, (score, _) in zip(pruned, expected, strict=True):
        assert math.isclose(hit.score, score, rel_tol=1e-6)


def test_term_bounds_cover_every_posting(access: ContextAccess, corpus: list[Chunk]) -> None:
    actual = {
        row["term_id"]: row
        for row in SearchPosting.objects.values("term_id").annotate(tf=Max("tf"), dl=Min("dl"))
    }
    terms = SearchTerm.objects.filter(context=access.context, target="chunk", df__gt=0)
    assert terms.exists()
    for term in terms:
        assert term.max_tf == actual[term.pk]["tf"]
        assert term.min_dl == actual[term.pk]["dl"]
