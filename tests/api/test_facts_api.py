from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from memory.models import Context, Entity, Fact, Predicate, Role
from tests.api.conftest import assert_error, operation, response_schema


def _fact(api: APIClient, base: str, **body: object) -> dict:  # type: ignore[type-arg]
    response = api.post(f"{base}/facts", body, format="json")
    assert response.status_code in (200, 201), response.content
    return response.json()  # type: ignore[no-any-return]


def test_write_by_entity_names_and_read_by_any_predicate_form(api: APIClient, base: str) -> None:
    out = _fact(
        api,
        base,
        subject={"name": "Alex", "type": "person"},
        predicate="worksAt",
        object={"name": "Acme Corp", "type": "company"},
        scope="org/acme",
    )
    assert out["outcome"] == "created" and out["predicate_via"] == "normalized"
    assert out["fact"]["predicate"] == "works_at"
    assert out["fact"]["object"]["name"] == "Acme Corp"
    for form in ("works_at", "worksAt", "Works At", "employed_by"):
        listed = api.get(f"{base}/facts", {"predicate": form}).json()
        assert listed["count"] == 1, form


def test_supersession_as_of_and_include_superseded(api: APIClient, base: str) -> None:
    alex = {"name": "Alex", "type": "person"}
    first = _fact(api, base, subject=alex, predicate="current_title", value="Engineer", scope="s")
    second = _fact(api, base, subject=alex, predicate="current_title", value="CTO", scope="s")
    assert second["outcome"] == "superseded" and second["superseded"] == first["fact"]["id"]
    current = api.get(f"{base}/facts", {"predicate": "current_title"}).json()["results"]
    assert [f["value"] for f in current] == ["CTO"]
    everything = api.get(f"{base}/facts", {"include_superseded": "true"}).json()["results"]
    assert sorted(f["status"] for f in everything) == ["current", "superseded"]
    as_of = api.get(f"{base}/facts", {"as_of": first["fact"]["recorded_at"]}).json()["results"]
    assert [f["value"] for f in as_of] == ["Engineer"]


def test_low_confidence_single_value_reports_a_conflict(api: APIClient, base: str) -> None:
    alex = {"name": "Alex", "type": "person"}
    _fact(api, base, subject=alex, predicate="current_title", value="Engineer", scope="s")
    out = _fact(
        api, base, subject=alex, predicate="current_title", value="CTO", scope="s", confidence=0.5
    )
    assert out["outcome"] == "conflict" and out["conflict"]
    assert out["fact"]["status"] == "contested"


def test_retract(api: APIClient, base: str) -> None:
    out = _fact(
        api, base, subject={"name": "Alex"}, predicate="knows", object={"name": "Sam"}, scope="s"
    )
    retracted = api.delete(f"{base}/facts/{out['fact']['id']}")
    assert retracted.json()["status"] == "retracted"
    assert api.get(f"{base}/facts").json()["count"] == 0


@pytest.mark.parametrize(
    "body",
    [
        {
            "subject": {"name": "Alex"},
            "predicate": "KNOWS]->() DETACH DELETE n //",
            "object": {"name": "Sam"},
            "scope": "s",
        },
        {
            "subject": {"name": "x" * 100_000},
            "predicate": "knows",
            "object": {"name": "Sam"},
            "scope": "s",
        },
        {"subject": {"name": "Alex"}, "predicate": "knows", "scope": "s"},
        {"subject": {"name": "Alex"}, "predicate": "knows", "object": {"name": "Sam"}},
        {"subject": 999999, "predicate": "knows", "object": {"name": "Sam"}, "scope": "s"},
        {"subject": True, "predicate": "knows", "scope": "s"},
        {
            "subject": {"name": "Alex"},
            "predicate": "current_title",
            "value": "x",
            "confidence": 7,
            "scope": "s",
        },
        {
            "subject": {"name": "Alex"},
            "predicate": "current_title",
            "value": "x",
            "valid_from": "yesterday",
            "scope": "s",
        },
    ],
    ids=[
        "hostile-predicate",
        "huge-name",
        "missing-object",
        "no-scope",
        "unknown-subject",
        "bool-subject",
        "bad-confidence",
        "bad-date",
    ],
)
def test_bad_fact_bodies_write_nothing(api: APIClient, base: str, body: dict) -> None:  # type: ignore[type-arg]
    response = api.post(f"{base}/facts", body, format="json")
    assert 400 <= response.status_code < 500, response.content
    assert_error(response, response.status_code)
    assert Fact.objects.count() == 0
    assert Entity.objects.count() == 0
    assert not Predicate.objects.filter(name__contains="detach").exists()


