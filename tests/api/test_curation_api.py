from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from django.db import connections
from rest_framework.test import APIClient

from memory.domain.access import system_access
from memory.kernel.errors import Conflict as ConflictError
from memory.models import AuditEvent, Context, Fact, Predicate, PredicateAlias, Role
from memory.services.contexts import context_create
from memory.services.drift.alias import drift_alias
from memory.services.entities.writes import entity_upsert
from memory.services.facts.write import fact_write
from tests.api.conftest import assert_error


def _write(api: APIClient, base: str, **body: object) -> dict:  # type: ignore[type-arg]
    response = api.post(f"{base}/facts", {"scope": "org/acme", **body}, format="json")
    assert response.status_code in (200, 201), response.content
    return response.json()  # type: ignore[no-any-return]


@pytest.fixture
def drifted(api: APIClient, base: str) -> None:
    _write(
        api,
        base,
        subject={"name": "Alex", "type": "person"},
        predicate="works_for",
        object={"name": "Acme", "type": "organisation"},
    )
    _write(
        api,
        base,
        subject={"name": "Sam", "type": "person"},
        predicate="worksFor",
        object={"name": "Acme", "type": "organisation"},
    )


def test_drift_lists_observed_predicates_with_examples_and_suggestions(
    api: APIClient, base: str, drifted: None
) -> None:
    items = api.get(f"{base}/drift").json()["results"]
    assert [i["name"] for i in items] == ["works_for"]
    item = items[0]
    assert item["fact_count"] == 2 and len(item["examples"]) == 2
    assert item["suggestions"][0]["name"] == "works_at"


def test_alias_moves_facts_keeps_raw_predicate_and_undo_restores(
    api: APIClient, base: str, drifted: None
) -> None:
    event = api.post(
        f"{base}/drift/works_for/resolve", {"action": "alias", "target": "works_at"}, format="json"
    )
    assert event.status_code == 200, event.content
    facts = api.get(f"{base}/facts", {"predicate": "works_at"}).json()["results"]
    assert sorted(f["raw_predicate"] for f in facts) == ["worksFor", "works_for"]
    assert api.get(f"{base}/drift").json()["count"] == 0
    assert (
        api.get(f"{base}/predicates/canonicalize", {"name": "works_for"}).json()["via"] == "alias"
    )

    undone = api.post(f"{base}/audit/{event.json()['id']}/undo")
    assert undone.status_code == 200 and undone.json()["undone_at"]
    assert api.get(f"{base}/facts", {"predicate": "works_at"}).json()["count"] == 0
    assert [i["name"] for i in api.get(f"{base}/drift").json()["results"]] == ["works_for"]
    assert not PredicateAlias.objects.filter(alias="works_for").exists()
    assert_error(api.post(f"{base}/audit/{event.json()['id']}/undo"), 409, "already_undone")


def test_alias_onto_single_valued_keeps_one_current_value(api: APIClient, base: str) -> None:
    alex = {"name": "Alex", "type": "person"}
    _write(api, base, subject=alex, predicate="current_title", value="Engineer")
    _write(api, base, subject=alex, predicate="jobTitle", value="CTO")
    event = api.post(
        f"{base}/drift/job_title/resolve",
        {"action": "alias", "target": "current_title", "force": True},
        format="json",
    )
    assert event.status_code == 200, event.content
    current = api.get(f"{base}/facts", {"predicate": "current_title"}).json()["results"]
    assert [f["value"] for f in current] == ["CTO"]
    api.post(f"{base}/audit/{event.json()['id']}/undo")
    assert [
        f["value"]
        for f in api.get(f"{base}/facts", {"predicate": "current_title"}).json()["results"]
    ] == ["Engineer"]


