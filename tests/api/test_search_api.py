from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pytest_django import DjangoAssertNumQueries, DjangoCaptureOnCommitCallbacks
from rest_framework.test import APIClient

from memory.models import Context, Document, Keyword, Role
from memory.search.models import SearchDoc
from tests.api.conftest import assert_error, operation, response_schema

TEXT = "Customers returning purchases within 30 days receive a full refund."


def _post(api: APIClient, base: str, scope: str = "org/acme", **extra: object) -> dict:
    response = api.post(
        f"{base}/documents",
        {"title": "Refund policy", "text": TEXT, "scope": scope, **extra},
        format="json",
    )
    assert response.status_code == 201, response.content
    return response.json()


def test_post_document_stores_chunks_and_keywords(api: APIClient, base: str) -> None:
    body = _post(api, base, source="handbook.md", metadata={"lang": "en"})
    assert body["chunk_count"] == 1 and body["chunks"][0]["text"] == TEXT
    assert body["chunks"][0]["token_count"] == 11
    assert (body["scope"], body["source"], body["metadata"]) == (
        "org/acme",
        "handbook.md",
        {"lang": "en"},
    )
    keywords = api.get(f"{base}/documents/{body['id']}/keywords").json()
    assert [(k["text"], k["score"]) for k in keywords] == [
        ("30 days receive", 9.0),
        ("customers returning purchases", 9.0),
        ("full refund", 4.0),
        ("refund policy", 4.0),
    ]
    assert all(k["document_count"] == 1 and k["score"] >= 0.8 for k in keywords)


def test_search_returns_results_with_explanations(api: APIClient, base: str) -> None:
    _post(api, base)
    response = api.post(
        f"{base}/search", {"query": "refund", "mode": "bm25", "k": 5}, format="json"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"results", "took_ms"}
    [result] = body["results"]
    assert set(result) == {"type", "id", "text", "score", "scope", "explain", "meta"}
    assert result["type"] == "chunk" and result["text"] == TEXT
    assert result["explain"]["bm25"]["rank"] == 1
    assert result["explain"]["vector"] is None and result["explain"]["graph_boost"] is None


def test_viewer_may_search_and_read(
    context: Context, api: APIClient, base: str, api_client_for: Callable[..., APIClient]
) -> None:
    document_id = _post(api, base)["id"]
    viewer = api_client_for(context, role=Role.VIEWER, grants=["read:*"])
    search = viewer.post(f"{base}/search", {"query": "refund", "mode": "bm25"}, format="json")
    assert search.status_code == 200 and len(search.json()["results"]) == 1
    assert viewer.get(f"{base}/documents/{document_id}").status_code == 200
    assert viewer.get(f"{base}/keywords").status_code == 200


def test_posting_a_document_needs_a_write_grant_on_its_scope(
    context: Context, base: str, api_client_for: Callable[..., APIClient]
) -> None:
    reader = api_client_for(context, role=Role.ADMIN, grants=["read:*"])
    assert_error(
        reader.post(f"{base}/documents", {"text": TEXT, "scope": "org/acme"}, format="json"),
        403,
        "scope_forbidden",
    )
    elsewhere = api_client_for(context, role=Role.ADMIN, grants=["read,write:org/other/*"])
    assert_error(
        elsewhere.post(f"{base}/documents", {"text": TEXT, "scope": "org/acme"}, format="json"),
        403,
        "scope_forbidden",
    )
    assert not Document.objects.exists()


def test_deleting_needs_the_curator_role(
    context: Context, api: APIClient, base: str, api_client_for: Callable[..., APIClient]
) -> None:
    document_id = _post(api, base)["id"]
    viewer = api_client_for(context, role=Role.VIEWER, grants=["read,write:*"])
    assert_error(viewer.delete(f"{base}/documents/{document_id}"), 403, "role_required")
    assert api.delete(f"{base}/documents/{document_id}").status_code == 204
    assert_error(api.get(f"{base}/documents/{document_id}"), 404, "document_not_found")
    assert not SearchDoc.objects.exists() and not Keyword.objects.exists()


