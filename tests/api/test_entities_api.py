from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from memory.models import Context, Entity, Role
from tests.api.conftest import assert_error, operation, response_schema


def test_post_creates_then_matches(api: APIClient, base: str) -> None:
    created = api.post(
        f"{base}/entities",
        {"name": "Acme Corp", "type": "company", "scope": "org/acme"},
        format="json",
    )
    assert created.status_code == 201
    assert created.json()["type"] == "organisation"
    matched = api.post(
        f"{base}/entities",
        {"name": "ACME Inc.", "type": "organisation", "scope": "org/acme"},
        format="json",
    )
    assert matched.status_code == 200
    assert matched.json()["id"] == created.json()["id"]
    assert matched.json()["matched_by"] == "key"


def test_an_unknown_type_is_stored_as_other_with_the_runs_warning(
    api: APIClient, base: str
) -> None:
    created = api.post(
        f"{base}/entities", {"name": "Merlin", "type": "wizard", "scope": "org/acme"}, format="json"
    )

    assert created.status_code == 201, created.content
    assert created.json()["type"] == "other"
    assert created.json()["warnings"] == [
        "entity 'Merlin': type 'wizard' is not a type a memory may use; stored as other"
    ]
    plain = api.post(
        f"{base}/entities", {"name": "Morgana", "type": "other", "scope": "org/acme"}, format="json"
    )
    assert plain.json()["warnings"] == []


def test_list_filters_and_paginates(api: APIClient, base: str) -> None:
    for i in range(3):
        api.post(
            f"{base}/entities",
            {"name": f"Person {i}", "type": "person", "scope": "s"},
            format="json",
        )
    api.post(
        f"{base}/entities", {"name": "Acme", "type": "organisation", "scope": "s"}, format="json"
    )
    page = api.get(f"{base}/entities", {"type": "person", "limit": "2"}).json()
    assert page["count"] == 3 and len(page["results"]) == 2 and page["next"]
    assert api.get(f"{base}/entities", {"q": "acme"}).json()["count"] == 1


def test_detail_patch_delete_and_history(api: APIClient, base: str) -> None:
    entity_id = api.post(
        f"{base}/entities", {"name": "Alex", "type": "person", "scope": "s"}, format="json"
    ).json()["id"]
    api.post(
        f"{base}/facts",
        {"subject": entity_id, "predicate": "current_title", "value": "Engineer"},
        format="json",
    )
    api.post(
        f"{base}/facts",
        {"subject": entity_id, "predicate": "current_title", "value": "CTO"},
        format="json",
    )
    detail = api.get(f"{base}/entities/{entity_id}").json()
    assert [f["fact"]["value"] for f in detail["facts"]] == ["CTO"]
    history = api.get(f"{base}/entities/{entity_id}/history").json()
    assert [f["status"] for f in history["facts"]] == ["superseded", "current"]
    patched = api.patch(f"{base}/entities/{entity_id}", {"aliases": ["Lex"]}, format="json")
    assert patched.status_code == 200 and patched.json()["aliases"] == ["Lex"]
    assert api.delete(f"{base}/entities/{entity_id}").status_code == 204
    assert_error(api.get(f"{base}/entities/{entity_id}"), 404, "entity_not_found")


def test_bulk_csv_reports_each_row(api: APIClient, base: str) -> None:
    csv = "name,type,scope\nAcme,organisation,org/acme\nAlex,person,org/acme\n,person,org/acme\n"
    response = api.post(f"{base}/entities/bulk", csv, content_type="text/csv")
    assert response.status_code == 200, response.content
    report = response.json()
    assert (report["total"], report["created"], report["failed"]) == (3, 2, 1)


def test_bulk_jsonl(api: APIClient, base: str) -> None:
    body = (
        '{"name": "Acme", "type": "organisation", "scope": "s"}\n'
        '{"name": "ACME Inc", "type": "organisation", "scope": "s"}\n'
    )
    report = api.post(f"{base}/entities/bulk", body, content_type="application/x-ndjson").json()
    assert (report["created"], report["matched"]) == (1, 1)


