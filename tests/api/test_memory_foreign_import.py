"""mem0 and Graphiti exports read into a context (``POST import?format=``, the command)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from memory.domain.access import system_access
from memory.kernel.errors import ValidationFailed
from memory.models import Context, Entity, Fact, FactStatus, ImportJob, Turn
from memory.services.transfer.importer import memory_import
from memory.services.transfer.peers import foreign_lines

pytestmark = pytest.mark.django_db

MEM0 = {
    "results": [
        {
            "id": "m-1",
            "memory": "Dev works at TechCorp as a senior engineer",
            "user_id": "dev",
            "metadata": {"type": "professional"},
            "categories": ["work"],
            "created_at": "2025-01-02T10:00:00+00:00",
            "updated_at": "2025-02-01T10:00:00+00:00",
        },
        {
            "id": "m-2",
            "memory": "Prefers morning meetings",
            "user_id": "dev",
            "run_id": "session-7",
            "created_at": "2025-01-03T10:00:00+00:00",
            "updated_at": "2025-01-03T10:00:00+00:00",
        },
        {"id": "m-3", "memory": "Answers in French", "agent_id": "helper bot"},
    ]
}

GRAPHITI = {
    "nodes": [
        {"uuid": "n-alice", "name": "Alice", "group_id": "g1", "labels": ["Entity", "Person"],
         "summary": "An engineer", "attributes": {"city": "Paris"},
         "created_at": "2025-01-01T00:00:00+00:00"},
        {"uuid": "n-acme", "name": "Acme Corp", "group_id": "g1",
         "labels": ["Entity", "Organization"], "created_at": "2025-01-01T00:00:00+00:00"},
    ],
    "episodes": [
        {"uuid": "e-1", "name": "chat", "group_id": "g1", "source": "message",
         "content": "alice: I joined Acme in 2020, left in 2024",
         "valid_at": "2024-06-01T00:00:00+00:00"},
    ],
    "edges": [
        {"uuid": "r-1", "group_id": "g1", "source_node_uuid": "n-alice",
         "target_node_uuid": "n-acme", "name": "WORKS_AT",
         "fact": "Alice works at Acme", "episodes": ["e-1"],
         "created_at": "2024-06-01T00:00:00+00:00", "valid_at": "2020-03-01T00:00:00+00:00",
         "invalid_at": "2024-05-01T00:00:00+00:00", "expired_at": "2024-06-01T00:00:00+00:00"},
    ],
}  # fmt: skip


def test_mem0_memories_become_owners_turns_and_narrative_facts(
    make_context: Callable[..., Context], api_client_for: Callable[..., APIClient]
) -> None:
    context = make_context("from-mem0")
    api = api_client_for(context)
    response = api.post(
        "/api/v1/contexts/from-mem0/import?format=mem0",
        json.dumps(MEM0),
        content_type="application/json",
    )
    assert response.status_code == 202, response.content
    from memory.services.transfer.jobs import import_job_execute

    job_id = response.json()["id"]
    status = import_job_execute(job_id=job_id)
    assert status == "succeeded", ImportJob.objects.get(pk=job_id).error
    dev = Entity.objects.get(context=context, name="dev")
    bot = Entity.objects.get(context=context, name="helper bot")
    assert (dev.type, dev.scope, bot.type) == ("person", "mem0/dev", "agent")
    assert dev.identifiers.get().kind == "mem0_user"
    facts = Fact.objects.filter(context=context).order_by("recorded_at")
    assert [f.value_text for f in facts if f.subject_id == dev.pk] == [
        "Dev works at TechCorp as a senior engineer",
        "Prefers morning meetings",
    ]
    first = facts.filter(source_ref="m-1").get()
    assert first.kind == "narrative" and first.predicate.name == "mem0_memory"
    assert first.recorded_at.isoformat() == "2025-01-02T10:00:00+00:00"
    assert first.last_seen_at.isoformat() == "2025-02-01T10:00:00+00:00"
    assert first.turn is not None and first.turn.text == first.value_text
    assert Turn.objects.get(context=context, ref="m-2").thread == "session-7"


def test_graphiti_nodes_edges_and_episodes(
    make_context: Callable[..., Context], tmp_path: Path
) -> None:
    path = tmp_path / "graphiti.json"
    path.write_text(json.dumps(GRAPHITI))
    call_command("import_memory", str(path), "--context", "from-graphiti", "--create",
                 "--format", "graphiti")  # fmt: skip
    context = Context.objects.get(slug="from-graphiti")
    alice = Entity.objects.get(context=context, name="Alice")
    acme = Entity.objects.get(context=context, name="Acme Corp")
    assert (alice.type, acme.type, alice.scope) == ("person", "organisation", "graphiti/g1")
    assert alice.attributes == {"city": "Paris", "summary": "An engineer"}
    fact = Fact.objects.get(context=context)
    assert (fact.subject_id, fact.object_id, fact.predicate.name) == (alice.pk, acme.pk, "works_at")
    assert fact.status == FactStatus.EXPIRED
    assert fact.valid_from.isoformat() == "2020-03-01T00:00:00+00:00"
    assert fact.valid_until.isoformat() == "2024-05-01T00:00:00+00:00"
    assert fact.turn is not None and fact.turn.ref == "e-1"
    assert fact.turn.said_at.isoformat() == "2024-06-01T00:00:00+00:00"


@pytest.mark.parametrize(
    ("format", "content", "message"),
    [
        ("mem0", "[1]", "not an object"),
        ("mem0", '[{"memory": "x"}]', "no user_id, agent_id or run_id"),
        ("mem0", '{"results": []} {"results": [1', "not JSON at line 1, column"),
        ("mem0", '[{"id": "a", "user_id": "u", "memory": "x"}, {"id": "a", "user_id": "v",'
                 ' "memory": "x"}]', "another user_id"),
        ("mem0", '[{"user_id": "a", "memory": ""}]', "non-empty"),
        ("mem0", '{"results": 5}', "list of memories"),
        ("graphiti", "[]", "an object"),
        ("graphiti", '{"nodes": {}}', "must be a list"),
        ("graphiti", '{"edges": [{"uuid": "x", "name": "knows", "source_node_uuid": "a",'
                     ' "target_node_uuid": "b"}]}', "does not hold"),
        ("graphiti", "not json", "not one JSON document"),
        ("graphiti", "[" * 100_000, "not one JSON document"),
        ("mem0", "[" * 100_000, "nests JSON too deeply"),
    ],
)  # fmt: skip
def test_bad_foreign_files_write_nothing(
    make_context: Callable[..., Context], format: str, content: str, message: str
) -> None:
    context = make_context("bad-foreign")
    with pytest.raises(ValidationFailed, match=message):
        memory_import(access=system_access(context), lines=foreign_lines(content, format))
    assert not Entity.objects.filter(context=context).exists()


# --- fixtures made by the real libraries (tests/fixtures/peers/peer_fixtures.py) ----------

PEERS = Path(__file__).resolve().parents[1] / "fixtures" / "peers"


def _mem0_calls() -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = json.loads((PEERS / "mem0_get_all.json").read_text())["calls"]
    return calls


def _mem0_memories() -> dict[str, dict[str, Any]]:
    """Each memory of the answers once, by id."""
    return {m["id"]: m for call in _mem0_calls() for m in call["answer"]["results"]}


def _mem0_memory(text_start: str) -> dict[str, Any]:
    return next(m for m in _mem0_memories().values() if m["memory"].startswith(text_start))


def _combined(how: str) -> str:
    """The answers of mem0's get_all, one per owner, put together in one file."""
    answers = [call["answer"] for call in _mem0_calls()]
    memories = [m for answer in answers for m in answer["results"]]
    if how == "results concatenated":
        return json.dumps({"results": memories})
    if how == "list of memories":
        return json.dumps(memories)
    if how == "list of answers":
        return json.dumps(answers)
    if how == "answers one a line":
        return "\n".join(json.dumps(answer) for answer in answers)
    if how == "answers end to end":
        return "".join(json.dumps(answer, indent=2) for answer in answers)
    assert how == "memories one a line"
    return "\n".join(json.dumps(m) for m in memories)


