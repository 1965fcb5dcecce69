"""The embedder down (connection refused) or hanging (accepts, never answers) while requests
need a vector now: every such request path answers within the client's timeout — a read
with 503 ``embedder_unavailable`` in the one error shape, a write by keeping what was sent
and queueing its vectors for the worker — and a dashboard page says what is down. Once
the endpoint is back, the same requests work."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from django_tasks_db.models import DBTaskResult
from rest_framework.test import APIClient

from memory.domain.access import ContextAccess
from memory.models import Chunk, Context, Document, Entity, Keyword, Role
from memory.services.entities.writes import entity_upsert
from memory.services.facts.write import fact_write
from memory.services.vectors import embedding_backlog
from tests.api.conftest import assert_error, openapi, response_schema  # noqa: F401
from tests.fake_llm import FakeLLM, fake_embedding
from tests.ingest.conftest import extraction
from tests.reliability.conftest import ENDPOINT_TIMEOUT
from tests.reliability.endpoint import FlakyEndpoint

pytestmark = pytest.mark.django_db
STATES = ["down", "hang"]
# Two tries of the client's timeout, plus a loaded machine's slack.
BOUND_SECONDS = 2 * ENDPOINT_TIMEOUT + 5
TEXT = "Customers returning purchases within 30 days receive a full refund."


def _timed(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)``, which must answer within the client's timeouts."""
    started = time.monotonic()
    response = call(*args, **kwargs)
    assert time.monotonic() - started < BOUND_SECONDS
    return response


def _assert_embedder_503(response: Any) -> str:
    assert_error(response, 503, "embedder_unavailable")
    message: str = response.json()["error"]["message"]
    assert message.startswith("the embedding model is unavailable (EmbeddingUnavailable)")
    assert "127.0.0.1" not in message  # the endpoint goes to the log, not to the caller
    return message


@pytest.fixture
def dashboard(context: Context, make_user: Callable[..., Any]) -> Client:
    client = Client()
    client.force_login(make_user(context=context, role=Role.CURATOR))
    return client


# --- API reads: 503, and they work again once the endpoint is back -----------------------


@pytest.mark.parametrize("state", STATES)
def test_search_answers_503_and_bm25_still_works(
    api: APIClient, base: str, flaky: FlakyEndpoint, state: str
) -> None:
    flaky.set("up")
    api.post(f"{base}/documents", {"text": TEXT, "scope": "s", "wait": True}, format="json")
    flaky.set(state)  # type: ignore[arg-type]
    query = {"query": "refund", "mode": "hybrid"}
    message = _assert_embedder_503(_timed(api.post, f"{base}/search", query, format="json"))
    assert message.endswith("bm25 mode still works")
    bm25 = api.post(f"{base}/search", {**query, "mode": "bm25"}, format="json")
    assert bm25.status_code == 200 and len(bm25.json()["results"]) == 1

    flaky.set("up")
    assert api.post(f"{base}/search", query, format="json").status_code == 200


@pytest.mark.parametrize("state", STATES)
def test_keyword_search_answers_503_and_keywords_still_list(
    api: APIClient, base: str, flaky: FlakyEndpoint, state: str
) -> None:
    flaky.set("up")
    api.post(f"{base}/documents", {"text": TEXT, "scope": "s", "wait": True}, format="json")
    flaky.set(state)  # type: ignore[arg-type]
    search = f"{base}/keywords/search"
    message = _assert_embedder_503(_timed(api.get, search, {"q": "money back"}))
    assert "keywords can still be listed" in message
    assert api.get(f"{base}/keywords").json()["count"] == 3
    assert_error(api.get(search, {"q": " "}), 400, "invalid_query")  # input is checked first

    flaky.set("up")
    found = api.get(search, {"q": "full refund", "k": "1"})
    assert found.status_code == 200 and found.json()["results"][0]["text"] == "full refund"


