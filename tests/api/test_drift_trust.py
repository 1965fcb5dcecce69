"""Drift resolution that cannot corrupt data: suggestions that say how sure they
are, inverse aliases, and the alias checks (kinds, single values, type hints)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from memory.models import AuditEvent, Context, Fact, Predicate, PredicateAlias, Role
from tests.api.conftest import assert_error


def _write(api: APIClient, base: str, **body: object) -> dict[str, Any]:
    response = api.post(f"{base}/facts", {"scope": "org/acme", **body}, format="json")
    assert response.status_code in (200, 201), response.content
    return response.json()  # type: ignore[no-any-return]


def _relation(api: APIClient, base: str, s: tuple[str, str], p: str, o: tuple[str, str]) -> None:
    _write(
        api,
        base,
        subject={"name": s[0], "type": s[1]},
        predicate=p,
        object={"name": o[0], "type": o[1]},
    )


def _attribute(api: APIClient, base: str, subject: str, p: str, value: str) -> None:
    _write(api, base, subject={"name": subject, "type": "person"}, predicate=p, value=value)


def _resolve(api: APIClient, base: str, name: str, **body: object) -> Any:
    return api.post(f"{base}/drift/{name}/resolve", {"action": "alias", **body}, format="json")


ACME, ALEX, SAM = ("Acme", "organisation"), ("Alex", "person"), ("Sam", "person")


def test_suggestions_carry_score_confidence_direction_and_kind(api: APIClient, base: str) -> None:
    _relation(api, base, ACME, "employer_of", ALEX)
    _relation(api, base, ("Globex", "organisation"), "employer_of", SAM)
    _attribute(api, base, "Sam", "favourite_colour", "green")

    items = {i["name"]: i for i in api.get(f"{base}/drift").json()["results"]}

    top = items["employer_of"]["suggestions"][0]
    assert (top["name"], top["inverse"], top["confident"], top["kind_match"]) == (
        "works_at",
        True,
        True,
        True,
    )
    assert 0 <= top["score"] <= 1
    assert not any(s["confident"] for s in items["favourite_colour"]["suggestions"])


def test_a_library_inverse_name_writes_swapped_and_reads_back_through_the_inverse(
    api: APIClient, base: str
) -> None:
    _relation(api, base, ACME, "employs", ALEX)

    stored = Fact.objects.get()
    assert stored.object is not None
    assert (stored.subject.name, stored.predicate.name, stored.object.name) == (
        "Alex",
        "works_at",
        "Acme",
    )
    answer = api.get(f"{base}/predicates/canonicalize", {"name": "employs"}).json()
    assert (answer["canonical"], answer["via"], answer["inverse"]) == ("works_at", "inverse", True)
    acme = str(stored.object_id)
    through = api.get(f"{base}/facts", {"predicate": "employs", "subject": acme}).json()
    assert [f["id"] for f in through["results"]] == [stored.pk]
    assert through["results"][0]["read_through_inverse"] == "employs"
    plain = api.get(f"{base}/facts", {"predicate": "works_at", "subject": acme}).json()
    assert plain["count"] == 0  # Acme works nowhere
    assert not Predicate.objects.filter(name="employs").exists()  # no drift either


def test_an_inverse_alias_rewrites_the_facts_swapped_and_undo_restores_them(
    api: APIClient, base: str
) -> None:
    _relation(api, base, ACME, "has_employee", ALEX)
    before = Fact.objects.get()

    event = _resolve(api, base, "has_employee", target="works_at", inverse=True)

    assert event.status_code == 200, event.content
    moved = Fact.objects.get(pk=before.pk)
    assert (moved.subject_id, moved.object_id, moved.predicate.name) == (
        before.object_id,
        before.subject_id,
        "works_at",
    )
    assert PredicateAlias.objects.get(alias="has_employee").inverse is True
    _relation(api, base, ("Globex", "organisation"), "has_employee", SAM)
    later = Fact.objects.latest("pk")
    assert (later.subject.name, later.predicate.name) == ("Sam", "works_at")
    assert "inverse of works_at" in event.json()["summary"]

    undo = api.post(f"{base}/audit/{event.json()['id']}/undo")
    assert undo.status_code == 200, undo.content
    back = Fact.objects.get(pk=before.pk)
    assert (back.subject_id, back.object_id, back.predicate.name) == (
        before.subject_id,
        before.object_id,
        "has_employee",
    )
    assert not PredicateAlias.objects.filter(alias="has_employee").exists()


def _nothing_changed(name: str) -> None:
    assert Predicate.objects.get(name=name).status == "observed"
    assert not AuditEvent.objects.filter(action__startswith="drift").exists()


def test_an_alias_across_kinds_is_a_409_naming_both_kinds(api: APIClient, base: str) -> None:
    _attribute(api, base, "Sam", "favourite_colour", "green")

    response = _resolve(api, base, "favourite_colour", target="priority_affects")

    assert_error(response, 409, "kind_mismatch")
    message = response.json()["error"]["message"]
    assert "attribute" in message and "relation" in message
    _nothing_changed("favourite_colour")
    assert Fact.objects.get().predicate.name == "favourite_colour"


def test_a_relation_onto_a_single_valued_attribute_is_refused(api: APIClient, base: str) -> None:
    _relation(api, base, ("Dana", "person"), "speaks_language", ("Portuguese", "concept"))

    assert_error(
        _resolve(api, base, "speaks_language", target="current_title"), 409, "kind_mismatch"
    )
    _nothing_changed("speaks_language")


@pytest.mark.parametrize(
    ("setup", "name", "body", "status", "code"),
    [
        (
            "attribute",
            "job_title",
            {"target": "current_title", "inverse": True},
            400,
            "inverse_not_relation",
        ),
        ("relation", "works_for", {"target": "works_for"}, 400, "alias_onto_self"),
        ("relation", "works_for", {"target": "works_at", "inverse": "sideways"}, 400, None),
        ("relation", "works_for", {"target": "works_at", "force": [1]}, 400, None),
        ("relation", "works_for", {"action": "reject", "inverse": True}, 400, "invalid_action"),
        ("relation", "works_for", {"action": "reject", "preview": True}, 400, "invalid_action"),
        ("relation", "works_for", {"target": "no_such_thing"}, 404, None),
    ],
)
def test_bad_alias_requests_are_4xx_and_write_nothing(
    api: APIClient,
    base: str,
    setup: str,
    name: str,
    body: dict[str, Any],
    status: int,
    code: str | None,
) -> None:
    if setup == "attribute":
        _attribute(api, base, "Dana", name, "VP Sales")
    else:
        _relation(api, base, ALEX, name, ACME)

    assert_error(_resolve(api, base, name, **body), status, code)
    _nothing_changed(name)


def test_a_single_valued_target_needs_force_and_says_how_many_subjects(
    api: APIClient, base: str
) -> None:
    _attribute(api, base, "Dana", "current_title", "VP Sales")
    _attribute(api, base, "Dana", "job_title", "CTO")
    _attribute(api, base, "Sam", "job_title", "Engineer")  # Sam has no title yet: fine

    refused = _resolve(api, base, "job_title", target="current_title")
    assert_error(refused, 409, "several_values")
    assert refused.json()["error"]["details"]["subjects"] == 1
    assert "1 subject" in refused.json()["error"]["message"]
    _nothing_changed("job_title")

    plan = _resolve(api, base, "job_title", target="current_title", preview=True)
    assert plan.status_code == 200, plan.content
    assert plan.json()["facts_moving"] == 2 and plan.json()["subjects_with_several_values"] == 1
    # The facts that move, as they will read on the target.
    assert sorted(plan.json()["moving"]) == [
        "Dana current_title CTO",
        "Sam current_title Engineer",
    ]
    _nothing_changed("job_title")

    forced = _resolve(api, base, "job_title", target="current_title", force=True)
    assert forced.status_code == 200, forced.content
    assert not Predicate.objects.filter(name="job_title").exists()


def test_the_preview_warns_of_type_hint_mismatches(api: APIClient, base: str) -> None:
    _relation(api, base, ("Project Atlas", "project"), "staffed_at", ACME)

    plan = _resolve(api, base, "staffed_at", target="works_at", preview=True).json()

    assert plan["warnings"] == ["1 fact would have a project subject; works_at expects person"]
    _nothing_changed("staffed_at")


def test_a_viewer_cannot_preview_or_alias_inversely(
    api: APIClient, base: str, context: Context, api_client_for: Callable[..., APIClient]
) -> None:
    _relation(api, base, ACME, "has_employee", ALEX)
    viewer = api_client_for(context, role=Role.VIEWER)

    for body in ({"target": "works_at", "inverse": True}, {"target": "works_at", "preview": True}):
        assert_error(_resolve(viewer, base, "has_employee", **body), 403, "role_required")
    _nothing_changed("has_employee")


def test_the_schema_documents_the_new_fields(openapi: dict[str, Any]) -> None:
    schemas = openapi["components"]["schemas"]
    assert {"confident", "inverse", "kind_match", "score"} <= set(
        schemas["Suggestion"]["properties"]
    )
    assert "read_through_inverse" in schemas["FactOutput"]["properties"]


MARIA = ("Maria Chen", "person")
ACME_CORP = ("Acme Corp", "organisation")


def test_an_inverse_alias_previews_swapped_and_folds_into_the_identical_fact(
    api: APIClient, base: str
) -> None:
    _relation(api, base, MARIA, "works_at", ACME_CORP)
    _relation(api, base, ACME_CORP, "has_staff", MARIA)
    existing = Fact.objects.get(predicate__name="works_at")

    plan = _resolve(api, base, "has_staff", target="works_at", inverse=True, preview=True)

    assert plan.status_code == 200, plan.content
    assert plan.json()["moving"] == ["Maria Chen works_at Acme Corp"]
    assert plan.json()["warnings"] == []
    assert plan.json()["subjects_with_several_values"] == 0

    event = _resolve(api, base, "has_staff", target="works_at", inverse=True)

    assert event.status_code == 200, event.content
    maria = str(existing.subject_id)
    current = api.get(f"{base}/facts", {"subject": maria, "predicate": "works_at"}).json()
    assert [f["id"] for f in current["results"]] == [existing.pk]
    assert current["results"][0]["observed_count"] == 2
    assert Fact.objects.filter(status="current", predicate__name="works_at").count() == 1

    assert api.post(f"{base}/audit/{event.json()['id']}/undo").status_code == 200
    staff = Fact.objects.get(predicate__name="has_staff")
    assert staff.object is not None
    assert (staff.subject.name, staff.object.name, staff.status) == (
        "Acme Corp",
        "Maria Chen",
        "current",
    )
    existing.refresh_from_db()
    assert (existing.status, existing.observed_count) == ("current", 1)


def test_an_inverse_alias_checks_a_single_valued_target_in_the_stored_direction(
    api: APIClient, base: str
) -> None:
    """Sam's line manager is Maria; "Maria manager_of Sam" read backwards is "Sam
    line_manager Maria", the same value: no subject gets a second one. "Maria manager_of
    Alex" read backwards gives Alex a first manager, not Maria a second report."""
    registered = api.post(
        f"{base}/predicates",
        {"name": "line_manager", "kind": "relation", "single_valued": True},
        format="json",
    )
    assert registered.status_code == 201, registered.content
    _relation(api, base, SAM, "line_manager", MARIA)
    _relation(api, base, MARIA, "manager_of", SAM)
    _relation(api, base, MARIA, "manager_of", ALEX)

    plan = _resolve(api, base, "manager_of", target="line_manager", inverse=True, preview=True)

    assert plan.status_code == 200, plan.content
    assert plan.json()["subjects_with_several_values"] == 0
    assert sorted(plan.json()["moving"]) == [
        "Alex line_manager Maria Chen",
        "Sam line_manager Maria Chen",
    ]
    moved = _resolve(api, base, "manager_of", target="line_manager", inverse=True)
    assert moved.status_code == 200, moved.content
    current = Fact.objects.filter(status="current", predicate__name="line_manager")
    assert sorted((f.subject.name, f.object.name) for f in current if f.object is not None) == [
        ("Alex", "Maria Chen"),
        ("Sam", "Maria Chen"),
    ]


