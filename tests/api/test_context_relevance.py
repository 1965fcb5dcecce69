"""POST context answers the question: on the demo memory, the fact that answers comes
first, a fact written a moment ago is found, unrelated passages stay out, and search with
no target finds what an agent remembered."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from memory.domain.access import ContextAccess
from memory.management.commands.demo import demo_load
from memory.models import Context, Role
from memory.services.ingest.documents import document_create, document_embed_now


@pytest.fixture
def demo(access: ContextAccess, api: APIClient, base: str) -> dict[str, Any]:
    """The demo memory, as an agent found it: plus who leads Phoenix, written through the
    API, and two passages that have nothing to do with anyone."""
    demo_load(access=access)
    written = api.post(
        f"{base}/facts",
        {
            "subject": {"name": "Dana Lee", "type": "person", "scope": "org/acme/user/alex"},
            "predicate": "leads",
            "object": {"name": "Project Phoenix", "type": "project", "scope": "org/acme"},
            "scope": "org/acme",
        },
        format="json",
    )
    assert written.status_code == 201, written.content
    for title, text in [("x", "x"), ("notes", "hostile")]:
        document = document_create(
            access=access, title=title, text=text, scope="org/acme", embed_later=True
        )
        document_embed_now(document=document)
    return {"leads": written.json()["fact"]["id"]}


def _context(api: APIClient, base: str, **payload: Any) -> dict[str, Any]:
    response = api.post(f"{base}/context", payload, format="json")
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()
    return body


def _statements(body: dict[str, Any]) -> list[str]:
    return [f["line"].split(" [fact")[0].removeprefix("- ") for f in body["facts"]]


def test_who_leads_project_phoenix_answers_first_at_300_tokens(
    api: APIClient, base: str, demo: dict[str, Any]
) -> None:
    body = _context(api, base, query="Who leads Project Phoenix?", budget_tokens=300)
    assert body["facts"][0]["id"] == demo["leads"]
    assert _statements(body)[0] == "Dana Lee leads Project Phoenix"
    assert "Dana Lee leads Project Phoenix [fact" in body["text"]
    assert body["entities"][0]["name"] == "Project Phoenix"
    assert body["used_tokens"] <= 300
    # No padding: the passages "x" and "hostile" share nothing with the question.
    assert all(p["text"] not in {"x", "hostile"} for p in body["passages"])
    assert body["left_out"] > 0
    assert any("share nothing with the question" in note for note in body["notes"])


def test_a_fact_written_a_moment_ago_answers_who_mentors_dana_lee(
    api: APIClient, base: str, demo: dict[str, Any]
) -> None:
    written = api.post(
        f"{base}/facts",
        {
            "subject": {"name": "Priya Patel"},
            "predicate": "mentors",
            "object": {"name": "Dana Lee", "scope": "org/acme/user/alex"},
            "scope": "org/acme",
        },
        format="json",
    )
    assert written.status_code == 201, written.content
    body = _context(api, base, query="Who mentors Dana Lee?", budget_tokens=300)
    assert _statements(body)[0] == "Priya Patel mentors Dana Lee"
    # Small slips, case and possessives in the name still find it.
    for query in ("who mentors dana leee?", "Who is Dnaa Lee's mentor?"):
        body = _context(api, base, query=query, budget_tokens=300)
        assert body["entities"][0]["name"] == "Dana Lee", query
        assert "Priya Patel mentors Dana Lee" in _statements(body)[:3], query


@pytest.mark.parametrize(
    ("query", "answer"),
    [
        ("Which company does Alex Rivera work for?", "Alex Rivera works_at Acme Corp"),
        ("Who does Alex report to?", "Alex Rivera reports_to Maria Chen"),
        ("Who manages alex@acme.example?", "Maria Chen manages Alex Rivera"),
        ("Where is Acme located?", "Acme Corp is_located_in Berlin"),
        ("What is Maria Chen's title?", "Maria Chen current_title: Director of Engineering"),
        ("What does Project Phoenix depend on?", "Project Phoenix depends_on Kubernetes"),
        # Everyday words for a relation that no predicate is named or described with.
        ("Who is Hannah Ortiz's employer?", "Hannah Ortiz works_at Globex Corporation"),
        ("What is Alex's job?", "Alex Rivera current_title: Staff Engineer"),
        (
            "Where is Globex Corporation headquartered?",
            "Globex Corporation located_in Cypress Creek",
        ),
    ],
)
def test_the_answering_fact_comes_first(
    api: APIClient, base: str, demo: dict[str, Any], query: str, answer: str
) -> None:
    body = _context(api, base, query=query, budget_tokens=300)
    assert _statements(body)[0] == answer, _statements(body)


def test_a_boss_is_the_line_manager_read_either_way(
    api: APIClient, base: str, demo: dict[str, Any]
) -> None:
    body = _context(api, base, query="Who is Alex's boss?", budget_tokens=300)
    assert set(_statements(body)[:2]) == {
        "Alex Rivera reports_to Maria Chen",
        "Maria Chen manages Alex Rivera",
    }, _statements(body)


def test_explain_says_why_each_line_is_there(
    api: APIClient, base: str, demo: dict[str, Any]
) -> None:
    plain = _context(api, base, query="Who leads Project Phoenix?")
    assert all("explain" not in f for f in plain["facts"] + plain["passages"])
    body = _context(api, base, query="Who leads Project Phoenix?", explain=True)
    first = body["facts"][0]["explain"]
    assert first["names"] == ["Project Phoenix"]
    assert first["predicate"] == {"words": ["lead"], "via": "name", "score": 1.0}
    assert first["answer"] == {"asked": "person", "given": "person", "fits": True}
    assert "names Project Phoenix" in first["why"]
    assert round(body["facts"][0]["score"], 4) == first["relevance"]
    scores = [f["score"] for f in body["facts"]]
    assert scores == sorted(scores, reverse=True)
    assert all("why" in p["explain"] for p in body["passages"])


def test_an_entity_alone_keeps_the_ranking_formula(
    api: APIClient, base: str, demo: dict[str, Any]
) -> None:
    body = _context(api, base, entity="Alex Rivera", explain=True)
    priors = [f["explain"]["prior"] for f in body["facts"]]
    assert priors == sorted(priors, reverse=True)
    assert body["entities"][0]["name"] == "Alex Rivera"


def test_linking_sees_only_what_the_grants_allow(
    context: Context,
    api_client_for: Callable[..., APIClient],
    base: str,
    demo: dict[str, Any],
) -> None:
    """Dana Lee lives in Alex's private scope: a token without it links no Dana and
    sees none of that scope's facts."""
    client = api_client_for(context, role=Role.VIEWER, grants=["read:org/acme"])
    body = _context(client, base, query="Who does Dana Lee track?")
    assert body["entities"] == []
    assert "Marathon" not in body["text"]
    assert all(f["scope"] == "org/acme" for f in body["facts"])


