"""The MCP server through the SDK's own client against the live server: tool listing and
schemas, each tool's happy path, tokens, grants and bad arguments."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx2
import pytest
from mcp import Client

from memory.domain.access import system_access
from memory.models import AuditEvent, Fact, FactStatus, Run
from memory.services.entities.writes import entity_update, entity_upsert
from memory.services.ingest.run import run_create, run_execute
from memory.services.ingest.turns import turn_fields_clean
from tests.mcp.conftest import World, call, text_of, with_mcp

TOOLS = {
    "remember",
    "add_facts",
    "search",
    "get_context",
    "get_entity",
    "find_facts",
    "get_vocabulary",
    "canonicalize_predicate",
    "correct_fact",
    "retract_fact",
    "review_facts",
    "get_run",
}


def test_every_tool_is_listed_with_a_described_schema(
    mcp_url: str, token_for: Callable[..., str]
) -> None:
    async def work(client: Client) -> Any:
        return (await client.list_tools()).tools

    tools = with_mcp(mcp_url, token_for(["read:*"]), work)
    assert {t.name for t in tools} == TOOLS
    for tool in tools:
        assert tool.description, tool.name
        properties = tool.input_schema["properties"]
        assert properties, tool.name
        for name, prop in properties.items():
            assert prop.get("description"), f"{tool.name}.{name} has no description"
    by_name = {t.name: t for t in tools}
    assert by_name["remember"].input_schema["required"] == ["text", "scope"]
    assert by_name["search"].input_schema["properties"]["k"]["maximum"] == 100
    assert by_name["get_context"].input_schema["properties"]["budget_tokens"]["default"] == 1500
    assert by_name["retract_fact"].annotations.destructive_hint is True
    assert by_name["search"].annotations.read_only_hint is True


@pytest.mark.parametrize("header", [None, "Token md_not-a-real-token", "Bearer abc", "Token"])
def test_a_missing_or_bad_token_is_refused_with_401(mcp_url: str, header: str | None) -> None:
    headers = {"Accept": "application/json, text/event-stream"}
    if header:
        headers["Authorization"] = header
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    response = httpx2.post(mcp_url, json=body, headers=headers, timeout=60)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Token"
    assert set(response.json()["error"]) == {"code", "message", "details"}


def test_the_sdk_client_cannot_connect_with_a_bad_token(mcp_url: str, world: World) -> None:
    async def work(client: Client) -> Any:
        return await client.list_tools()

    with pytest.raises(Exception):  # noqa: B017 - the SDK wraps the 401 in its own errors
        with_mcp(mcp_url, "md_wrong", work)


def test_search_answers_results_with_their_explanation(
    mcp_url: str, token_for: Callable[..., str], world: World
) -> None:
    async def work(client: Client) -> Any:
        return await call(client, "search", {"query": "Berlin mentors", "mode": "hybrid"})

    is_error, data = with_mcp(mcp_url, token_for(["read:*"]), work)
    assert not is_error, data
    top = data["results"][0]
    assert top["type"] == "chunk"
    assert "Berlin" in top["text"]
    assert top["scope"] == "org/acme"
    assert top["explain"]["bm25"]["rank"] == 1
    assert top["explain"]["vector"] is not None
    assert top["meta"]["document_title"] == "Onboarding"


def test_get_context_gives_ranked_facts_and_passages_with_sources(
    mcp_url: str, token_for: Callable[..., str], world: World
) -> None:
    async def work(client: Client) -> Any:
        result = await client.call_tool("get_context", {"query": "Where does Alex Rivera work?"})
        return text_of(result), result.structured_content

    text, data = with_mcp(mcp_url, token_for(["read:*"]), work)
    assert data["entities"][0]["id"] == world.alex.pk
    assert text == data["text"]
    assert f"Alex Rivera works_at Acme Corp [fact {world.works_fact}; scope org/acme" in text
    assert "Alex Rivera current_title: Staff Engineer" in text
    assert "mentors new engineers" in text  # the best passage
    assert "## Facts (best first)" in text and "## Passages" in text
    facts = data["facts"]
    assert [f["score"] for f in facts] == sorted((f["score"] for f in facts), reverse=True)
    assert {f["id"] for f in facts} >= {world.works_fact, world.title_fact}
    assert all(f["line"] in text for f in facts + data["passages"])
    assert data["used_tokens"] <= data["budget_tokens"] == 1500


def test_get_context_by_identifier_keeps_within_a_small_budget(
    mcp_url: str, token_for: Callable[..., str], world: World
) -> None:
    async def work(client: Client) -> Any:
        return await call(
            client, "get_context", {"entity": "alex@acme.example", "budget_tokens": 100}
        )

    is_error, data = with_mcp(mcp_url, token_for(["read:*"]), work)
    assert not is_error, data
    assert data["entities"][0]["name"] == "Alex Rivera"
    assert data["used_tokens"] <= 100
    assert data["left_out"] > 0  # the secret fact, the passages: no room for everything


def test_get_entity_finds_by_alias_identifier_or_id(
    mcp_url: str, token_for: Callable[..., str], world: World
) -> None:
    async def work(client: Client) -> Any:
        return [
            await call(client, "get_entity", {"entity": "roadrunner supplies"}),
            await call(client, "get_entity", {"entity": "domain:acme.example"}),
            await call(client, "get_entity", {"entity": world.alex.pk}),
        ]

    (e1, by_alias), (e2, by_identifier), (e3, by_id) = with_mcp(
        mcp_url, token_for(["read:*"]), work
    )
    assert not (e1 or e2 or e3)
    assert by_alias["entity"]["id"] == world.acme.pk
    assert by_alias["matched_by"] == "alias"
    assert by_identifier["matched_by"] == "identifier"
    assert by_alias["identifiers"] == [
        {"kind": "domain", "value": "acme.example", "scope": "org/acme"}
    ]
    assert by_alias["neighbours"] == [
        {
            "id": world.alex.pk,
            "name": "Alex Rivera",
            "type": "person",
            "predicate": "works_at",
            "direction": "in",
            "fact": world.works_fact,
        }
    ]
    assert by_id["matched_by"] == "id"
    assert {f["predicate"] for f in by_id["facts"]} == {
        "works_at",
        "current_title",
        "committed_to",
    }
    assert all("rank_score" in f for f in by_id["facts"])


def test_find_facts_takes_a_predicate_in_any_form(
    mcp_url: str, token_for: Callable[..., str], world: World
) -> None:
    async def work(client: Client) -> Any:
        return await call(client, "find_facts", {"subject": "Alex Rivera", "predicate": "works at"})

    is_error, data = with_mcp(mcp_url, token_for(["read:*"]), work)
    assert not is_error, data
    assert data["predicate"] == "works_at"
    assert [f["id"] for f in data["facts"]] == [world.works_fact]
    fact = data["facts"][0]
    assert fact["object"]["name"] == "Acme Corp"
    assert fact["source"]["kind"] == "api"
    assert fact["scope"] == "org/acme"


def test_vocabulary_and_canonicalization(
    mcp_url: str, token_for: Callable[..., str], world: World
) -> None:
    async def work(client: Client) -> Any:
        return (
            await call(client, "get_vocabulary", {"scope": "org/acme"}),
            await call(client, "canonicalize_predicate", {"name": "worksAt"}),
        )

    (e1, vocabulary), (e2, canonical) = with_mcp(mcp_url, token_for(["read:*"]), work)
    assert not (e1 or e2)
    assert "Alex Rivera" in [e["name"] for e in vocabulary["entities"]]
    assert "works_at" in vocabulary["relation_labels"]
    assert "reuse" in vocabulary["prompt_section"]
    assert canonical["canonical"] == "works_at"
    assert canonical["registered"] is True


def test_remember_add_facts_and_get_run(
    mcp_url: str, token_for: Callable[..., str], world: World
) -> None:
    triples = {
        "relations": [{"subject": "Maria Chen", "predicate": "manages", "object": "Alex Rivera"}]
    }

    async def work(client: Client) -> Any:
        noted = await call(
            client,
            "remember",
            {
                "text": "Alex likes Rust.",
                "scope": "org/acme",
                "infer": "none",
                "speaker": "Dana",
                "said_at": "2026-05-08T13:56:00Z",
                "thread": "standup-42",
                "ref": "msg-7",
            },
        )
        turns = await call(
            client,
            "search",
            {"query": "Rust", "target": "turns", "mode": "bm25", "thread": "standup-42"},
        )
        added = await call(client, "add_facts", {"scope": "org/acme", **triples})
        queued = await call(
            client,
            "remember",
            {
                "text": "",
                "scope": "org/acme",
                "infer": "triples",
                "triples": triples,
                "wait": False,
            },
        )
        run = await call(client, "get_run", {"run_id": added[1]["run"]["id"]})
        return noted, added, queued, run, turns

    noted, added, queued, run, turns = with_mcp(mcp_url, token_for(["read,write:org/acme/*"]), work)
    assert not turns[0], turns
    (turn,) = turns[1]["results"]
    assert turn["text"] == "Alex likes Rust."
    assert turn["meta"]["speaker"] == "Dana"
    assert turn["meta"]["ref"] == "msg-7"
    assert turn["meta"]["run"] == noted[1]["run"]["id"]
    assert not any(r[0] for r in (noted, added, queued, run)), (noted, added, queued, run)
    assert noted[1]["run"]["outcome"] == "succeeded"
    assert noted[1]["run"]["mode"] == "none"
    assert added[1]["run"]["source"] == "mcp add_facts"
    assert len(added[1]["result"]["facts_created"]) == 1
    assert queued[1]["queued"] is True
    assert queued[1]["run"]["outcome"] == "pending"
    assert run[1]["run"]["id"] == added[1]["run"]["id"]
    assert run[1]["result"] == added[1]["result"]
    assert Fact.objects.filter(context=world.context, predicate__name="manages").count() == 1


def test_correct_fact_supersedes_with_an_audited_correction(
    mcp_url: str, token_for: Callable[..., str], world: World
) -> None:
    async def work(client: Client) -> Any:
        corrected = await call(
            client,
            "correct_fact",
            {"fact_id": world.title_fact, "value": "Principal Engineer", "reason": "typo"},
        )
        history = await call(
            client,
            "find_facts",
            {"subject": world.alex.pk, "predicate": "current_title", "include_superseded": True},
        )
        return corrected, history

    (is_error, corrected), (_, history) = with_mcp(
        mcp_url, token_for(["read,write:*"], role="curator"), work
    )
    assert not is_error, corrected
    assert corrected["corrected"]["status"] == "superseded"
    assert corrected["fact"]["value"] == "Principal Engineer"
    assert corrected["fact"]["supersedes"] == world.title_fact
    event = AuditEvent.objects.get(pk=corrected["audit_event"])
    assert event.action == "fact_correct"
    assert event.undo is not None
    assert event.undo["op"] == "fact_correct_revert"
    assert [f["status"] for f in history["facts"]] == ["current", "superseded"]


def test_retract_fact_withdraws_it(
    mcp_url: str, token_for: Callable[..., str], world: World
) -> None:
    async def work(client: Client) -> Any:
        return await call(client, "retract_fact", {"fact_id": world.works_fact})

    is_error, data = with_mcp(mcp_url, token_for(["read,write:org/acme/*"]), work)
    assert not is_error, data
    assert data["fact"]["status"] == "retracted"
    assert Fact.objects.get(pk=world.works_fact).status == FactStatus.RETRACTED


def test_no_tool_shows_what_the_grants_exclude(
    mcp_url: str, token_for: Callable[..., str], world: World
) -> None:
    secret_run = Run.objects.create(context=world.context, scope="org/secret", mode="none")
    turn_run = run_create(
        access=system_access(world.context),
        text="Dana: the Nightjar acquisition closes in May.",
        scope="org/secret",
        infer="none",
        turn=turn_fields_clean(speaker="Dana", said_at=None, thread="deal-room", ref=""),
    )
    run_execute(run_id=turn_run.pk)

    async def work(client: Client) -> Any:
        return {
            "search_chunks": await call(client, "search", {"query": "Nightjar acquisition"}),
            "search_graph": await call(
                client, "search", {"query": "Nightjar acquisition", "mode": "hybrid_graph"}
            ),
            "search_turns": await call(
                client, "search", {"query": "Nightjar acquisition closes", "target": "turns"}
            ),
            "search_thread": await call(
                client,
                "search",
                {"query": "Nightjar", "target": "turns", "mode": "bm25", "thread": "deal-room"},
            ),
            "search_facts": await call(
                client, "search", {"query": "committed_to Nightjar", "target": "facts"}
            ),
            "search_entities": await call(
                client, "search", {"query": "Nightjar", "target": "entities", "mode": "bm25"}
            ),
            "context": await call(client, "get_context", {"query": "Nightjar acquisition"}),
            "context_entity": await call(client, "get_context", {"entity": "Alex Rivera"}),
            "context_graph": await call(
                client,
                "get_context",
                {"query": "Nightjar acquisition", "mode": "hybrid_graph", "budget_tokens": 4000},
            ),
            "context_secret_entity": await call(client, "get_context", {"entity": world.secret.pk}),
            "entity_by_name": await call(client, "get_entity", {"entity": "Project Nightjar"}),
            "entity_by_id": await call(client, "get_entity", {"entity": world.secret.pk}),
            "alex": await call(client, "get_entity", {"entity": world.alex.pk}),
            "facts": await call(client, "find_facts", {"subject": world.alex.pk}),
            "facts_object": await call(client, "find_facts", {"object": world.secret.pk}),
            "facts_predicate": await call(client, "find_facts", {"predicate": "committed_to"}),
            "vocabulary": await call(client, "get_vocabulary", {"scope": "org/secret"}),
            "vocabulary_acme": await call(client, "get_vocabulary", {"scope": "org/acme"}),
            "run": await call(client, "get_run", {"run_id": secret_run.pk}),
            "retract": await call(client, "retract_fact", {"fact_id": world.secret_fact}),
            "correct": await call(
                client, "correct_fact", {"fact_id": world.secret_fact, "object": "Acme"}
            ),
            "correct_to_secret": await call(
                client, "correct_fact", {"fact_id": world.works_fact, "object": world.secret.pk}
            ),
            "remember_secret": await call(
                client, "remember", {"text": "x", "scope": "org/secret", "infer": "none"}
            ),
            "add_facts_secret": await call(
                client,
                "add_facts",
                {
                    "scope": "org/secret",
                    "attributes": [{"subject": "Alex", "key": "k", "value": 1}],
                },
            ),
        }

    answers = with_mcp(mcp_url, token_for(["read,write:org/acme/*"]), work)
    facts_predicate = answers.pop("facts_predicate")  # echoes the predicate it was asked for
    assert facts_predicate == (False, {**facts_predicate[1], "facts": [], "more": False})
    for name in ("remember_secret", "add_facts_secret"):
        error = answers.pop(name)[1]["error"]
        assert error["code"] == "scope_forbidden", name
        assert "no write grant on scope 'org/secret'" in error["message"], name
    for name in (
        "entity_by_name",
        "entity_by_id",
        "facts_object",
        "vocabulary",
        "run",
        "correct_to_secret",
        "context_secret_entity",
    ):
        assert answers[name][0], name
        assert answers[name][1]["error"]["code"].endswith("not_found"), answers[name]
    for name in ("retract", "correct"):
        assert answers[name][1]["error"]["code"] == "fact_not_found", answers[name]
    for name, (is_error, data) in answers.items():
        if not is_error:
            shown = repr(data).replace("Nightjar acquisition", "")  # the query, echoed
            assert "Nightjar" not in shown, name
            assert "org/secret" not in repr(data), name
            assert "confidential" not in repr(data), name
            assert "committed_to" not in repr(data), name
    assert Fact.objects.get(pk=world.secret_fact).status == FactStatus.CURRENT
    assert Fact.objects.get(pk=world.works_fact).status == FactStatus.CURRENT
    assert not Run.objects.filter(scope="org/secret").exclude(pk__in=[secret_run.pk, turn_run.pk])


def test_a_write_without_a_write_grant_is_a_tool_error_naming_it(
    mcp_url: str, token_for: Callable[..., str], world: World
) -> None:
    facts_before = Fact.objects.count()

    async def work(client: Client) -> Any:
        return [
            await call(client, "remember", {"text": "x", "scope": "org/acme", "infer": "none"}),
            await call(
                client,
                "add_facts",
                {"scope": "org/acme", "attributes": [{"subject": "Alex", "key": "k", "value": 1}]},
            ),
            await call(client, "retract_fact", {"fact_id": world.works_fact}),
            await call(client, "correct_fact", {"fact_id": world.title_fact, "value": "CEO"}),
        ]

    answers = with_mcp(mcp_url, token_for(["read:*"]), work)
    for is_error, data in answers:
        assert is_error
        assert data["error"]["code"] == "scope_forbidden"
        assert "no write grant on scope 'org/acme'" in data["error"]["message"]
    assert Fact.objects.count() == facts_before
    assert not Run.objects.exists()


def test_an_argument_a_tool_does_not_take_is_refused_by_name(
    mcp_url: str, token_for: Callable[..., str], world: World
) -> None:
    async def work(client: Client) -> Any:
        tools = (await client.list_tools()).tools
        calls = [
            await client.call_tool("search", {"query": "Alex", "limit": 3}),
            await client.call_tool("get_context", {"query": "Alex", "budget": 200}),
        ]
        return tools, [(r.is_error, text_of(r)) for r in calls]

    tools, answers = with_mcp(mcp_url, token_for(["read:*"]), work)
    assert all(t.input_schema["additionalProperties"] is False for t in tools)
    for (is_error, text), name in zip(answers, ["limit", "budget"], strict=True):
        assert is_error
        assert json.loads(text)["error"] == {
            "code": "invalid_arguments",
            "message": f"{'search' if name == 'limit' else 'get_context'}: {name}: "
            "not an argument of this tool",
            "details": {name: "not an argument of this tool"},
        }


@pytest.mark.parametrize(
    ("tool", "arguments", "says"),
    [
        ("search", {"query": "x", "k": 1000}, "less than or equal to 100"),
        ("search", {"query": "x", "mode": "psychic"}, "invalid_mode"),
        ("search", {"query": "x", "target": "planets"}, "invalid_target"),
        ("search", {}, "query"),
        ("search", {"query": "x", "scope": ["bad scope!!"]}, "invalid_scope"),
        ("remember", {"text": "x", "scope": "no//such scope"}, "invalid_scope"),
        ("remember", {"text": "x", "scope": "org/acme", "infer": "telepathy"}, "infer"),
        ("remember", {"text": "x", "scope": "org/acme"}, "chat_model_not_configured"),
        ("remember", {"text": "", "scope": "org/acme", "infer": "triples"}, "missing_triples"),
        ("add_facts", {"scope": "org/acme"}, "missing_triples"),
        ("get_context", {}, "missing_query"),
        ("get_context", {"query": "x", "budget_tokens": 10}, "budget_tokens"),
        ("get_entity", {"entity": "nobody at all"}, "entity_not_found"),
        ("get_entity", {"entity": "x" * 600}, "invalid_entity"),
        ("find_facts", {"predicate": "works@at!"}, "invalid_predicate"),
        ("find_facts", {"as_of": "yesterday-ish"}, "as_of"),
        ("get_run", {"run_id": 999999}, "run_not_found"),
        ("get_run", {"run_id": "seven"}, "run_id"),
        ("correct_fact", {"fact_id": 1}, "fact_not_found"),
        ("canonicalize_predicate", {"name": ""}, "name"),
    ],
)
def test_bad_arguments_are_tool_errors_with_a_clear_message(
    mcp_url: str,
    token_for: Callable[..., str],
    world: World,
    tool: str,
    arguments: dict[str, Any],
    says: str,
    settings: Any,
) -> None:
    settings.MEMORY_CHAT_MODEL = ""

    async def work(client: Client) -> Any:
        result = await client.call_tool(tool, arguments)
        return result.is_error, text_of(result)

    is_error, text = with_mcp(mcp_url, token_for(["read,write:*"]), work)
    assert is_error
    assert says in text
    assert "Traceback" not in text
    # The API's error body, never the validation library's own report.
    assert set(json.loads(text)) == {"error"}
    assert "validation error for" not in text and "pydantic" not in text and "[type=" not in text


def test_get_entity_and_find_facts_answer_the_entity_named_so_not_a_key_twin(
    mcp_url: str, token_for: Callable[..., str], world: World
) -> None:
    """The twin "ACME Inc." (another scope) shares the key ``acme`` with "Acme Corp" and was
    edited last: a name still means the entity named so, the twin is an other match."""
    access = system_access(world.context)
    twin = entity_upsert(
        access=access, name="ACME Inc.", type="organisation", scope="org/other"
    ).entity
    entity_update(access=access, entity=twin, attributes={"edited": True})

    async def work(client: Client) -> Any:
        return [
            await call(client, "get_entity", {"entity": "Acme Corp"}),
            await call(client, "find_facts", {"object": "Acme Corp", "predicate": "works_at"}),
        ]

    (e1, card), (e2, found) = with_mcp(mcp_url, token_for(["read:*"]), work)
    assert not (e1 or e2), (card, found)
    assert (card["entity"]["id"], card["matched_by"]) == (world.acme.pk, "name")
    assert [m["id"] for m in card["other_matches"]] == [twin.pk]
    assert found["object"]["id"] == world.acme.pk
    assert [f["id"] for f in found["facts"]] == [world.works_fact]


def test_retract_fact_is_audited_and_correct_fact_needs_the_curator_role(
    mcp_url: str, token_for: Callable[..., str], world: World
) -> None:
    async def work(client: Client) -> Any:
        return (
            await call(client, "retract_fact", {"fact_id": world.works_fact}),
            await call(client, "correct_fact", {"fact_id": world.title_fact, "value": "CTO"}),
        )

    (retract_error, _), (correct_error, refused) = with_mcp(
        mcp_url, token_for(["read,write:org/acme/*"]), work
    )
    assert not retract_error
    event = AuditEvent.objects.get(action="fact_retract")
    assert event.target_id == str(world.works_fact)
    assert event.undo is not None
    assert event.undo["op"] == "facts_retract_revert"
    assert correct_error and refused["error"]["code"] == "role_required"
    assert Fact.objects.get(pk=world.title_fact).status == FactStatus.CURRENT
