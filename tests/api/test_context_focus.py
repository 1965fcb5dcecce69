"""POST context keeps to the entity a question names: its facts, others' only where they
answer through it, and one line when nothing trusted is known about it — never what a
pending fact claims."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from memory.models import Context, Role

# Fifteen people and their employers, none of them Bob's.
EMPLOYERS = {
    "Alex Rivera": "Acme Corp",
    "Dana Lee": "Acme Corp",
    "Maria Chen": "Globex Corporation",
    "Priya Patel": "Globex Corporation",
    "Hannah Ortiz": "Initech",
    "Omar Haddad": "Initech",
    "Lena Fischer": "Umbrella Labs",
    "Kenji Sato": "Umbrella Labs",
    "Sofia Rossi": "Hooli",
    "Tomás Silva": "Hooli",
    "Grace Kim": "Stark Industries",
    "Ivan Petrov": "Stark Industries",
    "Nora Jensen": "Wayne Enterprises",
    "Ravi Kumar": "Wayne Enterprises",
    "Chloe Martin": "Soylent",
}
EVILCORP_STAFF = ["Eve Santos", "Mallory Quinn", "Trent Walker"]
PLACES = {"Lisbon", "Porto"}
PROJECTS = {"Beacon", "Fjord", "Hammock"}


def _entity(name: str) -> dict[str, str]:
    """An entity as an extraction writes it: with its type."""
    if name in PLACES:
        return {"name": name, "type": "location"}
    if name in PROJECTS:
        return {"name": name, "type": "project"}
    if name == "Airflow":
        return {"name": name, "type": "product"}
    if name in set(EMPLOYERS.values()) | {"EvilCorp"}:
        return {"name": name, "type": "organisation"}
    return {"name": name, "type": "person"}


@pytest.fixture
def untrusted(context: Context, api_client_for: Callable[..., APIClient]) -> APIClient:
    """An agent behind an untrusted token: what it writes waits for review."""
    return api_client_for(context, role=Role.ADMIN, trust="untrusted")


def _write(client: APIClient, base: str, subject: str, predicate: str, **end: Any) -> int:
    body: dict[str, Any] = {
        "subject": _entity(subject),
        "predicate": predicate,
        "scope": "org/acme",
        **end,
    }
    response = client.post(f"{base}/facts", body, format="json")
    assert response.status_code in (200, 201), response.content
    fact_id: int = response.json()["fact"]["id"]
    return fact_id


def _relation(client: APIClient, base: str, subject: str, predicate: str, obj: str) -> int:
    return _write(client, base, subject, predicate, object=_entity(obj))


def _context(api: APIClient, base: str, **payload: Any) -> dict[str, Any]:
    response = api.post(f"{base}/context", payload, format="json")
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()
    return body


def _statements(body: dict[str, Any]) -> list[str]:
    return [f["line"].split(" [fact")[0].removeprefix("- ") for f in body["facts"]]


@pytest.fixture
def employers(api: APIClient, base: str) -> None:
    for person, employer in EMPLOYERS.items():
        _relation(api, base, person, "works_at", employer)


@pytest.fixture
def bob_pending(untrusted: APIClient, base: str, employers: None) -> int:
    """Bob's only fact, by an untrusted writer: it waits for review."""
    return _relation(untrusted, base, "Bob", "works_at", "EvilCorp")


def test_nothing_trusted_about_bob_is_said_in_one_line_without_others_employers(
    api: APIClient, base: str, bob_pending: int
) -> None:
    body = _context(api, base, query="Where does Bob work?")
    assert [e["name"] for e in body["entities"]] == ["Bob"]
    assert body["facts"] == [] and body["unconfirmed"] == []
    assert body["nothing_trusted"] == [
        {"id": body["entities"][0]["id"], "name": "Bob", "awaiting_review": 1}
    ]
    lines = body["text"].splitlines()
    assert lines[1] == "Nothing trusted is known about Bob yet (1 fact awaits review)."
    # None of the fifteen employers pads the block, and the pending claim is not told.
    assert not any(employer in body["text"] for employer in EMPLOYERS.values())
    assert "EvilCorp" not in str(body)
    assert f"fact {bob_pending}" not in str(body)
    assert "Nothing in memory matches." not in body["text"]
    assert any(note.endswith("left out: about others than Bob") for note in body["notes"])


def test_asked_with_its_pending_facts_bob_s_claim_stays_unconfirmed(
    api: APIClient, base: str, bob_pending: int
) -> None:
    body = _context(api, base, query="Where does Bob work?", include_pending=True)
    assert [f["id"] for f in body["unconfirmed"]] == [bob_pending]
    assert body["facts"] == []
    assert "Nothing trusted is known about Bob yet (1 fact awaits review)." in body["text"]
    assert not any(employer in body["text"] for employer in EMPLOYERS.values())


def test_bob_alone_as_the_entity_says_nothing_trusted_is_known(
    api: APIClient, base: str, bob_pending: int
) -> None:
    body = _context(api, base, entity="Bob")
    assert body["facts"] == []
    assert body["nothing_trusted"][0]["awaiting_review"] == 1
    assert "Nothing trusted is known about Bob yet (1 fact awaits review)." in body["text"]
    assert "EvilCorp" not in str(body)


def test_once_bob_s_claim_is_accepted_it_answers(
    api: APIClient, base: str, bob_pending: int
) -> None:
    reviewed = api.post(f"{base}/facts/{bob_pending}/review", {"action": "accept"}, format="json")
    assert reviewed.status_code == 200, reviewed.content
    body = _context(api, base, query="Where does Bob work?")
    assert _statements(body) == ["Bob works_at EvilCorp"]
    assert body["nothing_trusted"] == []
    assert "Nothing trusted is known" not in body["text"]