def test_documents_outside_the_grants_do_not_exist(
    context: Context, api: APIClient, base: str, api_client_for: Callable[..., APIClient]
) -> None:
    document_id = _post(api, base, scope="org/acme/user/alex")["id"]
    limited = api_client_for(context, role=Role.CURATOR, grants=["read,write:org/acme"])
    assert_error(limited.get(f"{base}/documents/{document_id}"), 404, "document_not_found")
    assert_error(limited.delete(f"{base}/documents/{document_id}"), 404, "document_not_found")
    assert limited.get(f"{base}/documents").json()["count"] == 0
    assert limited.get(f"{base}/keywords").json()["count"] == 0
    assert_error(limited.get(f"{base}/keywords/full refund"), 404, "keyword_not_found")
    found = limited.post(f"{base}/search", {"query": "refund"}, format="json").json()
    assert found["results"] == []


def test_unknown_context_is_404(api: APIClient) -> None:
    for response in (
        api.post("/api/v1/contexts/nope/search", {"query": "x"}, format="json"),
        api.get("/api/v1/contexts/nope/documents"),
        api.get("/api/v1/contexts/nope/keywords"),
    ):
        assert_error(response, 404, "context_not_found")


@pytest.mark.parametrize(
    "body",
    [
        {"query": "refund", "mode": "fuzzy"},
        {"query": "refund", "k": 0},
        {"query": "refund", "k": 101},
        {"query": "refund", "target": "people"},
        {"query": "refund", "graph_alpha": 2},
        {"query": ""},
        {"query": "refund", "scope": "org/acme"},
        {"mode": "bm25"},
    ],
)
def test_bad_search_input_is_a_clear_400(api: APIClient, base: str, body: dict) -> None:
    assert_error(api.post(f"{base}/search", body, format="json"), 400, "invalid")


def test_an_invalid_scope_pattern_is_a_400(api: APIClient, base: str) -> None:
    response = api.post(f"{base}/search", {"query": "x", "scope": ["../etc"]}, format="json")
    assert_error(response, 400, "invalid_scope")


def test_malformed_json_is_a_400_and_writes_nothing(api: APIClient, base: str) -> None:
    response = api.generic(
        "POST", f"{base}/documents", '{"text": "x", "scope": ', content_type="application/json"
    )
    assert_error(response, 400, "malformed")
    assert not Document.objects.exists()


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"text": "x" * (1024 * 1024), "scope": "org/acme"}, 413, "text_too_large"),
        ({"text": "   ", "scope": "org/acme"}, 400, "empty_text"),
        ({"text": "ok", "scope": "../bad"}, 400, "invalid_scope"),
        ({"text": "a\x00b", "scope": "org/acme"}, 400, "invalid"),
        ({"text": "ok"}, 400, "invalid"),
        ({"text": "ok", "scope": "org/acme", "metadata": [1]}, 400, "invalid"),
    ],
)
def test_bad_documents_are_refused_and_nothing_is_written(
    api: APIClient, base: str, body: dict, status: int, code: str
) -> None:
    assert_error(api.post(f"{base}/documents", body, format="json"), status, code)
    assert not Document.objects.exists() and not SearchDoc.objects.exists()


def test_keyword_endpoints(api: APIClient, base: str) -> None:
    _post(api, base)
    _post(api, base, scope="org/acme/hr")
    listed = api.get(f"{base}/keywords", {"sort": "text", "min_document_count": "2"}).json()
    assert [k["text"] for k in listed["results"]] == [
        "30 days receive",
        "customers returning purchases",
        "full refund",
        "refund policy",
    ]
    assert all(k["document_count"] == 2 for k in listed["results"])
    detail = api.get(f"{base}/keywords/Full Refund").json()
    assert detail["text"] == "full refund" and len(detail["documents"]) == 2
    assert_error(api.get(f"{base}/keywords", {"sort": "score"}), 400, "invalid_sort")
    assert_error(api.get(f"{base}/keywords", {"min_document_count": "x"}), 400)
    assert_error(api.get(f"{base}/keywords/search", {"q": ""}), 400, "invalid_query")
    assert_error(api.get(f"{base}/keywords/search", {"q": "x", "k": "500"}), 400, "invalid_k")