@pytest.mark.parametrize("state", STATES)
def test_vocabulary_for_a_turn_answers_503_and_without_a_turn_still_works(
    api: APIClient, base: str, context: Context, flaky: FlakyEndpoint, state: str
) -> None:
    # Over 500 entities: the turn's embedding neighbours would get places first.
    Entity.objects.bulk_create(
        Entity(context=context, scope="s", name=f"Person {i}", type="person",
               normalized_key=f"person {i}")
        for i in range(501)
    )  # fmt: skip
    flaky.set(state)  # type: ignore[arg-type]
    turn = {"scope": "s", "text": "A call about the quarterly dashboards."}
    message = _assert_embedder_503(_timed(api.get, f"{base}/vocabulary", turn))
    assert message.endswith("the vocabulary without `text` still works")
    plain = api.get(f"{base}/vocabulary", {"scope": "s"})
    assert plain.status_code == 200 and len(plain.json()["entities"]) == 500

    flaky.set("up")
    answered = api.get(f"{base}/vocabulary", turn)
    assert answered.status_code == 200 and answered.json()["entities_truncated"] is True


def _drift(access: ContextAccess, predicate: str) -> None:
    alex = entity_upsert(access=access, name="Alex", type="person", scope="s").entity
    acme = entity_upsert(access=access, name="Acme", type="organisation", scope="s").entity
    fact_write(access=access, subject=alex, predicate=predicate, object=acme)


@pytest.mark.parametrize("state", STATES)
def test_drift_list_answers_503_and_its_page_shows_the_items_without_suggestions(
    api: APIClient,
    base: str,
    access: ContextAccess,
    dashboard: Client,
    flaky: FlakyEndpoint,
    state: str,
) -> None:
    # A predicate name of its own: the suggestions cache its embedding per model and text.
    name = f"is_employed_by_{state}"
    _drift(access, name)
    flaky.set(state)  # type: ignore[arg-type]
    message = _assert_embedder_503(_timed(api.get, f"{base}/drift"))
    assert "drift suggestions" in message

    page = f"/c/{access.context.slug}/drift/"
    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
        response = _timed(dashboard.get, page, **headers)
        html = response.content.decode()
        assert response.status_code == 200, html
        assert 'id="suggestions-unavailable"' in html and "the embedding model is" in html
        assert f"<code>{name}</code>" in html  # the item and its actions are there
        assert f'name="target" id="target-{name}"' in html

    flaky.set("up")
    listed = api.get(f"{base}/drift")
    assert listed.status_code == 200
    [item] = listed.json()["results"]
    assert item["name"] == name and item["suggestions"]
    assert "suggestions-unavailable" not in dashboard.get(page).content.decode()


@pytest.mark.parametrize("state", STATES)
def test_the_search_page_says_the_embedder_is_down(
    context: Context, dashboard: Client, flaky: FlakyEndpoint, state: str
) -> None:
    flaky.set(state)  # type: ignore[arg-type]
    page = f"/c/{context.slug}/search/"
    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
        response = _timed(dashboard.get, page, {"q": "refund", "mode": "hybrid"}, **headers)
        html = response.content.decode()
        # 503 partials are swapped in like a 200 (base.html's htmx-config)
        assert response.status_code == 503
        assert 'role="alert">the embedding model is unavailable' in html
        assert "bm25 mode still works" in html
    bm25 = dashboard.get(page, {"q": "refund", "mode": "bm25"})
    assert bm25.status_code == 200


# --- API writes: what was sent is kept ----------------------------------------------------


