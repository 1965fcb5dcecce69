from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from memory.models import AuditEvent, Context, Predicate, Role
from tests.api.conftest import assert_error


def test_lists_the_standard_library(api: APIClient, base: str) -> None:
    page = api.get(f"{base}/predicates", {"limit": 500}).json()
    assert page["count"] == 44
    works_at = next(p for p in page["results"] if p["name"] == "works_at")
    assert set(works_at["aliases"]) >= {"worksat", "employed_by", "employee_of"} or set(
        works_at["aliases"]
    ) >= {"employed_by", "employee_of"}


def test_get_by_any_form_of_the_name(api: APIClient, base: str) -> None:
    for form in ("works_at", "worksAt", "WORKS_AT", "employed_by"):
        response = api.get(f"{base}/predicates/{form}")
        assert response.status_code == 200 and response.json()["name"] == "works_at", form


def test_canonicalize(api: APIClient, base: str) -> None:
    got = api.get(f"{base}/predicates/canonicalize", {"name": "worksAt"}).json()
    assert got == {
        "input": "worksAt",
        "canonical": "works_at",
        "registered": True,
        "via": "normalized",
        "inverse": False,
    }
    alias = api.get(f"{base}/predicates/canonicalize", {"name": "employed_by"}).json()
    assert alias["via"] == "alias" and alias["canonical"] == "works_at"
    unknown = api.get(f"{base}/predicates/canonicalize", {"name": "likesPizza"}).json()
    assert unknown == {
        "input": "likesPizza",
        "canonical": "likes_pizza",
        "registered": False,
        "via": "none",
        "inverse": False,
    }


def test_register_update_alias_unregister(api: APIClient, base: str) -> None:
    created = api.post(
        f"{base}/predicates",
        {"name": "mentorsOf", "category": "social", "description": "mentors someone"},
        format="json",
    )
    assert created.status_code == 201, created.content
    assert created.json()["name"] == "mentors_of"
    patched = api.patch(f"{base}/predicates/mentors_of", {"default_importance": 0.9}, format="json")
    assert patched.json()["default_importance"] == 0.9
    aliased = api.post(f"{base}/predicates/mentors_of/aliases", {"alias": "coaches"}, format="json")
    assert aliased.status_code == 201 and "coaches" in aliased.json()["aliases"]
    assert api.delete(f"{base}/predicates/mentors_of").status_code == 204
    assert_error(api.get(f"{base}/predicates/mentors_of"), 404)
    assert AuditEvent.objects.filter(target_type="predicate").count() >= 3


def test_collisions_are_refused(api: APIClient, base: str) -> None:
    alias_clash = api.post(
        f"{base}/predicates/knows/aliases", {"alias": "employed_by"}, format="json"
    )
    assert_error(alias_clash, 409, "predicate_collision")
    name_clash = api.post(f"{base}/predicates", {"name": "employed_by"}, format="json")
    assert_error(name_clash, 409, "predicate_collision")


def test_single_valued_and_aggregate_together_are_refused(api: APIClient, base: str) -> None:
    response = api.post(
        f"{base}/predicates",
        {"name": "headcount", "single_valued": True, "is_aggregate": True},
        format="json",
    )
    assert_error(response, 400, "invalid_flags")
    assert not Predicate.objects.filter(name="headcount").exists()


def test_hostile_names_are_refused(api: APIClient, base: str) -> None:
    response = api.post(
        f"{base}/predicates", {"name": "KNOWS]->() DETACH DELETE n //"}, format="json"
    )
    assert_error(response, 400)
    alias = api.post(
        f"{base}/predicates/knows/aliases", {"alias": "x'; DROP TABLE facts; --"}, format="json"
    )
    assert_error(alias, 400)
    assert Predicate.objects.count() == 44


def test_curator_cannot_edit_the_registry(
    context: Context, api_client_for: Callable[..., APIClient], base: str
) -> None:
    curator = api_client_for(context, role=Role.CURATOR)
    assert_error(
        curator.post(f"{base}/predicates", {"name": "mentors"}, format="json"), 403, "role_required"
    )
    assert_error(
        curator.patch(f"{base}/predicates/knows", {"description": "x"}, format="json"),
        403,
        "role_required",
    )
    assert_error(curator.delete(f"{base}/predicates/knows"), 403, "role_required")
    ok = curator.post(
        f"{base}/predicates/knows/aliases", {"alias": "is_acquainted_with"}, format="json"
    )
    assert ok.status_code == 201


def test_viewer_cannot_add_aliases(
    context: Context, api_client_for: Callable[..., APIClient], base: str
) -> None:
    viewer = api_client_for(context, role=Role.VIEWER)
    response = viewer.post(
        f"{base}/predicates/knows/aliases", {"alias": "acquainted"}, format="json"
    )
    assert_error(response, 403, "role_required")


def test_unknown_context(api: APIClient) -> None:
    assert_error(api.get("/api/v1/contexts/missing/predicates"), 404, "context_not_found")


def test_every_predicate_answer_counts_its_current_facts(api: APIClient, base: str) -> None:
    # Only the list counted: the detail, edit and alias answers said null for an integer.
    api.post(
        f"{base}/facts",
        {
            "subject": {"name": "Alex", "scope": "s"},
            "predicate": "works_at",
            "object": {"name": "Acme", "scope": "s"},
        },
        format="json",
    )
    assert api.get(f"{base}/predicates/works_at").json()["fact_count"] == 1
    patched = api.patch(f"{base}/predicates/works_at", {"description": "x"}, format="json")
    assert patched.json()["fact_count"] == 1
    aliased = api.post(f"{base}/predicates/works_at/aliases", {"alias": "toils_at"}, format="json")
    assert aliased.json()["fact_count"] == 1
    created = api.post(f"{base}/predicates", {"name": "mentors"}, format="json")
    assert created.json()["fact_count"] == 0


def test_ranking_weight_must_be_above_zero(
    api: APIClient, base: str, openapi: dict[str, Any]
) -> None:
    assert_error(api.patch(f"{base}/predicates/knows", {"ranking_weight": 0}, format="json"), 400)
    weight = openapi["components"]["schemas"]["PredicateFieldsRequest"]["properties"][
        "ranking_weight"
    ]
    assert (weight["minimum"], weight["exclusiveMinimum"]) == (0, True)


@pytest.mark.parametrize("name", ["works%40at", "%09works_at", "a" * 65], ids=["at", "tab", "long"])
def test_a_predicate_in_the_path_is_held_to_the_documented_text(
    api: APIClient, base: str, name: str
) -> None:
    # A tab around the name was stripped and the predicate found, although the document
    # (letters, digits, spaces, '_' and '-') calls that name invalid.
    assert_error(api.get(f"{base}/predicates/{name}"), 400, "invalid_predicate")
    assert_error(api.delete(f"{base}/predicates/{name}"), 400, "invalid_predicate")
    assert Predicate.objects.count() == 44