def test_strict_context_refuses_unknown_predicate_but_records_drift(
    make_context: Callable[..., Context], api_client_for: Callable[..., APIClient]
) -> None:
    strict = make_context("strict-ctx", predicate_mode="strict")
    client = api_client_for(strict)
    response = client.post(
        "/api/v1/contexts/strict-ctx/facts",
        {"subject": {"name": "Alex"}, "predicate": "likesPizza", "value": "yes", "scope": "s"},
        format="json",
    )
    assert_error(response, 400, "unknown_predicate")
    assert Fact.objects.count() == 0 and Entity.objects.count() == 0
    assert Predicate.objects.get(context=strict, name="likes_pizza").status == "observed"


def test_fact_write_needs_write_grant(
    context: Context, api_client_for: Callable[..., APIClient], base: str
) -> None:
    reader = api_client_for(context, role=Role.ADMIN, grants=["read:*"])
    response = reader.post(
        f"{base}/facts",
        {"subject": {"name": "A"}, "predicate": "knows", "object": {"name": "B"}, "scope": "s"},
        format="json",
    )
    assert_error(response, 403, "scope_forbidden")
    assert Entity.objects.count() == 0


def test_fact_reads_respect_grants(
    api: APIClient, context: Context, api_client_for: Callable[..., APIClient], base: str
) -> None:
    _fact(
        api, base, subject={"name": "A"}, predicate="knows", object={"name": "B"}, scope="org/acme"
    )
    hidden = _fact(
        api,
        base,
        subject={"name": "C"},
        predicate="knows",
        object={"name": "D"},
        scope="org/globex",
    )
    limited = api_client_for(context, role=Role.VIEWER, grants=["read:org/acme"])
    assert limited.get(f"{base}/facts").json()["count"] == 1
    assert_error(limited.get(f"{base}/facts/{hidden['fact']['id']}"), 404)


@pytest.mark.parametrize(
    "query",
    ["kind=opinion", "include_superseded=maybe", "subject=" + "x" * 501],
    ids=lambda q: q[:20],
)
def test_bad_list_filters_are_a_400(api: APIClient, base: str, query: str) -> None:
    assert_error(api.get(f"{base}/facts?{query}"), 400, "invalid")


def test_list_filters_are_documented_as_validated(openapi: dict[str, Any]) -> None:
    parameters = {p["name"]: p for p in operation(openapi, "GET", "/facts")["parameters"]}
    assert parameters["object"]["schema"]["type"] == "string"
    assert "name" in parameters["subject"]["description"]
    parameters = {name: p["schema"] for name, p in parameters.items()}
    assert parameters["include_superseded"]["type"] == "boolean"


def test_retraction_is_documented_as_answering_the_fact(openapi: dict[str, Any]) -> None:
    # It answers 200 with the retracted fact; the document said 204 with no body.
    responses = operation(openapi, "DELETE", "/facts/{fact_id}")["responses"]
    assert "204" not in responses
    assert response_schema(openapi, "DELETE", "/facts/{fact_id}", 200)["properties"]["status"]


def _at(api: APIClient, base: str, when: str, **query: str) -> list[tuple[Any, str]]:
    listed = api.get(f"{base}/facts", {"as_of": when, **query})
    assert listed.status_code == 200, listed.content
    return [(f["value"], f["status"]) for f in listed.json()["results"]]


