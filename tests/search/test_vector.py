from __future__ import annotations

from typing import Any

import pytest

from memory.domain.access import ContextAccess
from memory.selectors.search import search
from memory.services.ingest.documents import document_create, documents_embed

TOPICS = ["refund", "shipping", "warranty", "invoice", "discount", "delivery"]


@pytest.fixture
def crowded(access: ContextAccess) -> None:
    """60 chunks in org/bulk and 6 in org/rare: a filter that keeps under 10%."""
    ids = [
        document_create(
            access=access, title="", text=f"Note {i} about {TOPICS[i % 6]}.", scope="org/bulk"
        ).pk
        for i in range(60)
    ]
    ids += [
        document_create(
            access=access, title="", text=f"Rare note about {topic}.", scope="org/rare"
        ).pk
        for topic in TOPICS
    ]
    documents_embed(document_ids=ids)


@pytest.mark.parametrize("exact_scan_max", [0, 5000])
def test_a_selective_scope_filter_still_returns_k_rows(
    access: ContextAccess, crowded: None, settings: Any, exact_scan_max: int
) -> None:
    # 0 sends every query through the HNSW graph walk; 5000 scans these rows exactly.
    settings.MEMORY_SEARCH_EXACT_SCAN_MAX = exact_scan_max
    response = search(access=access, query="refund", mode="vector", k=5, scopes=["org/rare"])
    assert len(response.results) == 5
    assert {r.scope for r in response.results} == {"org/rare"}
    assert response.results[0].text == "Rare note about refund."


def test_graph_walk_and_exact_scan_agree(
    access: ContextAccess, crowded: None, settings: Any
) -> None:
    def ranked() -> list[int]:
        return [r.id for r in search(access=access, query="delivery", mode="vector", k=10).results]

    settings.MEMORY_SEARCH_EXACT_SCAN_MAX = 0
    walked = ranked()
    settings.MEMORY_SEARCH_EXACT_SCAN_MAX = 5000
    assert walked == ranked()


def test_k_is_capped_by_the_visible_rows(access: ContextAccess, crowded: None) -> None:
    response = search(access=access, query="refund", mode="vector", k=50, scopes=["org/rare"])
    assert len(response.results) == 6


def test_a_wide_filter_walks_the_graph_and_finds_what_the_exact_scan_finds(
    access: ContextAccess, crowded: None, settings: Any
) -> None:
    def found() -> set[int]:
        response = search(access=access, query="delivery", mode="vector", k=10, scopes=["org/bulk"])
        assert len(response.results) == 10
        return {r.id for r in response.results}

    # With no exact scan, the filter's rows are not counted: the planner's estimate is taken
    # and the graph walked; the walk must keep what the exact scan of the same rows keeps.
    settings.MEMORY_SEARCH_EXACT_SCAN_MAX = 0
    walked = found()
    settings.MEMORY_SEARCH_EXACT_SCAN_MAX = 5000
    assert walked == found()