def test_keyword_search_uses_keyword_vectors(
    api: APIClient, base: str, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    # wait: the vectors are computed when the write commits, before the response
    with django_capture_on_commit_callbacks(execute=True):
        _post(api, base, wait=True)
    found = api.get(f"{base}/keywords/search", {"q": "money back", "k": "2"}).json()["results"]
    # No word in common: only the vectors put the two refund phrases ahead of "customers
    # returning purchases" and "30 days receive" (their order between them is the model's
    # to choose: int8 and float32 weights pick differently).
    assert {k["text"] for k in found} == {"full refund", "refund policy"}
    assert found[0]["similarity"] > found[1]["similarity"]


def test_document_list_query_count(
    api: APIClient, base: str, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    for scope in ("org/acme", "org/acme/a", "org/acme/b"):
        _post(api, base, scope=scope)
    with django_assert_num_queries(3):
        # the token with its user, context and membership (the token's last use was
        # stamped by the requests above), count(*), the page with its chunk counts
        response = api.get(f"{base}/documents")
    assert response.json()["count"] == 3


def test_keyword_list_query_count(
    api: APIClient, base: str, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    for scope in ("org/acme", "org/acme/a"):
        _post(api, base, scope=scope)
    with django_assert_num_queries(3):
        # the token with its user, context and membership (its last use stamped above),
        # count(*), the page with visible document counts
        response = api.get(f"{base}/keywords")
    assert response.json()["count"] == 4


def test_the_embedder_503_is_documented(openapi: dict[str, Any]) -> None:
    assert response_schema(openapi, "POST", "/search", 503)["properties"]["error"]


def test_an_unreachable_embedder_is_a_503_and_bm25_still_works(
    api: APIClient, base: str, settings: Any
) -> None:
    _post(api, base)
    settings.MEMORY_EMBED_MODEL = "openai:unreachable-test-model"
    settings.OPENAI_BASE_URL = "http://127.0.0.1:9/v1"  # discard port: nothing listens
    settings.MEMORY_LLM_MAX_RETRIES = 0
    settings.MEMORY_LLM_TIMEOUT_SECONDS = 2.0
    response = api.post(f"{base}/search", {"query": "refund", "mode": "hybrid"}, format="json")
    assert_error(response, 503, "embedder_unavailable")
    bm25 = api.post(f"{base}/search", {"query": "refund", "mode": "bm25"}, format="json")
    assert bm25.status_code == 200 and len(bm25.json()["results"]) == 1


def test_keyword_answers_are_documented_as_answered(openapi: dict[str, Any]) -> None:
    # The detail's documents were typed as a string; the search's {results} as an array.
    detail = response_schema(openapi, "GET", "/keywords/{text}", 200)
    documents = detail["properties"]["documents"]
    assert documents["type"] == "array" and "$ref" in documents["items"]
    search = response_schema(openapi, "GET", "/keywords/search", 200)
    assert search["properties"]["results"]["type"] == "array"
    q = next(
        p for p in operation(openapi, "GET", "/keywords/search")["parameters"] if p["name"] == "q"
    )
    assert q["schema"]["maxLength"] == 500 and q["schema"]["pattern"]


def test_a_blank_keyword_query_is_a_400(api: APIClient, base: str) -> None:
    assert_error(api.get(f"{base}/keywords/search", {"q": "\t "}), 400, "invalid_query")


def test_numbers_in_a_search_must_be_numbers(api: APIClient, base: str) -> None:
    # false was read as 0.0 for graph_alpha.
    body = {"query": "refund", "graph_alpha": False}
    assert_error(api.post(f"{base}/search", body, format="json"), 400, "invalid")