def test_promote_and_reject_are_undoable(api: APIClient, base: str, drifted: None) -> None:
    _write(
        api,
        base,
        subject={"name": "Alex", "type": "person"},
        predicate="likes",
        object={"name": "Tea", "type": "product"},
    )
    promoted = api.post(
        f"{base}/drift/works_for/resolve",
        {"action": "promote", "definition": {"description": "employment", "category": "identity"}},
        format="json",
    )
    assert promoted.status_code == 200, promoted.content
    assert api.get(f"{base}/predicates/works_for").json()["status"] == "registered"
    rejected = api.post(f"{base}/drift/likes/resolve", {"action": "reject"}, format="json")
    assert rejected.status_code == 200
    assert api.get(f"{base}/facts", {"predicate": "likes"}).json()["count"] == 0
    refused = api.post(
        f"{base}/facts",
        {
            "subject": {"name": "Alex"},
            "predicate": "likes",
            "object": {"name": "Tea"},
            "scope": "org/acme",
        },
        format="json",
    )
    assert_error(refused, 400, "rejected_predicate")
    api.post(f"{base}/audit/{rejected.json()['id']}/undo")
    assert api.get(f"{base}/facts", {"predicate": "likes"}).json()["count"] == 1
    api.post(f"{base}/audit/{promoted.json()['id']}/undo")
    assert api.get(f"{base}/predicates/works_for").json()["status"] == "observed"


def test_resolving_twice_is_a_409(api: APIClient, base: str, drifted: None) -> None:
    api.post(f"{base}/drift/works_for/resolve", {"action": "reject"}, format="json")
    again = api.post(f"{base}/drift/works_for/resolve", {"action": "reject"}, format="json")
    assert_error(again, 409, "drift_not_open")


@pytest.mark.parametrize(
    "body",
    [{"action": "explode"}, {"action": "alias"}, {"action": "alias", "target": "nope_nothing"}, {}],
)
def test_bad_drift_resolutions_change_nothing(
    api: APIClient, base: str, drifted: None, body: dict
) -> None:  # type: ignore[type-arg]
    response = api.post(f"{base}/drift/works_for/resolve", body, format="json")
    assert 400 <= response.status_code < 500
    assert Predicate.objects.get(name="works_for").status == "observed"
    assert not AuditEvent.objects.filter(action__startswith="drift").exists()


def test_viewer_cannot_resolve_drift_or_undo(
    api: APIClient,
    base: str,
    drifted: None,
    context: Context,
    api_client_for: Callable[..., APIClient],
) -> None:
    viewer = api_client_for(context, role=Role.VIEWER)
    assert_error(
        viewer.post(f"{base}/drift/works_for/resolve", {"action": "reject"}, format="json"),
        403,
        "role_required",
    )
    event = api.post(f"{base}/drift/works_for/resolve", {"action": "reject"}, format="json")
    assert_error(viewer.post(f"{base}/audit/{event.json()['id']}/undo"), 403, "role_required")
    assert viewer.get(f"{base}/audit").json()["count"] == 1  # viewers read the log


def test_drift_hides_predicates_whose_facts_are_all_outside_the_grants(
    api: APIClient, base: str, context: Context, api_client_for: Callable[..., APIClient]
) -> None:
    api.post(
        f"{base}/facts",
        {
            "subject": {"name": "X"},
            "predicate": "secretLink",
            "object": {"name": "Y"},
            "scope": "org/globex",
        },
        format="json",
    )
    limited = api_client_for(context, role=Role.CURATOR, grants=["read,write:org/acme/*"])
    assert limited.get(f"{base}/drift").json()["count"] == 0
    assert api.get(f"{base}/drift").json()["count"] == 1


def test_conflicts_list_and_resolutions(api: APIClient, base: str) -> None:
    alex = {"name": "Alex", "type": "person"}
    _write(api, base, subject=alex, predicate="current_title", value="Engineer")
    _write(api, base, subject=alex, predicate="current_title", value="CTO", confidence=0.4)
    conflicts = api.get(f"{base}/conflicts").json()["results"]
    assert len(conflicts) == 1
    conflict = conflicts[0]
    assert (conflict["current_fact"]["value"], conflict["contested_fact"]["value"]) == (
        "Engineer",
        "CTO",
    )
    kept = api.post(
        f"{base}/conflicts/{conflict['id']}/resolve", {"action": "keep_new"}, format="json"
    )
    assert kept.json()["status"] == "resolved"
    assert [
        f["value"]
        for f in api.get(f"{base}/facts", {"predicate": "current_title"}).json()["results"]
    ] == ["CTO"]
    assert api.get(f"{base}/conflicts").json()["count"] == 0
    event = api.get(f"{base}/audit", {"action": "conflict_resolve"}).json()["results"][0]
    api.post(f"{base}/audit/{event['id']}/undo")
    assert api.get(f"{base}/conflicts").json()["count"] == 1
    assert [
        f["value"]
        for f in api.get(f"{base}/facts", {"predicate": "current_title"}).json()["results"]
    ] == ["Engineer"]