def _import_api(api: APIClient, slug: str, body: str, format: str) -> ImportJob:
    from memory.services.transfer.jobs import import_job_execute

    response = api.post(
        f"/api/v1/contexts/{slug}/import?format={format}", body, content_type="application/json"
    )
    assert response.status_code == 202, response.content
    import_job_execute(job_id=response.json()["id"])
    job = api.get(f"/api/v1/contexts/{slug}/import/{response.json()['id']}")
    assert job.status_code == 200
    return ImportJob.objects.get(pk=response.json()["id"])


@pytest.mark.parametrize(
    "how",
    [
        "results concatenated",
        "list of memories",
        "list of answers",
        "answers one a line",
        "answers end to end",
        "memories one a line",
    ],
)
def test_mem0_answers_of_every_owner_import_each_memory_once(
    make_context: Callable[..., Context], api_client_for: Callable[..., APIClient], how: str
) -> None:
    context = make_context("mem0-owners")
    api = api_client_for(context)
    job = _import_api(api, "mem0-owners", _combined(how), "mem0")
    assert job.status == "succeeded", job.error
    memories = _mem0_memories()
    repeated = sum(len(c["answer"]["results"]) for c in _mem0_calls()) - len(memories)
    assert repeated == 3  # the shared memories are in several owners' answers

    # One turn a memory, holding its text exactly as written.
    turns = {t.ref: t for t in Turn.objects.filter(context=context)}
    assert sorted(turns) == sorted(memories)
    for memory_id, memory in memories.items():
        assert turns[memory_id].text == memory["memory"]

    # One fact for each owner of a memory, in the owner's scope, from the memory's turn.
    owners = {
        (e.identifiers.get().kind, e.name): e
        for e in Entity.objects.filter(context=context).prefetch_related("identifiers")
    }
    assert {(kind, name, e.type, e.scope) for (kind, name), e in owners.items()} == {
        ("mem0_user", "alice", "person", "mem0/alice"),
        ("mem0_user", "bob", "person", "mem0/bob"),
        ("mem0_agent", "support-bot", "agent", "mem0/support-bot"),
        ("mem0_run", "standup-0412", "event", "mem0/standup-0412"),
    }
    for memory_id, memory in memories.items():
        expected = {("mem0_user", memory["user_id"])} if memory.get("user_id") else set()
        if memory.get("agent_id"):
            expected.add(("mem0_agent", memory["agent_id"]))
        if not expected:
            expected.add(("mem0_run", memory["run_id"]))
        facts = Fact.objects.filter(context=context, source_ref=memory_id)
        assert {f.subject_id for f in facts} == {owners[o].pk for o in expected}
        for fact in facts:
            assert fact.value_text == memory["memory"] and fact.value == memory["memory"]
            assert fact.turn_id == turns[memory_id].pk
            assert fact.scope == fact.subject.scope
            assert fact.status == FactStatus.CURRENT
            assert fact.recorded_at.isoformat() == memory["created_at"]


