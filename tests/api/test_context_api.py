"""POST context: the prompt-ready memory block (the MCP get_context tool's twin)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from rest_framework.test import APIClient

from memory.domain.access import ContextAccess
from memory.models import Context, Role
from memory.services.entities.writes import entity_upsert
from memory.services.facts.write import fact_write
from memory.services.ingest.documents import document_create, document_embed_now
from tests.api.conftest import assert_error, operation
from tests.fake_llm import FakeLLM


@pytest.fixture
def fake_embedder(settings: Any) -> Iterator[FakeLLM]:
    """The embedder answers from the scripted server, which records each request."""
    server = FakeLLM().start()
    settings.OPENAI_BASE_URL = server.base_url
    settings.OPENAI_API_KEY = "test-key"
    # A model name of its own: the process keeps one client per model setting.
    settings.MEMORY_EMBED_MODEL = "openai:fake-embed-context-api"
    settings.MEMORY_LLM_MAX_RETRIES = 0
    yield server
    server.stop()


@pytest.fixture
def memory(access: ContextAccess) -> dict[str, int]:
    alex = entity_upsert(access=access, name="Alex Rivera", type="person", scope="org/acme").entity
    acme = entity_upsert(access=access, name="Acme Corp", type="organisation", scope="org/acme")
    works = fact_write(access=access, subject=alex, predicate="works_at", object=acme.entity)
    old = fact_write(
        access=access, subject=alex, predicate="current_title", value="Engineer", confidence=0.9
    )
    fact_write(access=access, subject=alex, predicate="current_title", value="Staff Engineer")
    low = fact_write(access=access, subject=alex, predicate="likes", value="tea", confidence=0.1)
    hidden = fact_write(
        access=access, subject=alex, predicate="plans", value="Nightjar merger", scope="org/secret"
    )
    for title, text, scope in [
        ("Onboarding", "Alex Rivera mentors new engineers at Acme in Berlin.", "org/acme"),
        ("Nightjar", "Alex Rivera prepares the confidential Nightjar merger.", "org/secret"),
    ]:
        document = document_create(
            access=access, title=title, text=text, scope=scope, embed_later=True
        )
        document_embed_now(document=document)
    return {
        "alex": alex.pk,
        "works": works.fact.pk,
        "old_title": old.fact.pk,
        "low": low.fact.pk,
        "hidden": hidden.fact.pk,
    }


def test_context_block_ranks_current_facts_and_cites_sources(
    api: APIClient, base: str, memory: dict[str, int]
) -> None:
    response = api.post(f"{base}/context", {"entity": "Alex Rivera"}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["entities"][0]["id"] == memory["alex"]
    ids = [f["id"] for f in body["facts"]]
    assert memory["works"] in ids
    assert memory["old_title"] not in ids  # superseded
    assert memory["low"] not in ids  # confidence under 0.2
    scores = [f["score"] for f in body["facts"]]
    assert scores == sorted(scores, reverse=True)
    assert "Alex Rivera current_title: Staff Engineer" in body["text"]
    assert f"[fact {memory['works']}; scope org/acme; source api]" in body["text"]
    assert body["passages"][0]["meta"]["document_title"] in {"Onboarding", "Nightjar"}
    assert all(line["line"] in body["text"] for line in body["facts"] + body["passages"])
    assert body["used_tokens"] <= body["budget_tokens"] == 1500


def test_context_with_a_query_finds_passages_and_entities(
    api: APIClient, base: str, memory: dict[str, int]
) -> None:
    response = api.post(
        f"{base}/context", {"query": "who mentors engineers in Berlin"}, format="json"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert "mentors new engineers" in body["passages"][0]["text"]
    assert body["passages"][0]["type"] == "chunk"


def test_context_embeds_its_query_once_for_facts_chunks_and_turns(
    fake_embedder: FakeLLM, api: APIClient, base: str, memory: dict[str, int]
) -> None:
    fake_embedder.reset()
    query = "  who mentors engineers in Berlin "
    response = api.post(f"{base}/context", {"query": query, "mode": "hybrid"}, format="json")
    assert response.status_code == 200, response.content
    assert [r["input"] for r in fake_embedder.embedding_requests] == [[query.strip()]]
    # The same passages, in the same order, as a search of its own embedding finds.
    chunks = api.post(f"{base}/search", {"query": query, "k": 8}, format="json").json()
    block_chunks = [p["id"] for p in response.json()["passages"] if p["type"] == "chunk"]
    assert block_chunks == [r["id"] for r in chunks["results"]][: len(block_chunks)]
    assert block_chunks


def test_context_keeps_to_the_token_budget(
    api: APIClient, base: str, memory: dict[str, int]
) -> None:
    response = api.post(
        f"{base}/context", {"entity": memory["alex"], "budget_tokens": 100}, format="json"
    )
    body = response.json()
    assert body["used_tokens"] <= 100
    assert body["left_out"] > 0


def test_context_shows_nothing_outside_the_token_grants(
    context: Context, api_client_for: Callable[..., APIClient], base: str, memory: dict[str, int]
) -> None:
    client = api_client_for(context, role=Role.VIEWER, grants=["read:org/acme/*"])
    for payload in ({"entity": memory["alex"]}, {"query": "Nightjar merger confidential"}):
        response = client.post(f"{base}/context", payload, format="json")
        assert response.status_code == 200, response.content
        text = repr(response.json()).replace("Nightjar merger confidential", "")
        assert "Nightjar" not in text
        assert "org/secret" not in text
        assert memory["hidden"] not in [f["id"] for f in response.json()["facts"]]


def test_context_scope_filter_narrows_the_grants(
    api: APIClient, base: str, memory: dict[str, int]
) -> None:
    response = api.post(
        f"{base}/context", {"query": "Alex Rivera", "scope": ["org/secret/*"]}, format="json"
    )
    body = response.json()
    assert body["facts"] and {f["scope"] for f in body["facts"]} == {"org/secret"}
    assert {p["scope"] for p in body["passages"]} == {"org/secret"}


def test_context_needs_a_token_of_the_context(base: str, memory: dict[str, int]) -> None:
    assert_error(APIClient().post(f"{base}/context", {"query": "x"}, format="json"), 401)


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ({}, "missing_query"),
        ({"query": "   "}, "missing_query"),
        ({"query": "x", "budget_tokens": 5}, "invalid"),
        ({"query": "x", "budget_tokens": "lots"}, "invalid"),
        ({"query": "x", "scope": ["bad scope!"]}, "invalid_scope"),
        ({"query": "x", "scope": "org/acme"}, "invalid"),
        ({"query": "x", "mode": "psychic"}, "invalid"),
        ({"entity": True}, "invalid"),
        ({"entity": {"name": "Alex"}}, "invalid"),
        ({"entity": "x" * 501}, "invalid"),
        ({"query": "x" * 2001}, "invalid"),
        ({"query": "x", "explain": "maybe"}, "invalid"),
    ],
)
def test_context_refuses_bad_input(
    api: APIClient, base: str, memory: dict[str, int], payload: dict[str, Any], code: str
) -> None:
    assert_error(api.post(f"{base}/context", payload, format="json"), 400, code)


def test_context_for_an_unknown_entity_is_404(
    api: APIClient, base: str, memory: dict[str, int]
) -> None:
    assert_error(
        api.post(f"{base}/context", {"entity": "Nobody Atall"}, format="json"),
        404,
        "entity_not_found",
    )
    assert_error(api.post(f"{base}/context", {"entity": 99999}, format="json"), 404)


def test_malformed_body_is_400(api: APIClient, base: str) -> None:
    response = api.post(f"{base}/context", "{not json", content_type="application/json")
    assert_error(response, 400, "malformed")


def test_context_is_in_the_openapi_schema(openapi: dict[str, Any]) -> None:
    op = operation(openapi, "post", "/context")
    assert "budget_tokens" in op["description"]
    assert set(op["responses"]) >= {"200", "400", "404"}
