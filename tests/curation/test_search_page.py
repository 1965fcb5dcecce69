"""The search screen: active search, mode and target switch, scope filter, explanations."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from memory.access import ContextAccess
from memory.services.documents import document_create, documents_embed
from tests.curation.conftest import Memory, page

pytestmark = pytest.mark.django_db


@pytest.fixture
def corpus(access: ContextAccess) -> None:
    docs = [
        document_create(
            access=access,
            title="Harbour",
            text="The harbour crane lifted containers onto the ship at dawn.",
            scope="org/acme",
        ),
        document_create(
            access=access,
            title="Orchard",
            text="Apples ripen in the orchard; the harvest starts in September.",
            scope="org/acme",
        ),
        document_create(
            access=access,
            title="Secret",
            text="The secret harbour plan is kept in another team's scope.",
            scope="team/blue",
        ),
    ]
    documents_embed(document_ids=[d.pk for d in docs])


def test_empty_page_shows_the_form(viewer: Client, base: str) -> None:
    html = page(viewer.get(f"{base}/search/"))

    assert 'hx-trigger="input changed delay:300ms, search"' in html
    assert 'hx-target="#search-results"' in html and 'hx-push-url="true"' in html
    assert "Type to search." in html
    assert 'aria-current="page">Search' in html


def test_bm25_results_carry_their_explanation(viewer: Client, base: str, corpus: None) -> None:
    html = page(viewer.get(f"{base}/search/", {"q": "harbour crane", "mode": "bm25"}))

    assert "harbour crane lifted containers" in html
    assert "rank 1 · score" in html
    assert "Apples ripen" not in html
    assert "<dt>Vector</dt><dd>—</dd>" in html  # bm25 mode has no vector rank


def test_hybrid_shows_both_ranks_and_the_fused_score(
    viewer: Client, base: str, corpus: None
) -> None:
    html = page(viewer.get(f"{base}/search/", {"q": "harbour crane", "mode": "hybrid"}))

    first = html[html.index('class="card search-result"') :]
    first = first[: first.index("</li>")]
    assert "harbour crane lifted" in first
    assert "rank 1 · score" in first and "rank 1 · cosine" in first
    assert "<dt>Fused</dt><dd>0.0" in first


def test_scope_filter_narrows_results(viewer: Client, base: str, corpus: None) -> None:
    params = {"q": "harbour", "mode": "bm25"}

    everywhere = page(viewer.get(f"{base}/search/", params))
    narrowed = page(viewer.get(f"{base}/search/", {**params, "scope": "org/*"}))

    assert "secret harbour plan" in everywhere
    assert "secret harbour plan" not in narrowed and "harbour crane" in narrowed


def test_entities_target(access: ContextAccess, viewer: Client, base: str) -> None:
    from tests.curation.conftest import person

    alex = person(access, "Alexandra Quill")

    html = page(viewer.get(f"{base}/search/", {"q": "Quill", "mode": "bm25", "target": "entities"}))

    assert f'href="{base}/entities/{alex.pk}/"' in html


def test_htmx_search_answers_the_results_partial(viewer: Client, base: str, corpus: None) -> None:
    response = viewer.get(
        f"{base}/search/", {"q": "orchard", "mode": "bm25"}, HTTP_HX_REQUEST="true"
    )

    html = page(response)
    assert html.lstrip().startswith('<div id="search-results"')
    assert "Apples ripen" in html and "<form" not in html


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"q": "harbour", "mode": "fuzzy"}, "mode must be one of bm25, vector, hybrid"),
        ({"mode": "fuzzy"}, "mode must be one of"),
        ({"q": "harbour", "target": "documents"}, "target must be one of chunks, facts"),
        ({"q": "x" * 2001, "mode": "bm25"}, "query must have 1 to 2000 characters"),
        ({"q": "harbour", "mode": "bm25", "scope": "not a//scope"}, "scope"),
    ],
)
def test_bad_input_is_a_400_with_its_message(
    viewer: Client, base: str, params: dict[str, str], message: str
) -> None:
    response = viewer.get(f"{base}/search/", params)

    assert response.status_code == 400
    assert message in page(response)
    assert 'role="alert"' in page(response)


def test_anonymous_is_sent_to_login(client: Client, base: str) -> None:
    response = client.get(f"{base}/search/?q=x")

    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_a_chunk_result_links_to_its_document_page(viewer: Client, base: str, corpus: None) -> None:
    response = viewer.get(f"{base}/search/?q=harbour+crane&mode=bm25")

    result = response.context["response"].results[0]
    assert result.meta["document_title"] == "Harbour"
    html = page(response)
    assert f'href="{base}/documents/{result.meta["document_id"]}/?page=1#chunk-{result.id}"' in html
    assert ">Harbour</a>" in html


def test_a_fact_result_links_its_subject_and_object(
    viewer: Client, base: str, memory: Memory
) -> None:
    response = viewer.get(f"{base}/search/?q=Alex+knows+Sam&mode=bm25&target=facts")

    html = page(response)
    assert f'<a href="{base}/entities/{memory.alex.pk}/">Alex</a>' in html
    assert f'<a href="{base}/entities/{memory.sam.pk}/">Sam</a>' in html


def test_vector_only_hits_below_the_floor_are_hidden_and_counted(
    viewer: Client, base: str, corpus: None, settings: Any
) -> None:
    settings.MEMORY_SEARCH_VECTOR_FLOOR = 0.3
    # No word in common with any document: every hit is vector-only, all of them weak.
    unrelated = viewer.get(f"{base}/search/?q=quantum+chromodynamics+lecture&mode=vector")
    related = viewer.get(f"{base}/search/?q=cranes+loading+ships+at+a+port&mode=vector")
    settings.MEMORY_SEARCH_VECTOR_FLOOR = 0
    unfloored = viewer.get(f"{base}/search/?q=quantum+chromodynamics+lecture&mode=vector")

    assert unrelated.context["response"].results == []
    assert unrelated.context["response"].hidden == 3
    assert "3 weaker results hidden" in page(unrelated)
    assert next(r.meta["document_title"] for r in related.context["response"].results) == "Harbour"
    assert len(unfloored.context["response"].results) == 3
    assert "weaker" not in page(unfloored)