def test_mem0_text_speaker_and_shared_memories_read_through_the_api(
    make_context: Callable[..., Context], api_client_for: Callable[..., APIClient]
) -> None:
    context = make_context("mem0-reads")
    api = api_client_for(context)
    job = _import_api(api, "mem0-reads", _combined("results concatenated"), "mem0")
    assert job.status == "succeeded", job.error

    # Line breaks, doubled spaces and tabs stay, in the fact and in its turn.
    packing = _mem0_memory("Packing list")
    assert packing["memory"] == (
        "Packing list for Lisbon:\n- passport\n- plug adapter (type F)\n- sunscreen"
    )
    facts = api.get("/api/v1/contexts/mem0-reads/facts?subject=alice").json()["results"]
    by_text = {f["value"]: f for f in facts}
    assert packing["memory"] in by_text
    assert "Prefers  window seats\ton long flights" in by_text

    # A memory of bob and support-bot in ticket-42: one turn (said by the user) with
    # a fact of each owner; each owner's facts hold it.
    refund = _mem0_memory("Bob asked for a refund")
    assert (refund["user_id"], refund["agent_id"], refund["run_id"]) == (
        "bob", "support-bot", "ticket-42",
    )  # fmt: skip
    thread = api.get("/api/v1/contexts/mem0-reads/threads/ticket-42").json()
    [turn] = thread["turns"]
    assert (turn["text"], turn["speaker"], turn["ref"]) == (refund["memory"], "user", refund["id"])
    assert sorted(f["subject"]["name"] for f in turn["facts"]) == ["bob", "support-bot"]
    for owner in ("bob", "support-bot"):
        facts = api.get(f"/api/v1/contexts/mem0-reads/facts?subject={owner}").json()["results"]
        assert refund["memory"] in {f["value"] for f in facts}

    # The agent's grant alone sees every memory the agent's own answer listed.
    agent_api = api_client_for(context, grants=["read:mem0/support-bot"])
    seen = agent_api.get("/api/v1/contexts/mem0-reads/facts").json()["results"]
    [agent_call] = [c for c in _mem0_calls() if c["filters"] == {"agent_id": "support-bot"}]
    assert sorted(f["value"] for f in seen) == sorted(
        m["memory"] for m in agent_call["answer"]["results"]
    )

    # Speakers: the message's name (actor_id), else its role.
    speakers = {t.ref: t.speaker for t in Turn.objects.filter(context=context)}
    assert speakers[_mem0_memory("I am vegetarian")["id"]] == "Alice"
    assert speakers[_mem0_memory("Bob's order")["id"]] == "support-bot"
    assert speakers[packing["id"]] == "user"
    assert speakers[_mem0_memory("Answer billing questions")["id"]] == "assistant"