def test_conflict_edit_writes_the_curated_value(api: APIClient, base: str) -> None:
    alex = {"name": "Alex", "type": "person"}
    _write(api, base, subject=alex, predicate="current_title", value="Engineer")
    out = _write(api, base, subject=alex, predicate="current_title", value="CTO", confidence=0.4)
    edited = api.post(
        f"{base}/conflicts/{out['conflict']}/resolve",
        {"action": "edit", "value": "Chief Technology Officer"},
        format="json",
    )
    assert edited.status_code == 200, edited.content
    current = api.get(f"{base}/facts", {"predicate": "current_title"}).json()["results"]
    assert [f["value"] for f in current] == ["Chief Technology Officer"]
    assert Fact.objects.get(value="CTO").status == "retracted"


def test_viewer_cannot_resolve_conflicts(
    api: APIClient, base: str, context: Context, api_client_for: Callable[..., APIClient]
) -> None:
    alex = {"name": "Alex", "type": "person"}
    _write(api, base, subject=alex, predicate="current_title", value="Engineer")
    out = _write(api, base, subject=alex, predicate="current_title", value="CTO", confidence=0.4)
    viewer = api_client_for(context, role=Role.VIEWER)
    assert_error(
        viewer.post(
            f"{base}/conflicts/{out['conflict']}/resolve", {"action": "keep_new"}, format="json"
        ),
        403,
    )
    assert_error(
        api.post(f"{base}/conflicts/{out['conflict']}/resolve", {"action": "nope"}, format="json"),
        400,
    )
    assert api.get(f"{base}/conflicts").json()["count"] == 1


@pytest.mark.django_db(transaction=True)
def test_two_curators_resolving_the_same_drift_item_one_wins() -> None:
    context = context_create(slug="race-drift", name="Race")
    access = system_access(context)
    alex = entity_upsert(access=access, name="Alex", type="person", scope="s").entity
    acme = entity_upsert(access=access, name="Acme", type="organisation", scope="s").entity
    fact_write(access=access, subject=alex, predicate="works_for", object=acme)
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def resolve() -> None:
        try:
            barrier.wait()
            drift_alias(
                access=system_access(Context.objects.get(pk=context.pk)),
                name="works_for",
                target="works_at",
            )
            outcomes.append("ok")
        except ConflictError as exc:
            outcomes.append(exc.code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=resolve) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["drift_not_open", "ok"]
    assert Fact.objects.get().predicate.name == "works_at"
    assert AuditEvent.objects.filter(action="drift_alias").count() == 1


def test_audit_hides_events_about_entities_outside_the_grants(
    api: APIClient, base: str, context: Context, api_client_for: Callable[..., APIClient]
) -> None:
    inside = api.post(f"{base}/entities", {"name": "In", "scope": "org/acme"}, format="json")
    outside = api.post(f"{base}/entities", {"name": "Out", "scope": "org/globex"}, format="json")
    for entity in (inside.json(), outside.json()):
        api.patch(f"{base}/entities/{entity['id']}", {"aliases": ["x"]}, format="json")
    limited = api_client_for(context, role=Role.VIEWER, grants=["read:org/acme/*"])
    events = limited.get(f"{base}/audit").json()["results"]
    assert [e["target_id"] for e in events] == [str(inside.json()["id"])]
    assert api.get(f"{base}/audit").json()["count"] == 2


def test_a_bad_conflict_status_filter_is_a_400(api: APIClient, base: str) -> None:
    # "resolvd" filtered on a status no conflict has: an empty page instead of an error.
    assert_error(api.get(f"{base}/conflicts", {"status": "resolvd"}), 400, "invalid")
    assert api.get(f"{base}/conflicts", {"status": "all"}).status_code == 200


def test_an_edit_with_a_null_value_gets_the_services_reason(api: APIClient, base: str) -> None:
    # The serializer refused null with "may not be null" before the service could say what
    # an edit needs.
    alex = {"name": "Alex", "type": "person"}
    _write(api, base, subject=alex, predicate="current_title", value="Engineer")
    out = _write(api, base, subject=alex, predicate="current_title", value="CTO", confidence=0.4)
    response = api.post(
        f"{base}/conflicts/{out['conflict']}/resolve",
        {"action": "edit", "value": None},
        format="json",
    )
    assert_error(response, 400, "missing_value")
    assert api.get(f"{base}/conflicts").json()["count"] == 1
