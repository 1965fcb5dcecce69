from __future__ import annotations

import math

import bm25s
import pytest

from memory.domain.access import ContextAccess
from memory.models import Chunk
from memory.search.analyzer import analyze
from memory.search.models import SearchDoc, SearchPosting, SearchStats, SearchTerm
from memory.search.texts import chunk_index_text
from memory.selectors.search import search
from memory.services.ingest.documents import document_create, document_delete

CORPUS = [
    ("Refunds", "Customers returning purchases within 30 days get a full refund."),
    ("Shipping", "Purchases ship in two days. Returning customers get free shipping."),
    ("Warranty", "The MLWK3LL/A laptop has a one-year warranty; returns need the receipt."),
    ("Stores", "Our stores accept returns of purchases made online or in a store."),
    ("Gift cards", "Gift cards cannot be returned, refunded or exchanged for cash."),
    ("Support", "Call support about a laptop that fails to boot after the warranty ends."),
]
QUERIES = [
    "returning purchases",
    "refund for returned purchases",
    "MLWK3LL/A warranty",
    "laptop",
    "free shipping for returning customers",
]


@pytest.fixture
def corpus(access: ContextAccess) -> list[Chunk]:
    for title, text in CORPUS:
        document_create(access=access, title=title, text=text, scope="org/acme")
    return list(Chunk.objects.filter(context=access.context).select_related("document"))


def _reference(chunks: list[Chunk], query: str) -> dict[int, float]:
    model = bm25s.BM25(method="lucene", k1=1.2, b=0.75, dtype="float64")
    model.index(
        [analyze(chunk_index_text(title=c.document.title, text=c.text)) for c in chunks],
        show_progress=False,
    )
    scores = model.get_scores(analyze(query))
    return {c.pk: float(s) for c, s in zip(chunks, scores, strict=True) if s > 0}


@pytest.mark.parametrize("query", QUERIES)
def test_bm25_scores_equal_bm25s_lucene(
    access: ContextAccess, corpus: list[Chunk], query: str
) -> None:
    expected = _reference(corpus, query)
    results = search(access=access, query=query, mode="bm25", k=100).results
    got = {r.id: r.score for r in results}
    assert set(got) == set(expected)
    for chunk_id, score in expected.items():
        assert math.isclose(got[chunk_id], score, rel_tol=1e-6), (chunk_id, got, expected)
    assert [r.score for r in results] == sorted(got.values(), reverse=True)


def test_statistics_follow_writes_and_deletes(access: ContextAccess, corpus: list[Chunk]) -> None:
    stats = SearchStats.objects.get(context=access.context, target="chunk")
    assert stats.doc_count == len(corpus)
    assert stats.total_length == sum(c.token_count for c in corpus)
    document_delete(access=access, document=corpus[0].document)
    stats.refresh_from_db()
    assert stats.doc_count == len(corpus) - 1
    remaining = set(SearchDoc.objects.values_list("id", flat=True))
    assert set(SearchPosting.objects.values_list("doc_id", flat=True)) == remaining


def test_document_frequencies_follow_postings(access: ContextAccess, corpus: list[Chunk]) -> None:
    def df() -> dict[str, int]:
        return dict(SearchTerm.objects.filter(target="chunk").values_list("text", "df"))

    assert df()["laptop"] == 2 and df()["warranti"] == 2
    document_delete(
        access=access, document=next(c for c in corpus if c.document.title == "Support").document
    )
    assert df()["laptop"] == 1 and df()["warranti"] == 1
    counted = {
        term.text: SearchPosting.objects.filter(term_id=term.pk).count()
        for term in SearchTerm.objects.filter(target="chunk")
    }
    assert counted == df()