def test_mem0_copies_of_a_memory_with_other_owners_are_refused(
    make_context: Callable[..., Context], api_client_for: Callable[..., APIClient]
) -> None:
    context = make_context("mem0-clash")
    api = api_client_for(context)
    refund = _mem0_memory("Bob asked for a refund")
    body = json.dumps([refund, {**refund, "user_id": "carol"}])
    job = _import_api(api, "mem0-clash", body, "mem0")
    assert job.status == "failed"
    assert "memory 2" in job.error and "another user_id" in job.error, job.error
    assert not Entity.objects.filter(context=context).exists()
    assert not Turn.objects.filter(context=context).exists()


def test_graphiti_models_dumped_by_graphiti_core(
    make_context: Callable[..., Context], api_client_for: Callable[..., APIClient]
) -> None:
    dump = json.loads((PEERS / "graphiti.json").read_text())
    context = make_context("graphiti-real")
    api = api_client_for(context)
    job = _import_api(api, "graphiti-real", json.dumps(dump), "graphiti")
    assert job.status == "succeeded", job.error
    nodes = {n["uuid"]: n for n in dump["nodes"]}
    entities = {e.name: e for e in Entity.objects.filter(context=context)}
    assert {(e.name, e.type, e.scope) for e in entities.values()} == {
        ("Alice", "person", "graphiti/travel-desk"),
        ("Acme Corp", "organisation", "graphiti/travel-desk"),
        ("Globex", "other", "graphiti/travel-desk"),
    }
    alice = next(n for n in nodes.values() if n["name"] == "Alice")
    assert entities["Alice"].attributes == {"city": "Paris", "summary": alice["summary"]}
    assert "\n" in alice["summary"]
    turns = {t.ref: t for t in Turn.objects.filter(context=context)}
    for episode in dump["episodes"]:
        turn = turns[episode["uuid"]]
        assert (turn.text, turn.thread) == (episode["content"], "travel-desk")
    facts = {f.source_ref: f for f in Fact.objects.filter(context=context)}
    assert len(facts) == len(dump["edges"])
    for edge in dump["edges"]:
        fact = facts[edge["uuid"]]
        assert fact.subject.name == nodes[edge["source_node_uuid"]]["name"]
        assert fact.object is not None
        assert fact.object.name == nodes[edge["target_node_uuid"]]["name"]
        assert fact.status == (FactStatus.EXPIRED if edge["expired_at"] else FactStatus.CURRENT)
        assert fact.turn == turns[edge["episodes"][0]]
        until = fact.valid_until.isoformat().replace("+00:00", "Z") if fact.valid_until else None
        assert until == edge["invalid_at"]
    assert {f.predicate.name for f in facts.values()} == {"works_at", "worked_at", "partners_with"}


def test_mem0_copies_of_a_memory_join_their_owners_and_keep_the_latest_text(
    make_context: Callable[..., Context],
) -> None:
    context = make_context("mem0-copies")
    refund = _mem0_memory("Bob asked for a refund")
    older = {k: v for k, v in refund.items() if k not in ("agent_id", "run_id")}
    newer = {
        **refund,
        "memory": "Bob asked for a refund\nof order #1175",
        "updated_at": "2099-01-01T00:00:00+00:00",
    }
    memory_import(
        access=system_access(context),
        lines=foreign_lines(json.dumps([older, newer, older]), "mem0"),
    )
    turn = Turn.objects.get(context=context)
    assert (turn.text, turn.thread, turn.scope) == (newer["memory"], "ticket-42", "mem0/bob")
    facts = Fact.objects.filter(context=context)
    assert sorted(f.subject.name for f in facts) == ["bob", "support-bot"]
    assert {f.value_text for f in facts} == {newer["memory"]}