def test_search_with_no_target_finds_turns_chunks_and_facts(
    api: APIClient, base: str, access: ContextAccess, demo: dict[str, Any]
) -> None:
    remembered = api.post(
        f"{base}/memories",
        {"text": "Dana Lee prefers async standups.", "scope": "org/acme", "infer": "none"},
        format="json",
    )
    assert remembered.status_code in (201, 202), remembered.content
    document = document_create(
        access=access,
        title="Standups",
        text="Async standups replaced the daily call at Acme.",
        scope="org/acme",
        embed_later=True,
    )
    document_embed_now(document=document)
    response = api.post(f"{base}/search", {"query": "Dana Lee standups"}, format="json")
    assert response.status_code == 200, response.content
    results = response.json()["results"]
    types = [r["type"] for r in results]
    turns = [r for r in results[:3] if r["type"] == "turn"]
    assert turns and "Dana Lee prefers async standups." in turns[0]["text"]
    assert {"turn", "chunk", "fact"} <= set(types)  # each result typed
    scores = [r["score"] for r in results]
    assert scores == sorted(scores, reverse=True)
    chunks = api.post(
        f"{base}/search", {"query": "hostile", "target": "chunks"}, format="json"
    ).json()
    assert {r["type"] for r in chunks["results"]} == {"chunk"}
