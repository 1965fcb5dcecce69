"""get_context answers the question an agent asks, and search with no target finds what
it remembered: through the SDK's client against the live server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp import Client

from tests.mcp.conftest import World, call, with_mcp

TEAM = {
    "relations": [
        {"subject": "Dana Lee", "predicate": "works_at", "object": "Acme Corp"},
        {"subject": "Dana Lee", "predicate": "knows", "object": "Alex Rivera"},
        {"subject": "Maria Chen", "predicate": "works_at", "object": "Acme Corp"},
        {"subject": "Maria Chen", "predicate": "knows", "object": "Dana Lee"},
        {"subject": "Project Phoenix", "predicate": "depends_on", "object": "Kubernetes"},
        {"subject": "Dana Lee", "predicate": "leads", "object": "Project Phoenix"},
        {"subject": "Alex Rivera", "predicate": "committed_to", "object": "Project Phoenix"},
    ],
    "attributes": [
        {"subject": "Dana Lee", "key": "current_title", "value": "Engineering Lead"},
        {"subject": "Maria Chen", "key": "current_title", "value": "Director"},
    ],
}


def _statements(data: dict[str, Any]) -> list[str]:
    return [f["line"].split(" [fact")[0].removeprefix("- ") for f in data["facts"]]


def test_get_context_puts_the_answer_first_and_finds_what_was_just_remembered(
    mcp_url: str, token_for: Callable[..., str], world: World
) -> None:
    async def work(client: Client) -> Any:
        added = await call(client, "add_facts", {"scope": "org/acme", **TEAM})
        phoenix = await call(
            client, "get_context", {"query": "Who leads Project Phoenix?", "budget_tokens": 300}
        )
        remembered = await call(
            client,
            "remember",
            {
                "text": "Priya Patel mentors Dana Lee.",
                "scope": "org/acme",
                "infer": "triples",
                "triples": {
                    "relations": [
                        {"subject": "Priya Patel", "predicate": "mentors", "object": "Dana Lee"}
                    ]
                },
            },
        )
        mentor = await call(
            client,
            "get_context",
            {"query": "Who mentors Dana Lee?", "budget_tokens": 300, "explain": True},
        )
        found = await call(client, "search", {"query": "Who mentors Dana Lee?"})
        return added, phoenix, remembered, mentor, found

    added, phoenix, remembered, mentor, found = with_mcp(
        mcp_url, token_for(["read,write:org/acme/*"]), work
    )
    assert not any(r[0] for r in (added, phoenix, remembered, mentor, found))
    assert _statements(phoenix[1])[0] == "Dana Lee leads Project Phoenix"
    assert phoenix[1]["used_tokens"] <= 300
    assert _statements(mentor[1])[0] == "Priya Patel mentors Dana Lee"
    why = mentor[1]["facts"][0]["explain"]
    assert why["names"] == ["Dana Lee"] and why["predicate"]["words"] == ["mentor"]
    # The remembered turn and its fact, each typed, from a search with no target.
    kinds = {(r["type"], r["text"]) for r in found[1]["results"]}
    assert ("turn", "Priya Patel mentors Dana Lee.") in kinds
    assert ("fact", "Priya Patel mentors Dana Lee") in kinds


def test_search_describes_its_default(
    mcp_url: str, token_for: Callable[..., str], world: World
) -> None:
    async def work(client: Client) -> Any:
        return (await client.list_tools()).tools

    tools = {t.name: t for t in with_mcp(mcp_url, token_for(["read:*"]), work)}
    target = tools["search"].input_schema["properties"]["target"]
    assert "all (the default: turns, chunks and facts" in target["description"]
    described = " ".join((tools["search"].description or "").split())
    assert "by default everything it holds — remembered turns, document chunks and facts" in (
        described
    )
    assert "explain" in tools["get_context"].input_schema["properties"]
