"""A curator's actions on single facts over REST — retract (one and many), restore,
correct, edit — each audited and undone exactly; every refusal a clear 4xx that writes
nothing; and the conversations the facts came from."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from memory.models import AuditEvent, Conflict, Context, Fact, FactStatus, Role
from tests.api.conftest import assert_error

ACME = {"name": "Acme", "type": "organisation", "scope": "org/acme"}
ALEX = {"name": "Alex", "type": "person", "scope": "org/acme"}


def _write(api: APIClient, base: str, **body: Any) -> dict[str, Any]:
    response = api.post(f"{base}/facts", {"scope": "org/acme", **body}, format="json")
    assert response.status_code in (200, 201), response.content
    fact: dict[str, Any] = response.json()["fact"]
    return fact


def _undo(api: APIClient, base: str, event_id: int) -> Any:
    return api.post(f"{base}/audit/{event_id}/undo", format="json")


def _status(fact_id: int) -> str:
    return Fact.objects.get(pk=fact_id).status


def _written() -> tuple[int, int, int]:
    """What a refused call must leave alone."""
    return Fact.objects.count(), AuditEvent.objects.count(), Conflict.objects.count()


@pytest.fixture
def works(api: APIClient, base: str) -> dict[str, Any]:
    return _write(api, base, subject=ALEX, predicate="works_at", object=ACME)


@pytest.fixture
def title(api: APIClient, base: str) -> dict[str, Any]:
    return _write(api, base, subject=ALEX, predicate="current_title", value="Enginer")


@pytest.fixture
def curator(context: Context, api_client_for: Callable[..., APIClient]) -> APIClient:
    return api_client_for(context, role=Role.CURATOR)


def test_retract_is_audited_and_undone_exactly(
    curator: APIClient, base: str, works: dict[str, Any]
) -> None:
    response = curator.delete(f"{base}/facts/{works['id']}")
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "retracted"
    event = AuditEvent.objects.get(action="fact_retract")
    assert event.target_id == str(works["id"]) and "Alex works_at Acme" in event.summary

    assert _undo(curator, base, event.pk).status_code == 200
    fact = Fact.objects.get(pk=works["id"])
    assert fact.status == FactStatus.CURRENT
    assert fact.status_changed_at is None  # exactly as it was


def test_many_facts_retract_in_one_action_and_one_undo(
    curator: APIClient, base: str, works: dict[str, Any], title: dict[str, Any]
) -> None:
    ids = [works["id"], title["id"]]
    response = curator.post(
        f"{base}/facts/retract", {"ids": ids, "reason": "wrong person"}, format="json"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert sorted(body["retracted"]) == sorted(ids)
    assert body["summary"] == "retracted 2 facts: wrong person"
    assert {_status(i) for i in ids} == {"retracted"}

    again = curator.post(f"{base}/facts/retract", {"ids": ids}, format="json").json()
    assert again["retracted"] == [] and again["audit_event"] is None

    assert _undo(curator, base, body["audit_event"]).status_code == 200
    assert {_status(i) for i in ids} == {"current"}


@pytest.mark.parametrize(
    "body",
    [{"ids": []}, {"ids": [0]}, {"ids": "1"}, {"ids": [1], "extra": 1}, {}],
    ids=["empty", "zero", "not-a-list", "unknown-field", "missing"],
)
def test_bad_retract_bodies_are_400(api: APIClient, base: str, body: dict[str, Any]) -> None:
    assert_error(api.post(f"{base}/facts/retract", body, format="json"), 400)


def test_an_unknown_fact_refuses_the_whole_retraction(
    api: APIClient, base: str, works: dict[str, Any]
) -> None:
    before = _written()
    response = api.post(f"{base}/facts/retract", {"ids": [works["id"], 999999]}, format="json")
    assert_error(response, 404, "fact_not_found")
    assert _written() == before and _status(works["id"]) == "current"


def test_a_fact_of_another_context_is_not_found(
    make_context: Callable[..., Context],
    api_client_for: Callable[..., APIClient],
    base: str,
    works: dict[str, Any],
) -> None:
    other = make_context("other-ctx")
    stranger = api_client_for(other, role=Role.ADMIN)
    # The fact's id under the other context's path: it does not exist there.
    there = f"/api/v1/contexts/{other.slug}/facts/{works['id']}"
    before = _written()
    assert_error(stranger.delete(there), 404, "fact_not_found")
    assert_error(stranger.post(f"{there}/correct", {"object": 1}, format="json"), 404)
    assert_error(stranger.patch(there, {"confidence": 0.5}, format="json"), 404)
    assert_error(stranger.post(f"{there}/restore", {}, format="json"), 404)
    assert _written() == before


def test_restore_brings_a_retracted_fact_back_and_undo_retracts_it_again(
    curator: APIClient, base: str, works: dict[str, Any]
) -> None:
    curator.delete(f"{base}/facts/{works['id']}")
    response = curator.post(f"{base}/facts/{works['id']}/restore", {}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["fact"]["status"] == "current" and body["conflict"] is None
    assert body["summary"].startswith(f"restored fact {works['id']}")

    assert _undo(curator, base, body["audit_event"]).status_code == 200
    assert _status(works["id"]) == "retracted"


def test_only_a_retracted_fact_is_restored(
    curator: APIClient, base: str, works: dict[str, Any]
) -> None:
    before = _written()
    response = curator.post(f"{base}/facts/{works['id']}/restore", {}, format="json")
    assert_error(response, 409, "fact_not_retracted")
    assert _written() == before


def test_restoring_beside_a_newer_single_value_is_contested_with_a_conflict(
    curator: APIClient, base: str, title: dict[str, Any]
) -> None:
    curator.delete(f"{base}/facts/{title['id']}")
    newer = _write(curator, base, subject=ALEX, predicate="current_title", value="Engineer")
    body = curator.post(f"{base}/facts/{title['id']}/restore", {}, format="json").json()
    assert body["fact"]["status"] == "contested"
    conflict = Conflict.objects.get(pk=body["conflict"])
    assert (conflict.current_fact_id, conflict.contested_fact_id) == (newer["id"], title["id"])
    assert f"fact {newer['id']} is already the current value" in body["summary"]

    assert _undo(curator, base, body["audit_event"]).status_code == 200
    assert _status(title["id"]) == "retracted"
    assert not Conflict.objects.filter(pk=conflict.pk).exists()


def test_correcting_a_single_value_supersedes_and_keeps_history(
    curator: APIClient, base: str, title: dict[str, Any]
) -> None:
    response = curator.post(
        f"{base}/facts/{title['id']}/correct",
        {"value": "Engineer", "reason": "typo"},
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["corrected"]["status"] == "superseded"
    assert body["fact"]["value"] == "Engineer" and body["fact"]["supersedes"] == title["id"]
    history = curator.get(
        f"{base}/facts",
        {"subject": title["subject"]["id"], "predicate": "current_title", "include_superseded": 1},
    ).json()["results"]
    assert [f["value"] for f in history] == ["Engineer", "Enginer"]

    assert _undo(curator, base, body["audit_event"]).status_code == 200
    assert _status(title["id"]) == "current"
    assert _status(body["fact"]["id"]) == "retracted"


def test_a_relation_is_corrected_by_an_entity_name(
    curator: APIClient, base: str, works: dict[str, Any]
) -> None:
    globex = _write(
        curator,
        base,
        subject={"name": "Globex", "type": "organisation"},
        predicate="located_in",
        object={"name": "Springfield", "type": "place"},
    )["subject"]
    body = curator.post(
        f"{base}/facts/{works['id']}/correct", {"object": "Globex"}, format="json"
    ).json()
    assert body["fact"]["object"]["id"] == globex["id"]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"value": "Globex"}, "missing_object"),  # a relation takes an object, not a value
        ({"object": "Alex"}, "wrong_entity_type"),  # works_at takes an organisation
        ({}, "invalid_correction"),
        ({"value": 1, "object": "Acme"}, "invalid_correction"),
        ({"object": True}, "invalid"),
        ({"object": "Nobody Known"}, "entity_not_found"),
    ],
)
def test_bad_corrections_are_refused_and_write_nothing(
    curator: APIClient, base: str, works: dict[str, Any], body: dict[str, Any], code: str
) -> None:
    before = _written()
    response = curator.post(f"{base}/facts/{works['id']}/correct", body, format="json")
    assert 400 <= response.status_code < 500, response.content
    assert response.json()["error"]["code"] == code, response.content
    assert _written() == before and _status(works["id"]) == "current"


def test_edit_changes_fields_and_undo_puts_them_back(
    curator: APIClient, base: str, works: dict[str, Any]
) -> None:
    edit = {
        "valid_from": "2024-01-01T00:00:00+02:00",
        "confidence": 0.6,
        "importance": 0.9,
        "reason": "from the contract",
    }
    response = curator.patch(f"{base}/facts/{works['id']}", edit, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["fact"]["confidence"] == 0.6 and body["fact"]["importance"] == 0.9
    assert body["fact"]["valid_from"].startswith("2023-12-31T22:00:00")
    assert "confidence 1.00 → 0.60" in body["summary"]

    assert _undo(curator, base, body["audit_event"]).status_code == 200
    fact = Fact.objects.get(pk=works["id"])
    assert (fact.confidence, fact.valid_from, fact.importance) == (1.0, None, works["importance"])


def test_edit_moves_a_relation_to_another_predicate_of_its_kind(
    curator: APIClient, base: str
) -> None:
    sam = {"name": "Sam", "type": "person", "scope": "org/acme"}
    knows = _write(curator, base, subject=ALEX, predicate="knows", object=sam)
    body = curator.patch(
        f"{base}/facts/{knows['id']}", {"predicate": "manages", "swap": True}, format="json"
    ).json()
    fact = body["fact"]
    assert (fact["predicate"], fact["subject"]["name"], fact["object"]["name"]) == (
        "manages",
        "Sam",
        "Alex",
    )
    assert "subject and object swapped" in body["summary"]


def test_an_edit_into_a_held_single_value_slot_says_so_and_records_the_conflict(
    curator: APIClient, base: str, title: dict[str, Any]
) -> None:
    role = _write(curator, base, subject=ALEX, predicate="current_role", value="Lead")
    body = curator.patch(
        f"{base}/facts/{role['id']}", {"predicate": "current_title"}, format="json"
    ).json()
    assert body["fact"]["status"] == "contested"
    assert f"fact {title['id']} is already the current value" in body["summary"]
    conflict = Conflict.objects.get(pk=body["conflict"])
    assert conflict.current_fact_id == title["id"]
    assert _status(title["id"]) == "current"

    assert _undo(curator, base, body["audit_event"]).status_code == 200
    fact = Fact.objects.get(pk=role["id"])
    assert (fact.predicate.name, fact.status) == ("current_role", "current")
    assert not Conflict.objects.filter(pk=conflict.pk).exists()


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"predicate": "current_title"}, "predicate_kind_mismatch"),  # attribute ≠ relation
        ({"predicate": "never_registered_thing"}, "unknown_predicate"),
        ({"predicate": "employs"}, "inverse_predicate"),
        ({"predicate": "manages"}, "wrong_entity_type"),  # manages takes a person object
        ({"valid_from": "2025-01-01T00:00:00Z", "valid_until": "2024-01-01T00:00:00Z"}, None),
        ({"confidence": 1.5}, None),
        ({"swap": "yes"}, None),
        ({"subject": 3}, None),
    ],
)
def test_bad_edits_are_refused_and_write_nothing(
    curator: APIClient,
    base: str,
    works: dict[str, Any],
    body: dict[str, Any],
    code: str | None,
) -> None:
    before = _written()
    response = curator.patch(f"{base}/facts/{works['id']}", body, format="json")
    assert_error(response, 400, code)
    assert _written() == before
    assert Fact.objects.get(pk=works["id"]).predicate.name == "works_at"


def test_swapping_an_attribute_is_refused(
    curator: APIClient, base: str, title: dict[str, Any]
) -> None:
    response = curator.patch(f"{base}/facts/{title['id']}", {"swap": True}, format="json")
    assert_error(response, 400, "not_a_relation")


def test_curation_needs_the_curator_role(
    context: Context,
    api_client_for: Callable[..., APIClient],
    base: str,
    works: dict[str, Any],
    api: APIClient,
) -> None:
    viewer = api_client_for(context, role=Role.VIEWER)
    api.delete(f"{base}/facts/{works['id']}")
    before = _written()
    url = f"{base}/facts/{works['id']}"
    assert_error(viewer.post(f"{url}/restore", {}, format="json"), 403, "role_required")
    assert_error(viewer.patch(url, {"confidence": 0.5}, format="json"), 403, "role_required")
    other = _write(api, base, subject=ALEX, predicate="current_title", value="CTO")
    response = viewer.post(f"{base}/facts/{other['id']}/correct", {"value": "x"}, format="json")
    assert_error(response, 403, "role_required")
    assert _written()[1:] == before[1:]


def test_retract_needs_a_write_grant_on_every_fact(
    context: Context,
    api_client_for: Callable[..., APIClient],
    api: APIClient,
    base: str,
    works: dict[str, Any],
) -> None:
    secret = _write(
        api, base, subject=ALEX, predicate="current_title", value="Spy", scope="org/secret"
    )
    writer = api_client_for(context, role=Role.CURATOR, grants=["read,write:org/acme/*"])
    reader = api_client_for(context, role=Role.CURATOR, grants=["read:*"])
    before = _written()
    ids = [works["id"], secret["id"]]
    # Outside its read grants the fact does not exist for the writer: 404, nothing done.
    assert_error(writer.post(f"{base}/facts/retract", {"ids": ids}, format="json"), 404)
    assert_error(reader.delete(f"{base}/facts/{works['id']}"), 403, "scope_forbidden")
    assert _written() == before and _status(works["id"]) == "current"


# --- conversations -----------------------------------------------------------------------


def _remember(api: APIClient, base: str, text: str, thread: str, **fields: Any) -> Any:
    body = {
        "text": text,
        "scope": "org/acme",
        "infer": "triples",
        "thread": thread,
        "wait": True,
        **fields,
    }
    response = api.post(f"{base}/memories", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_threads_list_and_a_thread_with_its_turns_and_facts(api: APIClient, base: str) -> None:
    triples = {
        "entities": [{"name": "Sam", "type": "person"}, {"name": "Acme", "type": "organisation"}],
        "relations": [{"subject": "Sam", "predicate": "works_at", "object": "Acme"}],
    }
    _remember(api, base, "Sam joined Acme.", "conv-1", speaker="Sam",
              said_at="2024-05-01T10:00:00Z", triples=triples)  # fmt: skip
    _remember(api, base, "Nice!", "conv-1", speaker="Kim", said_at="2024-05-01T10:01:00Z",
              triples={"entities": [{"name": "Kim", "type": "person"}]})  # fmt: skip
    threads = api.get(f"{base}/threads").json()
    [conv] = threads["results"]
    assert conv["thread"] == "conv-1" and conv["speakers"] == ["Kim", "Sam"]
    assert (conv["turns"], conv["facts"]) == (2, 1)
    assert threads["next_offset"] is None

    detail = api.get(f"{base}/threads/conv-1").json()
    assert [t["speaker"] for t in detail["turns"]] == ["Sam", "Kim"]
    [fact] = detail["turns"][0]["facts"]
    assert (fact["predicate"], fact["object"]["name"]) == ("works_at", "Acme")
    assert detail["turns"][1]["facts"] == []

    assert_error(api.get(f"{base}/threads/no-such-thread"), 404, "thread_not_found")
    assert_error(api.get(f"{base}/threads/conv-1", {"after": "x"}), 400)


def test_a_thread_without_a_speaker_is_listed(api: APIClient, base: str) -> None:
    """``speaker`` is optional: a thread whose turns name none is listed with no speakers
    and does not break the list for the other threads."""
    _remember(api, base, "Nobody said who.", "quiet",
              triples={"entities": [{"name": "Kim", "type": "person"}]})  # fmt: skip
    _remember(api, base, "Sam here.", "loud", speaker="Sam",
              triples={"entities": [{"name": "Sam", "type": "person"}]})  # fmt: skip
    threads = api.get(f"{base}/threads")
    assert threads.status_code == 200, threads.content
    by_thread = {t["thread"]: t["speakers"] for t in threads.json()["results"]}
    assert by_thread == {"quiet": [], "loud": ["Sam"]}
    assert api.get(f"{base}/threads/quiet").status_code == 200


def test_the_new_endpoints_are_in_the_openapi_schema(openapi: dict[str, Any]) -> None:
    paths = openapi["paths"]
    prefix = "/api/v1/contexts/{ctx}"
    assert "post" in paths[f"{prefix}/facts/{{fact_id}}/correct"]
    assert "post" in paths[f"{prefix}/facts/{{fact_id}}/restore"]
    assert "patch" in paths[f"{prefix}/facts/{{fact_id}}"]
    assert "post" in paths[f"{prefix}/facts/retract"]
    assert "get" in paths[f"{prefix}/threads"]
    assert "get" in paths[f"{prefix}/threads/{{thread}}"]


def test_a_kind_mismatch_reads_as_english(
    curator: APIClient, base: str, works: dict[str, Any]
) -> None:
    response = curator.patch(
        f"{base}/facts/{works['id']}", {"predicate": "current_title"}, format="json"
    )

    message = response.json()["error"]["message"]
    assert "current_title is an attribute predicate and works_at a relation one" in message
