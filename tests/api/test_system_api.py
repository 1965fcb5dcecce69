from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from memory.models import Context, Role
from tests.api.conftest import assert_error


def test_health_reports_each_part(db: None) -> None:
    body = APIClient().get("/api/v1/health").json()
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
