from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db.models import QuerySet

from memory.domain.access import ContextAccess
from memory.kernel.errors import NotFound, ValidationFailed
from memory.models import Document, Keyword, KeywordLink
from memory.search.keywords import KEYWORD_MIN_SCORE, keyphrases_extract
from memory.selectors.documents import (
    document_keywords,
    keyword_get,
    keyword_list,
    keyword_search,
)
from memory.services.ingest.documents import document_create, document_delete, documents_embed

TEXT = (
    "Hybrid search is a blend of keyword ranking and vector similarity. The blend uses "
    "reciprocal rank fusion. Vector similarity is the cosine of two embeddings, and "
    "keyword ranking is BM25."
)


def test_rake_keeps_the_five_best_phrases_scoring_at_least_the_floor() -> None:
    phrases = keyphrases_extract(TEXT)
    # degree/frequency: a 3-word phrase of once-seen words scores 9, a 2-word one 4
    assert [(p.text, p.score) for p in phrases] == [
        ("reciprocal rank fusion", 9.0),
        ("vector similarity", 4.0),
        ("keyword ranking", 4.0),
        ("hybrid search", 4.0),
        ("embeddings", 1.0),
    ]
    assert all(p.score >= KEYWORD_MIN_SCORE for p in phrases)


def test_rake_needs_no_nltk_data_and_handles_text_without_phrases() -> None:
    assert keyphrases_extract("the of and 1999 2000 .") == []


def _texts(keywords: QuerySet[Keyword]) -> list[tuple[str, int]]:
    return [(k.text, k.visible_count) for k in keywords]  # type: ignore[attr-defined]


@pytest.fixture
def documents(access: ContextAccess) -> dict[str, Document]:
    shared = "Quarterly revenue grew. The board approved the hiring plan."
    return {
        "a": document_create(access=access, title="", text=shared, scope="org/acme"),
        "b": document_create(access=access, title="", text=shared, scope="org/acme"),
        "secret": document_create(
            access=access,
            title="",
            text=f"{shared} Major layoffs loom.",
            scope="org/acme/board",
        ),
    }


def test_keyword_nodes_count_documents_and_link_chunks(
    access: ContextAccess, documents: dict[str, Document]
) -> None:
    keyword = Keyword.objects.get(context=access.context, text="quarterly revenue grew")
    assert keyword.document_count == 3
    links = KeywordLink.objects.filter(keyword=keyword).order_by("document_id")
    assert [(link.document_id, link.chunk_id is not None, link.scope) for link in links] == [
        (documents["a"].pk, True, "org/acme"),
        (documents["b"].pk, True, "org/acme"),
        (documents["secret"].pk, True, "org/acme/board"),
    ]


def test_deleting_a_document_decrements_and_removes_keywords(
    access: ContextAccess, documents: dict[str, Document]
) -> None:
    document_delete(access=access, document=documents["secret"])
    assert Keyword.objects.get(text="quarterly revenue grew").document_count == 2
    assert not Keyword.objects.filter(text="major layoffs loom").exists()
    assert not KeywordLink.objects.filter(document_id=documents["secret"].pk).exists()


def test_listing_counts_only_visible_documents(
    documents: dict[str, Document], reader: Callable[..., ContextAccess]
) -> None:
    everything = keyword_list(access=reader("read:*"))
    assert ("quarterly revenue grew", 3) in _texts(everything)
    assert ("major layoffs loom", 1) in _texts(everything)
    limited = _texts(keyword_list(access=reader("read:org/acme")))
    assert ("quarterly revenue grew", 2) in limited
    assert "major layoffs loom" not in [text for text, _ in limited]


def test_listing_filters_by_count_and_sorts(
    documents: dict[str, Document], reader: Callable[..., ContextAccess]
) -> None:
    acme = reader("read:org/acme/*")
    assert _texts(keyword_list(access=acme, min_document_count=3)) == [
        ("board approved", 3),
        ("hiring plan", 3),
        ("quarterly revenue grew", 3),
    ]
    by_text = [t for t, _ in _texts(keyword_list(access=acme, sort="text"))]
    assert by_text == sorted(by_text)
    fewest_first = [n for _, n in _texts(keyword_list(access=acme, sort="document_count"))]
    assert fewest_first == sorted(fewest_first) and fewest_first[0] == 1
    with pytest.raises(ValidationFailed):
        keyword_list(access=acme, sort="embedding")


def test_get_by_text_is_gated_by_scope(
    documents: dict[str, Document], reader: Callable[..., ContextAccess]
) -> None:
    assert (
        keyword_get(access=reader("read:*"), text="  Major  LAYOFFS loom ").text
        == "major layoffs loom"
    )
    with pytest.raises(NotFound):
        keyword_get(access=reader("read:org/acme"), text="major layoffs loom")


def test_document_keywords_best_first(
    documents: dict[str, Document], reader: Callable[..., ContextAccess]
) -> None:
    found = document_keywords(access=reader("read:org/acme"), document=documents["a"])
    assert [(k.text, k.document_count) for k in found] == [
        ("quarterly revenue grew", 2),
        ("board approved", 2),
        ("hiring plan", 2),
    ]


def test_keyword_vector_search_is_gated_by_scope(
    documents: dict[str, Document], reader: Callable[..., ContextAccess]
) -> None:
    documents_embed(document_ids=[d.pk for d in documents.values()])
    everything = keyword_search(access=reader("read:*"), q="layoffs", k=1)
    assert [m.keyword.text for m in everything] == ["major layoffs loom"]
    assert 0 < everything[0].similarity <= 1
    limited = keyword_search(access=reader("read:org/acme"), q="layoffs", k=5)
    assert "major layoffs loom" not in [m.keyword.text for m in limited]
    assert len(limited) == 3