def test_the_count_awaiting_review_is_only_what_the_caller_may_read(
    context: Context,
    api_client_for: Callable[..., APIClient],
    untrusted: APIClient,
    base: str,
    bob_pending: int,
) -> None:
    secret = {
        "subject": {**_entity("Bob"), "scope": "org/acme"},
        "predicate": "plans",
        "value": "a merger",
    }
    response = untrusted.post(f"{base}/facts", {**secret, "scope": "org/secret"}, format="json")
    assert response.status_code == 201, response.content
    viewer = api_client_for(context, role=Role.VIEWER, grants=["read:org/acme"])
    body = _context(viewer, base, query="Where does Bob work?")
    assert body["nothing_trusted"][0]["awaiting_review"] == 1
    body = _context(untrusted, base, query="Where does Bob work?")
    assert "Nothing trusted is known about Bob yet (2 facts await review)." in body["text"]


def test_a_friend_s_employer_does_not_answer_where_bob_works(
    api: APIClient, base: str, employers: None
) -> None:
    knows = _relation(api, base, "Bob", "knows", "Hannah Ortiz")
    body = _context(api, base, query="Where does Bob work?")
    assert [f["id"] for f in body["facts"]] == [knows]
    assert body["nothing_trusted"] == []
    assert "Initech" not in body["text"]


def test_a_neighbour_reached_through_the_asked_relation_still_answers(
    api: APIClient, base: str
) -> None:
    _relation(api, base, "Dana Lee", "reports_to", "Maria Chen")
    _relation(api, base, "Dana Lee", "knows", "Omar Haddad")
    _relation(api, base, "Maria Chen", "lives_in", "Lisbon")
    _relation(api, base, "Omar Haddad", "lives_in", "Porto")
    body = _context(api, base, query="Where does Dana Lee's manager live?")
    statements = _statements(body)
    assert "Maria Chen lives_in Lisbon" in statements[:2], statements
    assert "Omar Haddad lives_in Porto" not in statements


def test_the_others_in_the_same_town_do_not_answer_where_one_lives(
    api: APIClient, base: str
) -> None:
    lives = _relation(api, base, "Omar Haddad", "lives_in", "Porto")
    for neighbour in ("Kenji Sato", "Sofia Rossi", "Ivan Petrov"):
        _relation(api, base, neighbour, "lives_in", "Porto")
    body = _context(api, base, query="Where does Omar Haddad live?")
    assert [f["id"] for f in body["facts"]] == [lives]


def test_what_else_depends_on_the_same_thing_does_not_answer_a_value_question(
    api: APIClient, base: str
) -> None:
    """ "What does Beacon depend on?" asks for no kind of entity: the other projects that
    depend on Airflow stand to it as Beacon does, and say nothing about Beacon."""
    depends = _relation(api, base, "Beacon", "depends_on", "Airflow")
    for other in ("Fjord", "Hammock"):
        _relation(api, base, other, "depends_on", "Airflow")
    body = _context(api, base, query="What does Beacon depend on?")
    assert [f["id"] for f in body["facts"]] == [depends]


def test_who_are_colleagues_reaches_them_through_the_employer(
    api: APIClient, base: str, employers: None
) -> None:
    """Through the employer both share, the others who work there give people, as the
    question asks; other companies' staff stay out."""
    body = _context(api, base, query="Who are Dana Lee's colleagues?")
    statements = _statements(body)
    assert "Alex Rivera works_at Acme Corp" in statements, statements
    assert not any("Globex" in s or "Initech" in s for s in statements), statements


@pytest.fixture
def evilcorp(api: APIClient, base: str, employers: None) -> dict[str, int]:
    staff = {name: _relation(api, base, name, "works_at", "EvilCorp") for name in EVILCORP_STAFF}
    knows = _relation(api, base, "Alex Rivera", "knows", "Dana Lee")
    note = _write(api, base, "Dana Lee", "notes", value="met the EvilCorp CFO at a fair")
    return {**staff, "knows": knows, "note": note}


def test_what_we_know_about_evilcorp_is_its_facts_not_a_shared_word(
    api: APIClient, base: str, evilcorp: dict[str, int]
) -> None:
    body = _context(api, base, query="What do we know about EvilCorp?")
    assert [e["name"] for e in body["entities"]] == ["EvilCorp"]
    ids = {f["id"] for f in body["facts"]}
    assert ids == {evilcorp[name] for name in EVILCORP_STAFF} | {evilcorp["note"]}
    assert "Alex Rivera knows Dana Lee" not in body["text"]
    assert body["nothing_trusted"] == []


def test_who_works_at_evilcorp_lists_its_employees_only(
    api: APIClient, base: str, evilcorp: dict[str, int]
) -> None:
    body = _context(api, base, query="Who works at EvilCorp?")
    assert set(_statements(body)[:3]) == {f"{name} works_at EvilCorp" for name in EVILCORP_STAFF}
    assert not any(employer in body["text"] for employer in EMPLOYERS.values())


def test_a_question_naming_no_entity_keeps_the_facts_that_share_its_words(
    api: APIClient, base: str, evilcorp: dict[str, int]
) -> None:
    body = _context(api, base, query="Which people work at which companies?")
    assert body["entities"] == [] and body["nothing_trusted"] == []
    assert len([s for s in _statements(body) if " works_at " in s]) >= 10