def test_undoing_an_alias_is_an_audited_action_that_can_be_undone(
    api: APIClient, base: str
) -> None:
    _relation(api, base, ACME, "has_employee", ALEX)
    aliased = _resolve(api, base, "has_employee", target="works_at", inverse=True).json()

    undo = api.post(f"{base}/audit/{aliased['id']}/undo")

    assert undo.status_code == 200, undo.content
    assert Predicate.objects.get(name="has_employee").status == "observed"
    undone = api.get(f"{base}/audit", {"action": "drift_alias_undo"}).json()["results"]
    assert [e["summary"] for e in undone] == [
        "undid the alias has_employee → inverse of works_at; its facts are back on has_employee"
    ]
    redo = api.post(f"{base}/audit/{undone[0]['id']}/undo")
    assert redo.status_code == 200, redo.content
    assert not Predicate.objects.filter(name="has_employee").exists()
    stored = Fact.objects.get()
    assert stored.object is not None
    assert (stored.subject.name, stored.predicate.name, stored.object.name) == (
        "Alex",
        "works_at",
        "Acme",
    )
    again = api.get(f"{base}/audit", {"action": "drift_alias"}).json()["results"]
    assert len(again) == 2 and again[0]["undone_at"] is None  # the redo, undoable in turn
    assert api.post(f"{base}/audit/{again[0]['id']}/undo").status_code == 200


def test_undoing_a_rejection_is_audited_and_undoable(api: APIClient, base: str) -> None:
    _attribute(api, base, "Sam", "favourite_colour", "green")
    rejected = api.post(
        f"{base}/drift/favourite_colour/resolve", {"action": "reject"}, format="json"
    ).json()

    assert api.post(f"{base}/audit/{rejected['id']}/undo").status_code == 200
    assert Fact.objects.get().status == "current"
    [undone] = api.get(f"{base}/audit", {"action": "drift_reject_undo"}).json()["results"]
    assert api.post(f"{base}/audit/{undone['id']}/undo").status_code == 200
    assert Predicate.objects.get(name="favourite_colour").status == "rejected"
    assert Fact.objects.get().status == "retracted"
