from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from rest_framework.test import APIClient

from memory.models import Context, Entity, Role
from tests.api.conftest import assert_error, operation, response_schema


def test_anonymous_health_answers_statuses_only(db: None) -> None:
    from unittest import mock

    from django_tasks_db.models import DBTaskResult

    error = RuntimeError('connection to server on socket "/tmp/pg/.s.PGSQL.5432" failed')
    with mock.patch.object(DBTaskResult, "objects") as objects:
        objects.filter.side_effect = error
        body = APIClient().get("/api/v1/health").json()
    assert body["task_worker"] == {"status": "error"}
    assert "/tmp" not in str(body) and "PGSQL" not in str(body)
    for part in ("database", "embedder", "chat_model"):
        assert set(body[part]) == {"status"}, body[part]
    assert body["embedding_backlog"] is None


def test_health_reports_each_part(api: APIClient) -> None:
    body = api.get("/api/v1/health").json()
    assert body["database"]["status"] == "ok"
    assert body["database"]["pgvector"]
    assert body["embedder"]["status"] == "ok"
    assert body["chat_model"]["status"] in ("ok", "not_configured")
    assert body["task_worker"]["status"] in ("ok", "stalled")
    assert body["status"] in ("ok", "degraded")


def test_token_sees_only_its_context(api: APIClient, make_context: Callable[..., Context]) -> None:
    make_context("elsewhere")
    slugs = [c["slug"] for c in api.get("/api/v1/contexts").json()["results"]]
    assert slugs == ["acme-test"]


def test_staff_session_creates_a_context_with_the_standard_registry(db: None) -> None:
    staff = get_user_model().objects.create_user("boss", password="pw", is_staff=True)
    client = APIClient()
    client.force_authenticate(staff)
    response = client.post("/api/v1/contexts", {"slug": "new-ctx", "name": "New"}, format="json")
    assert response.status_code == 201, response.content
    assert client.get("/api/v1/contexts/new-ctx/predicates").json()["count"] == 44
    assert_error(
        client.post("/api/v1/contexts", {"slug": "new-ctx"}, format="json"), 409, "context_exists"
    )
    assert_error(client.post("/api/v1/contexts", {"slug": "Bad Slug!"}, format="json"), 400)


def test_tokens_cannot_create_contexts(api: APIClient) -> None:
    assert_error(api.post("/api/v1/contexts", {"slug": "x"}, format="json"), 403, "staff_required")
    assert not Context.objects.filter(slug="x").exists()


def test_only_admins_change_context_settings(
    context: Context, api_client_for: Callable[..., APIClient], api: APIClient
) -> None:
    curator = api_client_for(context, role=Role.CURATOR)
    url = f"/api/v1/contexts/{context.slug}"
    assert_error(curator.patch(url, {"predicate_mode": "strict"}, format="json"), 403)
    assert (
        api.patch(url, {"predicate_mode": "strict"}, format="json").json()["predicate_mode"]
        == "strict"
    )
    bad = api.patch(url, {"review_threshold": 0.99, "auto_merge_threshold": 0.5}, format="json")
    assert_error(bad, 400, "invalid_thresholds")


def test_schema_and_docs_are_served(db: None) -> None:
    client = APIClient()
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert schema.status_code == 200
    paths: dict[str, Any] = schema.json()["paths"]
    assert "/api/v1/contexts/{ctx}/facts" in paths
    docs = client.get("/api/docs/")
    assert docs.status_code == 200 and b"swagger" in docs.content.lower()
    assert b"cdn" not in docs.content.lower()


def test_unknown_api_path_is_a_json_404(db: None) -> None:
    response = APIClient().get("/api/v1/nothing-here")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_schema_generation_has_no_warnings() -> None:
    # A warning means a part of the document is a guess (it once typed keyword documents
    # as a string).
    call_command("spectacular", "--validate", "--fail-on-warn", stdout=io.StringIO())


def test_list_answers_are_documented_as_pages(openapi: dict[str, Any]) -> None:
    page = response_schema(openapi, "GET", "/entities", 200)
    assert set(page["required"]) >= {"count", "results"}
    assert page["properties"]["results"]["items"]["$ref"].endswith("/EntityOutput")
    parameters = {p["name"]: p for p in operation(openapi, "GET", "/entities")["parameters"]}
    assert parameters["limit"]["schema"]["minimum"] == 1
    assert parameters["offset"]["schema"]["minimum"] == 0


def test_every_operation_documents_its_errors_in_the_error_shape(
    openapi: dict[str, Any],
) -> None:
    for path, methods in openapi["paths"].items():
        for method, op in methods.items():
            statuses = set(op["responses"])
            assert "429" in statuses, (method, path)
            if "{ctx}" in path:
                assert {"401", "403", "404"} <= statuses, (method, path)
            if "requestBody" in op:
                assert {"400", "415"} <= statuses, (method, path)
            for status in statuses - {"200", "201", "202", "204"}:
                schema = op["responses"][status]["content"]["application/json"]["schema"]
                if path != "/api/v1/health":
                    assert schema == {"$ref": "#/components/schemas/Error"}, (method, path)


@pytest.mark.parametrize(
    "query", ["limit=abc", "limit=0", "offset=-1", "offset=x"], ids=lambda q: q
)
def test_bad_pagination_parameters_are_a_400(api: APIClient, base: str, query: str) -> None:
    # They were replaced by the defaults, so a typo silently returned the first page.
    response = api.get(f"{base}/entities?{query}")
    assert_error(response, 400, f"invalid_{query.split('=')[0]}")


def test_a_limit_above_the_cap_is_capped(api: APIClient, base: str) -> None:
    response = api.get(f"{base}/entities?limit=100000")
    assert response.status_code == 200 and response.json()["count"] == 0


def test_bodies_are_json_only(api: APIClient, base: str) -> None:
    # Form encodings read every value as text ("false" is a string, JSON fields cannot be
    # empty): the API documented and accepted them, with other meanings than JSON's.
    response = api.post(f"{base}/entities", {"name": "Acme", "scope": "s"})  # multipart
    assert_error(response, 415, "unsupported_media_type")
    assert not Entity.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        {"name": 5, "scope": "s"},
        {"name": "Acme", "scope": "s", "identifiers": [{"kind": "email", "value": 7}]},
        {"name": "Acme", "scope": "s", "aliases": [1]},
    ],
    ids=["number-for-text", "number-for-identifier", "number-in-list"],
)
def test_json_values_must_have_their_documented_types(
    api: APIClient, base: str, body: dict[str, Any]
) -> None:
    # DRF turned 5 into "5" (and 0 into false for booleans) although the schema says string.
    response = api.post(f"{base}/entities", body, format="json")
    assert_error(response, 400, "invalid")
    assert not Entity.objects.exists()
