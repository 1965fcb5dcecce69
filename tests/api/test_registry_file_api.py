"""Registry export/import through the API (``GET predicates/export``, ``POST
predicates/import``): the registry page's file, admins only, all or nothing; and the
predicate counts both faces show."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.test import Client
from rest_framework.test import APIClient

from memory.domain.access import system_access
from memory.models import Context, Predicate, PredicateStatus, Role
from memory.services.entities.writes import entity_upsert
from memory.services.facts.write import fact_write
from tests.api.conftest import assert_error, operation


def _admin_page(context: Context, make_user: Callable[..., Any]) -> Client:
    page = Client()
    page.force_login(make_user(context=context, role=Role.ADMIN))
    return page


def test_export_answers_the_registry_pages_file(
    api: APIClient, base: str, context: Context, make_user: Callable[..., Any]
) -> None:
    exported = api.get(f"{base}/predicates/export")
    assert exported.status_code == 200, exported.content
    body = exported.json()
    page = _admin_page(context, make_user).get(f"/c/{context.slug}/registry/export.json")
    from_page = json.loads(page.content)
    body.pop("exported_at"), from_page.pop("exported_at")
    assert body == from_page
    assert body["format"] == "memory-desk-registry" and len(body["predicates"]) == 44


def test_import_registers_and_updates_and_the_export_reads_back(
    api: APIClient, base: str, make_context: Callable[..., Context], api_client_for: Any
) -> None:
    exported = api.get(f"{base}/predicates/export").json()
    works_at = next(p for p in exported["predicates"] if p["name"] == "works_at")
    works_at["description"] = "employed there now"
    exported["predicates"].append({"name": "likesPizza", "kind": "attribute"})
    other = make_context("other-ctx")
    other_api = api_client_for(other, role=Role.ADMIN)
    done = other_api.post("/api/v1/contexts/other-ctx/predicates/import", exported, format="json")
    assert done.status_code == 200, done.content
    outcomes = {o["name"]: o["outcome"] for o in done.json()["outcomes"]}
    assert outcomes["works_at"] == "updated" and outcomes["likes_pizza"] == "created"
    again = other_api.get("/api/v1/contexts/other-ctx/predicates/export").json()
    assert next(p for p in again["predicates"] if p["name"] == "works_at")["description"] == (
        "employed there now"
    )


def test_import_with_one_refused_predicate_writes_nothing(api: APIClient, base: str) -> None:
    before = Predicate.objects.filter(status=PredicateStatus.REGISTERED).count()
    body = {
        "predicates": [
            {"name": "likes_pizza"},
            {"name": "bad_flags", "single_valued": True, "is_aggregate": True},
        ]
    }
    response = api.post(f"{base}/predicates/import", body, format="json")
    assert_error(response, 400, "registry_import_failed")
    details = {d["name"]: d["outcome"] for d in response.json()["error"]["details"]}
    assert details["bad_flags"] == "error"
    assert not Predicate.objects.filter(name="likes_pizza").exists()
    assert Predicate.objects.filter(status=PredicateStatus.REGISTERED).count() == before


def test_import_refuses_bad_files_with_a_clear_error(api: APIClient, base: str) -> None:
    before = Predicate.objects.count()
    url = f"{base}/predicates/import"
    bad_bodies: list[Any] = [
        "just a string",
        {"format": "someone-else", "predicates": []},
        {"predicates": [{"name": "x", "unknown_field": 1}]},
        {"predicates": [{"name": "KNOWS]->() DETACH DELETE n //"}]},
        {"predicates": [{"name": "works_for"}, {"name": "worksFor"}]},
        {"predicates": [{"name": "a" * 500}]},
        {"predicates": [{"name": f"p{i}"} for i in range(2001)]},
    ]
    for body in bad_bodies:
        assert_error(api.post(url, body, format="json"), 400)
    malformed = api.post(url, "{not json", content_type="application/json")
    assert_error(malformed, 400, "malformed")
    assert Predicate.objects.count() == before


def test_export_and_import_need_an_admin(
    context: Context, base: str, api_client_for: Callable[..., APIClient]
) -> None:
    before = Predicate.objects.count()
    for role in (Role.VIEWER, Role.CURATOR):
        client = api_client_for(context, role=role)
        assert_error(client.get(f"{base}/predicates/export"), 403)
        body = {"predicates": [{"name": "likes_pizza"}]}
        assert_error(client.post(f"{base}/predicates/import", body, format="json"), 403)
    assert_error(APIClient().get(f"{base}/predicates/export"), 401)
    assert Predicate.objects.count() == before


def test_the_endpoints_are_in_the_openapi_schema(openapi: dict[str, Any]) -> None:
    assert operation(openapi, "get", "/predicates/export")
    imported = operation(openapi, "post", "/predicates/import")
    assert {"200", "400"} <= set(imported["responses"])


def test_predicate_counts_are_the_registry_pages(
    api: APIClient, base: str, context: Context, make_user: Callable[..., Any]
) -> None:
    access = system_access(context)
    alex = entity_upsert(access=access, name="Alex", type="person", scope="org/acme").entity
    acme = entity_upsert(access=access, name="Acme", type="organisation", scope="org/acme")
    for _ in range(3):  # one fact, observed three times
        fact_write(access=access, subject=alex, predicate="works_at", object=acme.entity)
    api_count = api.get(f"{base}/predicates/works_at").json()["fact_count"]
    listed = api.get(f"{base}/predicates", {"limit": 500}).json()["results"]
    page = _admin_page(context, make_user).get(f"/c/{context.slug}/registry/?status=all")
    assert page.status_code == 200
    row = next(p for p in page.context["predicates"] if p.name == "works_at")
    assert api_count == row.fact_count == 3
    assert next(p for p in listed if p["name"] == "works_at")["fact_count"] == 3