def test_as_of_answers_the_values_current_then_with_the_status_they_had(
    api: APIClient, base: str
) -> None:
    alex = {"name": "Alex", "type": "person"}
    first = _fact(api, base, subject=alex, predicate="current_title", value="Engineer", scope="s")
    second = _fact(
        api, base, subject=alex, predicate="current_title", value="Staff Engineer", scope="s"
    )
    assert api.delete(f"{base}/facts/{second['fact']['id']}").status_code == 200
    retracted_at = Fact.objects.get(pk=second["fact"]["id"]).status_changed_at
    assert retracted_at is not None

    assert _at(api, base, first["fact"]["recorded_at"]) == [("Engineer", "current")]
    assert _at(api, base, second["fact"]["recorded_at"]) == [("Staff Engineer", "current")]
    assert _at(api, base, retracted_at.isoformat()) == []
    everything = api.get(f"{base}/facts", {"include_superseded": "true"}).json()["results"]
    assert sorted(f["status"] for f in everything) == ["retracted", "superseded"]


def test_as_of_leaves_out_a_value_that_was_contested_then(api: APIClient, base: str) -> None:
    alex = {"name": "Alex", "type": "person"}
    _fact(api, base, subject=alex, predicate="current_title", value="Engineer", scope="s")
    doubtful = _fact(
        api, base, subject=alex, predicate="current_title", value="CTO", scope="s", confidence=0.5
    )
    resolved = api.post(
        f"{base}/conflicts/{doubtful['conflict']}/resolve",
        {"action": "keep_current"},
        format="json",
    )
    assert resolved.status_code == 200, resolved.content

    assert _at(api, base, doubtful["fact"]["recorded_at"]) == [("Engineer", "current")]


def test_a_registered_inverse_pair_reads_through_each_other(api: APIClient, base: str) -> None:
    alex, maria = {"name": "Alex", "type": "person"}, {"name": "Maria", "type": "person"}
    _fact(api, base, subject=alex, predicate="reports_to", object=maria, scope="s")
    sam = {"name": "Sam", "type": "person"}
    _fact(api, base, subject=maria, predicate="manages", object=sam, scope="s")

    managed = api.get(f"{base}/facts", {"predicate": "manages", "subject": "Maria"}).json()
    read: set[tuple[Any, ...]] = {
        (f["subject"]["name"], f["predicate"], f["object"]["name"], f["read_through_inverse"])
        for f in managed["results"]
    }
    assert read == {
        ("Maria", "manages", "Sam", None),
        ("Alex", "reports_to", "Maria", "manages"),
    }
    reports = api.get(f"{base}/facts", {"predicate": "reports_to", "object": "Maria"}).json()
    # A fact read backwards keeps its stored ends: "Maria manages Sam" answers "who
    # reports to Maria" with Sam as its object.
    read = {
        (f["subject"]["name"], f["object"]["name"], f["read_through_inverse"])
        for f in reports["results"]
    }
    assert read == {("Alex", "Maria", None), ("Maria", "Sam", "reports_to")}


def test_subject_and_object_filters_take_names_like_find_facts(api: APIClient, base: str) -> None:
    corp = _fact(
        api,
        base,
        subject={"name": "Maria Chen", "type": "person"},
        predicate="works_at",
        object={"name": "Acme Corp", "type": "organisation"},
        scope="org/acme",
    )
    _fact(
        api,
        base,
        subject={"name": "Jo", "type": "person"},
        predicate="works_at",
        object={"name": "ACME Inc.", "type": "organisation", "scope": "org/other"},
        scope="org/other",
    )
    by_name = api.get(f"{base}/facts", {"object": "Acme Corp"}).json()
    assert [f["id"] for f in by_name["results"]] == [corp["fact"]["id"]]
    by_subject = api.get(f"{base}/facts", {"subject": "maria chen", "predicate": "works_at"})
    assert [f["id"] for f in by_subject.json()["results"]] == [corp["fact"]["id"]]
    by_id = api.get(f"{base}/facts", {"object": corp["fact"]["object"]["id"]}).json()
    assert [f["id"] for f in by_id["results"]] == [corp["fact"]["id"]]
    assert_error(api.get(f"{base}/facts", {"subject": "Nobody Atall"}), 404, "entity_not_found")
    assert_error(api.get(f"{base}/facts", {"object": "0"}), 404, "entity_not_found")
