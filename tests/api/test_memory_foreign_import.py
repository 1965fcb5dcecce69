"""mem0 and Graphiti exports read into a context (``POST import?format=``, the command)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

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
        ("mem0", '[{"memory": "x"}]', "neither user_id nor agent_id"),
        ("mem0", '[{"user_id": "a", "memory": ""}]', "non-empty"),
        ("mem0", '{"results": 5}', "list of memories"),
        ("graphiti", "[]", "an object"),
        ("graphiti", '{"nodes": {}}', "must be a list"),
        ("graphiti", '{"edges": [{"uuid": "x", "name": "knows", "source_node_uuid": "a",'
                     ' "target_node_uuid": "b"}]}', "does not hold"),
        ("graphiti", "not json", "not one JSON document"),
    ],
)  # fmt: skip
def test_bad_foreign_files_write_nothing(
    make_context: Callable[..., Context], format: str, content: str, message: str
) -> None:
    context = make_context("bad-foreign")
    with pytest.raises(ValidationFailed, match=message):
        memory_import(access=system_access(context), lines=foreign_lines(content, format))
    assert not Entity.objects.filter(context=context).exists()