@pytest.mark.parametrize(
    "body",
    [
        {"name": "x" * 100_000, "type": "person", "scope": "s"},
        {"name": "Alex", "type": "person"},
        {"name": "Alex", "type": "person", "scope": "../../etc"},
        {"name": 5, "type": "person", "scope": "s", "attributes": "nope"},
        {"name": "Alex", "scope": "s", "identifiers": [{"kind": "Bad Kind!", "value": "x"}]},
    ],
    ids=["huge-name", "no-scope", "bad-scope", "bad-attributes", "bad-identifier"],
)
def test_bad_entity_bodies_are_refused_and_write_nothing(
    api: APIClient, base: str, body: dict
) -> None:  # type: ignore[type-arg]
    response = api.post(f"{base}/entities", body, format="json")
    assert 400 <= response.status_code < 500
    assert_error(response, response.status_code)
    assert Entity.objects.count() == 0


def test_text_limits_count_the_text_as_sent_not_as_trimmed(api: APIClient, base: str) -> None:
    """The schema's maxLength is about the text sent: a name of 301 characters is refused
    even when trimming its whitespace would bring it to 300 (the API fuzzer found one)."""
    padded = {"name": "\n" + "a" * 300, "type": "person", "scope": "org/acme"}
    response = api.post(f"{base}/entities", padded, format="json")
    assert_error(response, 400)
    assert "name" in response.json()["error"]["details"]
    alias = {"name": "Alex", "scope": "org/acme", "aliases": [" " + "b" * 300]}
    assert_error(api.post(f"{base}/entities", alias, format="json"), 400)
    assert Entity.objects.count() == 0
    at_limit = {"name": " " + "a" * 299, "type": "person", "scope": "org/acme"}
    created = api.post(f"{base}/entities", at_limit, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["name"] == "a" * 299


def test_malformed_json_is_a_400(api: APIClient, base: str) -> None:
    response = api.post(f"{base}/entities", "{not json", content_type="application/json")
    assert_error(response, 400, "malformed")
    assert Entity.objects.count() == 0


def test_unknown_context_is_a_404(api: APIClient) -> None:
    response = api.post(
        "/api/v1/contexts/nope/entities", {"name": "A", "scope": "s"}, format="json"
    )
    assert_error(response, 404, "context_not_found")


def test_no_token_is_a_401(base: str) -> None:
    assert_error(APIClient().get(f"{base}/entities"), 401, "not_authenticated")


def test_bad_token_is_a_401(base: str) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token md_not-a-real-token")
    assert_error(client.get(f"{base}/entities"), 401, "authentication_failed")


def test_token_for_another_context_sees_nothing(
    make_context: Callable[..., Context], api_client_for: Callable[..., APIClient], base: str
) -> None:
    other = api_client_for(make_context("other"), role=Role.ADMIN)
    assert_error(other.get(f"{base}/entities"), 404, "context_not_found")


def test_write_needs_a_write_grant_on_the_scope(
    context: Context, api_client_for: Callable[..., APIClient], base: str
) -> None:
    reader = api_client_for(context, role=Role.ADMIN, grants=["read:*", "write:org/acme/*"])
    ok = reader.post(f"{base}/entities", {"name": "A", "scope": "org/acme/x"}, format="json")
    assert ok.status_code == 201
    refused = reader.post(f"{base}/entities", {"name": "B", "scope": "org/globex"}, format="json")
    assert_error(refused, 403, "scope_forbidden")
    assert Entity.objects.count() == 1


def test_reads_are_limited_to_grants(
    api: APIClient, context: Context, api_client_for: Callable[..., APIClient], base: str
) -> None:
    inside = api.post(
        f"{base}/entities", {"name": "In", "scope": "org/acme/team"}, format="json"
    ).json()
    outside = api.post(
        f"{base}/entities", {"name": "Out", "scope": "org/globex"}, format="json"
    ).json()
    limited = api_client_for(context, role=Role.VIEWER, grants=["read:org/acme/*"])
    names = [e["name"] for e in limited.get(f"{base}/entities").json()["results"]]
    assert names == ["In"]
    assert limited.get(f"{base}/entities/{inside['id']}").status_code == 200
    assert_error(limited.get(f"{base}/entities/{outside['id']}"), 404)
    assert_error(limited.get(f"{base}/entities/{outside['id']}/history"), 404)


def test_viewer_cannot_patch_or_delete(
    api: APIClient, context: Context, api_client_for: Callable[..., APIClient], base: str
) -> None:
    entity_id = api.post(f"{base}/entities", {"name": "Alex", "scope": "s"}, format="json").json()[
        "id"
    ]
    viewer = api_client_for(context, role=Role.VIEWER)
    assert_error(
        viewer.patch(f"{base}/entities/{entity_id}", {"name": "Z"}, format="json"),
        403,
        "role_required",
    )
    assert_error(viewer.delete(f"{base}/entities/{entity_id}"), 403, "role_required")
    assert Entity.objects.get().name == "Alex"


@pytest.mark.parametrize("query", ["type=robot", "seeded=maybe"], ids=lambda q: q)
def test_bad_list_filters_are_a_400(api: APIClient, base: str, query: str) -> None:
    # An unknown type filtered everything out and "maybe" read as false: a silent empty page.
    assert_error(api.get(f"{base}/entities?{query}"), 400, "invalid")


def test_seeded_filter_reads_true_and_false(api: APIClient, base: str) -> None:
    api.post(f"{base}/entities", {"name": "Acme", "scope": "s"}, format="json")
    assert api.get(f"{base}/entities?seeded=false").json()["count"] == 1
    assert api.get(f"{base}/entities?seeded=true").json()["count"] == 0
    assert api.get(f"{base}/entities").json()["count"] == 1


@pytest.mark.parametrize(
    ("query", "body", "content_type"),
    [
        ("format=csv", "name,scope\nAcme,s\n", "text/csv"),
        ("format=jsonl", '{"name": "Acme", "scope": "s"}\n', "text/plain"),
    ],
    ids=["csv", "jsonl"],
)
def test_bulk_format_parameter_names_the_import_format(
    api: APIClient, base: str, query: str, body: str, content_type: str
) -> None:
    # DRF took ?format= for its renderer switch and answered 404 for csv and jsonl.
    response = api.post(f"{base}/entities/bulk?{query}", body, content_type=content_type)
    assert response.status_code == 200, response.content
    assert response.json()["created"] == 1


def test_bulk_body_is_documented_as_required(
    api: APIClient, base: str, openapi: dict[str, Any]
) -> None:
    # Documented as optional, and refused when left out.
    assert_error(api.post(f"{base}/entities/bulk"), 400, "missing_file")
    assert operation(openapi, "POST", "/entities/bulk")["requestBody"]["required"] is True


def test_detail_and_upsert_answers_are_documented(openapi: dict[str, Any]) -> None:
    # The detail's ranked facts and the upsert's matched_by/warnings were left out.
    detail = response_schema(openapi, "GET", "/entities/{entity_id}", 200)
    assert detail["properties"]["facts"]["type"] == "array"
    upsert = response_schema(openapi, "POST", "/entities", 201)
    assert {"matched_by", "warnings"} <= set(upsert["required"])


def test_bulk_refuses_an_unknown_query_parameter_and_writes_nothing(
    api: APIClient, base: str
) -> None:
    body = '{"name": "Typo Corp", "type": "organisation"}\n'
    response = api.post(
        f"{base}/entities/bulk?fromat=csv", body, content_type="application/x-ndjson"
    )
    assert_error(response, 400, "unknown_parameter")
    assert not Entity.objects.filter(name="Typo Corp").exists()