@pytest.mark.parametrize("state", STATES)
def test_a_document_written_with_wait_is_kept_and_its_vectors_are_queued(
    api: APIClient,
    base: str,
    flaky: FlakyEndpoint,
    django_capture_on_commit_callbacks: Any,
    state: str,
) -> None:
    flaky.set(state)  # type: ignore[arg-type]
    with django_capture_on_commit_callbacks(execute=True):
        response = _timed(
            api.post,
            f"{base}/documents",
            {"title": "Refunds", "text": TEXT, "scope": "s", "wait": True},
            format="json",
        )
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["embeddings"] == "queued" and body["chunk_count"] == 1
    [warning] = body["warnings"]
    assert warning.startswith("the embedding model is unavailable (EmbeddingUnavailable)")
    assert warning.endswith("the document is stored and its vectors are queued for the task worker")
    document = Document.objects.get()
    assert (document.pk, document.text) == (body["id"], TEXT)
    assert Chunk.objects.filter(embedding__isnull=False).count() == 0
    queued = {row.task_path.rsplit(".", 1)[1] for row in DBTaskResult.objects.all()}
    chunk_ids = [c["id"] for c in body["chunks"]]
    assert queued == {"embeddings_drain_task"}
    backlog = embedding_backlog(context=Document.objects.get().context)
    assert backlog["chunks"] == 1 and backlog["keywords"] == Keyword.objects.count() > 0
    # BM25 finds it meanwhile.
    bm25 = api.post(f"{base}/search", {"query": "refund", "mode": "bm25"}, format="json")
    assert [r["id"] for r in bm25.json()["results"]] == chunk_ids

    flaky.set("up")
    for row in DBTaskResult.objects.filter(status="READY"):  # the worker's turn
        row.task.call(*row.args_kwargs["args"], **row.args_kwargs["kwargs"])
    assert not any(embedding_backlog().values())
    assert Chunk.objects.filter(embedding__isnull=True).count() == 0
    assert Keyword.objects.filter(embedding__isnull=True).count() == 0
    vector = api.post(f"{base}/search", {"query": "refund", "mode": "vector"}, format="json")
    assert [r["id"] for r in vector.json()["results"]] == chunk_ids


@pytest.mark.parametrize("state", STATES)
def test_a_memory_written_with_wait_is_a_failed_run_that_keeps_its_input(
    api: APIClient,
    base: str,
    context: Context,
    flaky: FlakyEndpoint,
    settings: Any,
    state: str,
) -> None:
    # An embedded organisation in scope: resolving "Globex" compares embeddings.
    Entity.objects.create(
        context=context, scope="s", name="Initech", type="organisation",
        normalized_key="initech", embedding=fake_embedding("Initech (organisation)"),
        embedding_model=settings.MEMORY_EMBED_MODEL,
    )  # fmt: skip
    triples = extraction(entities=[{"name": "Globex", "type": "organisation"}])
    flaky.set(state)  # type: ignore[arg-type]
    memory = {"scope": "s", "infer": "triples", "triples": triples, "wait": True}
    response = _timed(api.post, f"{base}/memories", memory, format="json")
    assert response.status_code == 200, response.content
    run = response.json()["run"]
    assert run["outcome"] == "failed" and run["summary"] == {"error_code": "embedding_unavailable"}
    assert run["input"]["triples"] == triples

    flaky.set("up")
    retried = api.post(f"{base}/runs/{run['id']}/retry", {"wait": True}, format="json")
    assert retried.json()["run"]["outcome"] == "succeeded"


def test_with_the_embedder_up_a_document_says_whether_its_vectors_are_in(
    api: APIClient, base: str, fake_llm: FakeLLM
) -> None:
    waited = api.post(
        f"{base}/documents", {"text": TEXT, "scope": "s", "wait": True}, format="json"
    )
    assert waited.status_code == 201
    assert (waited.json()["embeddings"], waited.json()["warnings"]) == ("computed", [])
    assert Chunk.objects.filter(embedding__isnull=True).count() == 0
    queued = api.post(f"{base}/documents", {"text": TEXT, "scope": "s"}, format="json")
    assert queued.status_code == 201
    assert (queued.json()["embeddings"], queued.json()["warnings"]) == ("queued", [])


def test_the_embedder_answers_are_documented(openapi: dict[str, Any]) -> None:  # noqa: F811
    for method, path in [
        ("POST", "/search"),
        ("GET", "/keywords/search"),
        ("GET", "/vocabulary"),
        ("GET", "/drift"),
    ]:
        assert response_schema(openapi, method, path, 503)["properties"]["error"], path
    for status in (201, 202):
        created = response_schema(openapi, "POST", "/documents", status)
        assert {"embeddings", "warnings"} <= set(created["required"])
        enum = created["properties"]["embeddings"]["allOf"][0]["$ref"].rsplit("/", 1)[1]
        assert openapi["components"]["schemas"][enum]["enum"] == ["computed", "queued"]
        assert created["properties"]["warnings"]["type"] == "array"
