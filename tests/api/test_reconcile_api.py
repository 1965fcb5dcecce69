"""The reconciliation service: every route's answer validated against the project's JSON
Schemas of the W3C specification (0.2 and 1.0-draft; tests/api/reconcile_schemas.py), an
OpenRefine-shaped 0.2 batch, a 1.0-draft batch, auth by header and by key, CORS, and bad
input."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from memory.domain.access import ContextAccess
from memory.models import ApiToken, Context, Entity, Role, TokenPurpose
from memory.services.entities.writes import entity_upsert
from memory.services.facts.write import fact_write
from memory.services.tokens import reconcile_key_create, token_revoke
from tests.api.conftest import assert_error
from tests.api.reconcile_schemas import validate

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(access: ContextAccess) -> dict[str, Entity]:
    def person(name: str, scope: str = "org/acme", **fields: Any) -> Entity:
        return entity_upsert(access=access, name=name, scope=scope, type="person", **fields).entity

    out = {
        "ada": person(
            "Ada Lovelace",
            aliases=["Augusta Ada King"],
            identifiers=[{"kind": "email", "value": "ada@example.org"}],
            attributes={"date_of_birth": "1815-12-10", "city": "London"},
        ),
        "ada2": person("Ada Lovelock", attributes={"date_of_birth": "1990-01-01"}),
        "grace": person(
            "Grace Hopper",
            identifiers=[{"kind": "email", "value": "grace@example.org"}],
            attributes={"date_of_birth": "1906-12-09", "city": "New York"},
        ),
        "alan": person("Alan Turing", attributes={"date_of_birth": "1912-06-23"}),
        "secret": person("Ada Secretworth", scope="org/hidden"),
    }
    navy = entity_upsert(access=access, name="US Navy", scope="org/acme", type="organisation")
    out["navy"] = navy.entity
    fact_write(access=access, subject=out["grace"], predicate="works_at", object=navy.entity)
    fact_write(access=access, subject=out["grace"], predicate="rank", value="Rear Admiral")
    fact_write(access=access, subject=out["grace"], predicate="height_cm", value=168)
    return out


@pytest.fixture
def service(base: str) -> str:
    return f"{base}/reconcile"


def ok(response: Any) -> Any:
    assert response.status_code == 200, response.content[:800]
    return response.json()


# --- manifests ----------------------------------------------------------------------------


def test_manifest_0_2_and_1_0(api: APIClient, service: str, people: dict[str, Entity]) -> None:
    v02 = ok(api.get(service))
    validate("0.2", "manifest", v02)
    assert v02["versions"] == ["0.2", "1.0-draft"]
    assert {t["id"] for t in v02["defaultTypes"]} >= {"person", "organisation"}
    assert v02["view"]["url"].endswith("/c/acme-test/entities/{{id}}/")
    v1 = ok(api.get(service, {"version": "1.0-draft"}))
    validate("1.0-draft", "manifest", v1)
    assert v1["suggest"] == {"entity": True, "type": True, "property": True}
    # The services the 0.2 manifest names answer where it says.
    entity = v02["suggest"]["entity"]
    assert entity["service_url"].endswith(service)
    found = ok(api.get(service + entity["service_path"], {"prefix": "grace"}))
    assert found["result"][0]["name"] == "Grace Hopper"
    preview = v02["preview"]["url"].replace("{{id}}", str(people["ada"].pk))
    assert api.get(preview).status_code == 200


def test_unknown_version_is_400(api: APIClient, service: str) -> None:
    assert_error(api.get(service, {"version": "3"}), 400, "invalid_version")
    assert_error(api.post(service, [1, 2], format="json"), 400, "invalid_body")


# --- match --------------------------------------------------------------------------------

OPENREFINE_BATCH = {
    "q0": {
        "query": "Ada Lovelace",
        "type": "person",
        "type_strict": "should",
        "properties": [{"pid": "email", "v": "ADA@example.org"}],
    },
    "q1": {"query": "Grace Hoper", "type": "person", "limit": 3},
    "q2": {
        "query": "Alan Turing",
        "properties": [{"pid": "attr:date_of_birth", "v": ["1912-06-23"]}],
    },
    "q3": {"query": "Nobody Atall", "type": "person"},
    "q4": {"query": "US Navy", "type": ["organisation", "project"]},
}


def test_openrefine_batch_by_get_and_form_post(
    api: APIClient, service: str, people: dict[str, Entity]
) -> None:
    validate("0.2", "query-batch", OPENREFINE_BATCH)
    text = json.dumps(OPENREFINE_BATCH)
    by_get = ok(api.get(service, {"queries": text}))
    by_post = ok(api.post(service, {"queries": text}, format="multipart"))
    assert by_get == by_post
    validate("0.2", "result-batch", by_get)
    assert set(by_get) == set(OPENREFINE_BATCH)
    top: dict[str, Any] = {
        name: r["result"][0] if r["result"] else None for name, r in by_get.items()
    }
    assert top["q0"]["id"] == str(people["ada"].pk)
    assert top["q0"]["match"] is True and top["q0"]["score"] > 99
    assert top["q0"]["type"] == [{"id": "person", "name": "person"}]
    assert {f["id"] for f in top["q0"]["features"]} >= {"prior", "name", "id:email"}
    # A slip finds the right person but is no sure match on its name alone.
    assert top["q1"]["id"] == str(people["grace"].pk)
    assert top["q1"]["match"] is False
    assert len(by_get["q1"]["result"]) <= 3
    assert top["q2"]["id"] == str(people["alan"].pk)
    assert by_get["q3"]["result"] == [] or by_get["q3"]["result"][0]["score"] < 50
    assert top["q4"]["id"] == str(people["navy"].pk)
    # Scores are ordered, best first; only the first may be a match.
    for result in by_get.values():
        scores = [c["score"] for c in result["result"]]
        assert scores == sorted(scores, reverse=True)
        assert not any(c["match"] for c in result["result"][1:])


def test_namesakes_are_no_sure_match(
    api: APIClient, service: str, access: ContextAccess, people: dict[str, Entity]
) -> None:
    entity_upsert(access=access, name="Alan Turing", scope="org/other", type="person")
    body = ok(api.get(service, {"queries": json.dumps({"q": {"query": "Alan Turing"}})}))
    candidates = body["q"]["result"]
    assert len(candidates) == 2
    assert not any(c["match"] for c in candidates)


def test_1_0_match(api: APIClient, service: str, people: dict[str, Entity]) -> None:
    batch = {
        "queries": [
            {
                "type": "person",
                "conditions": [
                    {"matchType": "name", "propertyValue": "Grace Hopper"},
                    {"matchType": "property", "propertyId": "id:email",
                     "propertyValue": "grace@example.org"},
                    {"matchType": "property", "propertyId": "city",
                     "propertyValue": ["New York"]},
                ],
            },
            {"conditions": [{"matchType": "name", "propertyValue": "Augusta Ada King"}]},
            {"conditions": [{"matchType": "id", "propertyValue": str(people["alan"].pk)}]},
            {"limit": 1, "conditions": [{"matchType": "name", "propertyValue": "Ada"}]},
        ]
    }  # fmt: skip
    validate("1.0-draft", "query-batch", batch)
    body = ok(api.post(f"{service}/match", batch, format="json"))
    validate("1.0-draft", "result-batch", body)
    results = [r["candidates"] for r in body["results"]]
    assert results[0][0]["id"] == str(people["grace"].pk) and results[0][0]["match"]
    assert {"id", "name", "value"} <= set(results[0][0]["features"][0])
    assert results[1][0]["id"] == str(people["ada"].pk)  # by its alias
    assert results[2] == [results[2][0]] and results[2][0]["id"] == str(people["alan"].pk)
    assert len(results[3]) <= 1


def test_candidates_respect_the_callers_grants(
    api_client_for: Callable[..., APIClient], context: Context, service: str, people: Any
) -> None:
    narrow = api_client_for(context, role=Role.VIEWER, grants=["read:org/acme/*"])
    body = ok(narrow.get(service, {"queries": json.dumps({"q": {"query": "Ada Secretworth"}})}))
    assert str(people["secret"].pk) not in {c["id"] for c in body["q"]["result"]}


@pytest.mark.parametrize(
    ("queries", "code"),
    [
        ("{not json", "invalid_queries"),
        ('["a"]', "invalid_query"),
        ('{"q": {"query": 5}}', "invalid_query"),
        ('{"q": {"query": "Ada", "type": "wizard"}}', "invalid_type"),
        ('{"q": {"query": "Ada", "limit": 0}}', "invalid_limit"),
        ('{"q": {"query": "Ada", "limit": "x"}}', "invalid_limit"),
        ('{"q": {"query": "..."}}', "invalid_query"),
        ('{"q": {"query": "Ada", "properties": [{"pid": "email"}]}}', "invalid_property"),
        ('{"q": {"query": "Ada", "properties": [{"pid": "fact:works_at", "v": "x"}]}}',
         "invalid_property"),
        ('{"q": {"query": "Ada", "properties": [{"pid": "id:BAD KIND", "v": "x"}]}}',
         "invalid_identifier"),
        (json.dumps({f"q{i}": {"query": "Ada"} for i in range(101)}), "too_many_queries"),
    ],
)  # fmt: skip
def test_bad_0_2_queries_are_400(
    api: APIClient, service: str, people: Any, queries: str, code: str
) -> None:
    assert_error(api.get(service, {"queries": queries}), 400, code)


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"queries": "x"},
        {"queries": [{"conditions": []}]},
        {"queries": [{"conditions": [{"matchType": "colour", "propertyValue": "x"}]}]},
        {"queries": [{"conditions": [{"matchType": "name"}]}]},
        {"queries": [{"conditions": [{"matchType": "property", "propertyValue": "x"}]}]},
    ],
)
def test_bad_1_0_queries_are_400(api: APIClient, service: str, body: Any) -> None:
    response = api.post(f"{service}/match", body, format="json")
    assert_error(response, 400)


# --- suggest, preview ---------------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.2", "1.0-draft"])
def test_suggest_services(
    api: APIClient, service: str, people: dict[str, Entity], version: str
) -> None:
    entities = ok(api.get(f"{service}/suggest/entity", {"prefix": "ada lov"}))
    validate(version, "suggest-entities", entities)
    assert {s["id"] for s in entities["result"][:2]} == {
        str(people["ada"].pk),
        str(people["ada2"].pk),
    }
    fuzzy = ok(api.get(f"{service}/suggest/entity", {"prefix": "Grace Hoppr", "type": "person"}))
    assert fuzzy["result"][0]["id"] == str(people["grace"].pk)
    types = ok(api.get(f"{service}/suggest/type", {"prefix": "pers"}))
    validate(version, "suggest-types", types)
    assert types["result"][0] == {"id": "person", "name": "person"}
    properties = ok(api.get(f"{service}/suggest/property", {"prefix": "dat"}))
    validate(version, "suggest-properties", properties)
    assert properties["result"][0]["id"] == "attr:date_of_birth"
    emails = ok(api.get(f"{service}/suggest/property", {"prefix": "email", "type": "person"}))
    assert emails["result"][0]["id"] == "id:email"
    works = ok(api.get(f"{service}/suggest/property", {"prefix": "works"}))
    assert "fact:works_at" in {p["id"] for p in works["result"]}


@pytest.mark.parametrize(
    ("route", "params"),
    [
        ("suggest/entity", {}),
        ("suggest/entity", {"prefix": "a", "type": "wizard"}),
        ("suggest/entity", {"prefix": "a", "limit": "0"}),
        ("suggest/entity", {"prefix": "a" * 301}),
        ("suggest/type", {"prefix": "a", "limit": "many"}),
        ("suggest/property", {"prefix": "a", "type": "wizard"}),
        ("preview", {"id": "ada"}),
        ("preview", {}),
        ("extend/propose", {"type": "wizard"}),
        ("extend/propose", {"limit": "900"}),
    ],
)
def test_bad_suggest_preview_propose_are_400(
    api: APIClient, service: str, route: str, params: dict[str, str]
) -> None:
    assert_error(api.get(f"{service}/{route}", params), 400)


def test_preview_card(
    api: APIClient, service: str, access: ContextAccess, people: dict[str, Entity]
) -> None:
    response = api.get(f"{service}/preview", {"id": people["grace"].pk})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert "Grace Hopper" in page and "works at" in page and "US Navy" in page
    sneaky = entity_upsert(
        access=access, name="<script>x</script> Ltd", scope="org/acme", type="organisation"
    )
    page = api.get(f"{service}/preview", {"id": sneaky.entity.pk}).content.decode()
    assert "<script>x" not in page and "&lt;script&gt;" in page
    assert_error(api.get(f"{service}/preview", {"id": 999999999}), 404, "entity_not_found")
    assert_error(api.get(f"{service}/preview", {"id": people["secret"].pk + 10_000}), 404)


# --- data extension -----------------------------------------------------------------------


def test_extend_0_2_and_1_0(api: APIClient, service: str, people: dict[str, Entity]) -> None:
    grace, ada = str(people["grace"].pk), str(people["ada"].pk)
    request = {
        "ids": [grace, ada, "999999999"],
        "properties": [
            {"id": "fact:works_at"},
            {"id": "rank"},
            {"id": "height_cm"},
            {"id": "attr:date_of_birth"},
            {"id": "email"},
        ],
    }
    validate("0.2", "extend-query", request)
    v02 = ok(api.get(service, {"extend": json.dumps(request)}))
    validate("0.2", "extend-response", v02)
    row = v02["rows"][grace]
    assert row["fact:works_at"] == [{"id": str(people["navy"].pk), "name": "US Navy"}]
    assert row["fact:rank"] == [{"str": "Rear Admiral"}]
    assert row["fact:height_cm"] == [{"int": 168}]
    assert row["attr:date_of_birth"] == [{"date": "1906-12-09T00:00:00Z"}]
    assert row["id:email"] == [{"str": "grace@example.org"}]
    assert v02["rows"][ada]["fact:works_at"] == []
    assert all(v == [] for v in v02["rows"]["999999999"].values())
    assert [m["id"] for m in v02["meta"]][:2] == ["fact:works_at", "fact:rank"]
    validate("1.0-draft", "extend-query", request)
    v1 = ok(api.post(f"{service}/extend", request, format="json"))
    validate("1.0-draft", "extend-response", v1)
    assert [r["id"] for r in v1["rows"]] == request["ids"]
    first = {p["id"]: p["values"] for p in v1["rows"][0]["properties"]}
    assert first == row


@pytest.mark.parametrize("version", ["0.2", "1.0-draft"])
def test_extend_propose(api: APIClient, service: str, people: Any, version: str) -> None:
    body = ok(api.get(f"{service}/extend/propose", {"type": "person", "limit": "50"}))
    validate(version, "extend-proposal", body)
    ids = {p["id"] for p in body["properties"]}
    assert {"id:email", "attr:date_of_birth", "attr:city", "fact:works_at"} <= ids
    assert body["type"] == "person"


@pytest.mark.parametrize(
    "request_body",
    [
        {"ids": "1", "properties": []},
        {"ids": ["1"], "properties": "x"},
        {"ids": ["1"], "properties": []},
        {"ids": ["1"], "properties": [{"name": "x"}]},
        {"ids": ["1"], "properties": [{"id": "fact:no_such_predicate"}]},
        {"ids": ["1"] * 501, "properties": [{"id": "rank"}]},
    ],
)
def test_bad_extension_is_400(api: APIClient, service: str, people: Any, request_body: Any) -> None:
    assert_error(api.post(f"{service}/extend", request_body, format="json"), 400)
    assert_error(api.get(service, {"extend": json.dumps(request_body)}), 400)


# --- auth, keys and CORS ------------------------------------------------------------------


def test_needs_credentials_of_this_context(
    service: str, make_context: Callable[..., Context], api_client_for: Callable[..., APIClient]
) -> None:
    assert_error(APIClient().get(service), 401)
    other = api_client_for(make_context("other"))
    assert_error(other.get(service), 404, "context_not_found")


def test_key_url_reads_within_its_scope_and_stops_when_revoked(
    service: str, context: Context, make_user: Callable[..., Any], people: dict[str, Entity]
) -> None:
    admin = make_user(context=context, role=Role.ADMIN)
    access = ContextAccess(
        context=context, user=admin, role=Role.ADMIN, grants=__import__(
            "memory.kernel.scopes", fromlist=["Grants"]).Grants.everything()
    )  # fmt: skip
    issued = reconcile_key_create(access=access, scope="org/acme/*", name="OpenRefine")
    assert issued.token.purpose == TokenPurpose.RECONCILE
    assert issued.token.grants == ["read:org/acme/*"]
    keyed = f"{service}/k/{issued.raw}"
    anonymous = APIClient()
    manifest = ok(anonymous.get(keyed))
    validate("0.2", "manifest", manifest)
    assert manifest["suggest"]["entity"]["service_url"].endswith(keyed)
    queries = json.dumps({"a": {"query": "Ada Lovelace"}, "b": {"query": "Ada Secretworth"}})
    body = ok(anonymous.post(keyed, {"queries": queries}))  # OpenRefine's form POST
    assert body["a"]["result"][0]["id"] == str(people["ada"].pk)
    assert str(people["secret"].pk) not in {c["id"] for c in body["b"]["result"]}
    assert ok(anonymous.get(f"{keyed}/suggest/entity", {"prefix": "grace"}))["result"]
    assert anonymous.get(f"{keyed}/preview", {"id": people["ada"].pk}).status_code == 200
    assert_error(anonymous.get(f"{keyed}/preview", {"id": people["secret"].pk}), 404)
    # The key is no header token, and a wrong key or context tells nothing.
    header = APIClient()
    header.credentials(HTTP_AUTHORIZATION=f"Token {issued.raw}")
    assert_error(header.get(service), 401)
    assert_error(anonymous.get(f"{service}/k/mdr_wrong"), 404, "context_not_found")
    assert_error(anonymous.get(f"/api/v1/contexts/elsewhere/reconcile/k/{issued.raw}"), 404)
    token_revoke(access=access, token_id=issued.token.pk)
    assert_error(anonymous.get(keyed), 404)


def test_cors_preflight_and_headers(api: APIClient, service: str, people: Any) -> None:
    preflight = Client().options(
        f"{service}/match",
        HTTP_ORIGIN="https://refine.example",
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="authorization, content-type",
    )
    assert preflight.status_code == 204
    assert preflight["Access-Control-Allow-Origin"] == "*"
    assert "POST" in preflight["Access-Control-Allow-Methods"]
    assert "Authorization" in preflight["Access-Control-Allow-Headers"]
    answer = api.get(service, HTTP_ORIGIN="https://refine.example")
    assert answer["Access-Control-Allow-Origin"] == "*"
    refused = APIClient().get(service, HTTP_ORIGIN="https://refine.example")
    assert refused.status_code == 401 and refused["Access-Control-Allow-Origin"] == "*"


def test_tokens_page_creates_and_revokes_a_reconciliation_url(
    context: Context, make_user: Callable[..., Any], people: Any
) -> None:
    admin = make_user(context=context, role=Role.ADMIN)
    browser = Client()
    browser.force_login(admin)
    page = browser.get(f"/c/{context.slug}/tokens/")
    assert b"Reconciliation URLs" in page.content
    created = browser.post(
        f"/c/{context.slug}/tokens/reconcile", {"key-name": "OpenRefine", "key-scope": "*"}
    )
    assert created.status_code == 201
    assert created["Cache-Control"] == "no-store"
    url = created.context["reconcile_url"]
    assert "/reconcile/k/mdr_" in url
    path = url.split("testserver", 1)[1]
    assert ok(APIClient().get(path))["name"] == "Memory Desk: Test"
    token = ApiToken.objects.get(purpose=TokenPurpose.RECONCILE)
    assert token.name == "OpenRefine" and token.user == admin
    bad = browser.post(f"/c/{context.slug}/tokens/reconcile", {"key-scope": "no spaces!"})
    assert bad.status_code == 400
    assert ApiToken.objects.filter(purpose=TokenPurpose.RECONCILE).count() == 1
    browser.post(f"/c/{context.slug}/tokens/{token.pk}/revoke")
    assert_error(APIClient().get(path), 404)
    viewer = make_user(context=context, role=Role.VIEWER)
    browser.force_login(viewer)
    refused = browser.post(f"/c/{context.slug}/tokens/reconcile", {"key-scope": "*"})
    assert refused.status_code in (403, 404)
    assert ApiToken.objects.filter(purpose=TokenPurpose.RECONCILE).count() == 1


def test_openapi_documents_the_service(openapi: dict[str, Any]) -> None:
    paths = openapi["paths"]
    for sub in ("", "/match", "/extend", "/extend/propose", "/suggest/entity", "/preview"):
        assert f"/api/v1/contexts/{{ctx}}/reconcile{sub}" in paths


def test_an_exact_unique_name_of_the_asked_type_is_a_match(
    api: APIClient, service: str, access: ContextAccess, people: dict[str, Entity]
) -> None:
    def query(name: str, **more: Any) -> dict[str, Any]:
        body = ok(api.get(service, {"queries": json.dumps({"q": {"query": name, **more}})}))
        return body["q"]["result"][0]

    exact = query("alan turing", type="person")
    assert (exact["id"], exact["match"]) == (str(people["alan"].pk), True)
    # No type asked: the model decides, as before.
    assert query("Alan Turing")["id"] == str(people["alan"].pk)
    # A name two people share is no sure match, however exact.
    entity_upsert(access=access, name="Alan Turing", type="person", scope="org/other")
    assert query("Alan Turing", type="person")["match"] is False
