"""The search screen: active search, mode and target switch, scope filter, explanations."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from memory.domain.access import ContextAccess
from memory.services.ingest.documents import document_create, documents_embed
from memory.services.ingest.run import run_create
from memory.services.ingest.turns import turn_fields_clean
from memory.services.vectors import embeddings_drain
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
        (
            {"q": "harbour", "target": "documents"},
            "target must be one of all, chunks, turns, facts",
        ),
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


@pytest.fixture
def conversation(access: ContextAccess) -> None:
    """Three turns of one stand-up, a minute apart, and one of another thread."""
    lines = [
        ("Alex", "standup", 1, "Morning. The crane contract is signed."),
        ("Maria", "standup", 2, "Great, then the harbour pilot starts on Monday."),
        ("Alex", "standup", 3, "I will book the inspectors for it."),
        ("Sam", "lunch", 4, "Pizza or salad today?"),
    ]
    for number, (speaker, thread, minute, text) in enumerate(lines):
        run_create(
            access=access,
            text=text,
            scope="org/acme",
            infer="none",
            turn=turn_fields_clean(
                speaker=speaker,
                said_at=f"2025-06-02T09:{minute:02d}:00+00:00",
                thread=thread,
                ref=f"d{number}",
            ),
        )
    embeddings_drain()


def test_a_turn_card_shows_speaker_time_thread_and_the_window_boost(
    viewer: Client, base: str, conversation: None
) -> None:
    response = viewer.get(f"{base}/search/?q=harbour+pilot&target=turns&mode=hybrid")

    html = page(response)
    results = response.context["response"].results
    assert results[0].text.startswith("Great, then the harbour pilot")
    assert '<strong class="turn-speaker">Maria</strong>' in html
    assert '<time datetime="2025-06-02T09:02:00+00:00">2 Jun 2025 09:02</time>' in html
    assert "thread <a href=" in html and ">standup</a>" in html and "<code>d1</code>" in html
    boosted = [r for r in results if r.explain.window_boost]
    assert boosted, [(r.text, r.explain) for r in results]  # neighbours lend a turn score
    assert f"+{boosted[0].explain.window_boost:.4f} from the neighbouring turns" in html
    assert "1 away ×0.5, 2 away ×0.3 of their fused score" in html
    assert "conversation turns" in html  # the page intro names turns


def test_turns_narrow_to_one_thread(viewer: Client, base: str, conversation: None) -> None:
    both = viewer.get(f"{base}/search/?q=pizza+harbour&target=turns&mode=bm25")
    one = viewer.get(f"{base}/search/?q=pizza+harbour&target=turns&mode=bm25&thread=lunch")

    assert {r.meta["thread"] for r in both.context["response"].results} == {"standup", "lunch"}
    assert {r.meta["thread"] for r in one.context["response"].results} == {"lunch"}
    assert 'id="search-thread" value="lunch"' in page(one)


@pytest.mark.parametrize("query", ["", "&target=all"])
def test_search_covers_everything_by_default_as_the_api_does(
    viewer: Client, base: str, corpus: None, conversation: None, query: str
) -> None:
    response = viewer.get(f"{base}/search/?q=harbour&mode=bm25{query}")

    html = page(response)
    assert {r.type for r in response.context["response"].results} == {"chunk", "turn"}
    assert '<option value="all" selected>all (turns, chunks, facts)</option>' in html
    assert "over turns, chunks and facts" in html and "over chunks" not in html


def test_the_target_switch_offers_all_first(viewer: Client, base: str) -> None:
    html = page(viewer.get(f"{base}/search/"))

    options = re.findall(r'<option value="(\w+)"', html.split('id="search-target"')[1])
    assert options[:5] == ["all", "chunks", "turns", "facts", "entities"]
