"""What the MCP write tools report, through the SDK's client: the constraints a fact
breaks (as POST facts answers them), refused items as warnings, and ``remember``'s
``source`` — text relayed from a tool, a document or the web waits for review."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp import Client

from memory.domain.access import system_access
from memory.models import Fact, Role
from memory.services.registry.predicates import predicate_register
from tests.mcp.conftest import World, call, with_mcp


def _employee_ids_match(world: World) -> None:
    predicate_register(
        access=system_access(world.context),
        name="employee_id",
        kind="attribute",
        constraints=[{"type": "format", "pattern": r"E\d{4}"}],
    )


def test_add_facts_and_remember_report_the_constraints_a_fact_breaks(
    mcp_url: str, token_for: Callable[..., str], world: World
) -> None:
    _employee_ids_match(world)
    triples = {
        "entities": [{"name": "Alex Rivera", "type": "person"}],
        "attributes": [{"subject": "Alex Rivera", "key": "employee_id", "value": "12-34"}],
    }

    async def work(client: Client) -> Any:
        added = await call(client, "add_facts", {"scope": "org/acme", **triples})
        remembered = await call(
            client,
            "remember",
            {"text": "", "scope": "org/acme", "infer": "triples", "triples": triples},
        )
        return added, remembered

    added, remembered = with_mcp(mcp_url, token_for(["read,write:org/acme/*"]), work)

    for error, answer in (added, remembered):
        assert not error, answer
        assert answer["run"]["outcome"] == "succeeded_with_warnings"
        assert answer["run"]["summary"]["warnings"] == 1
        [fact] = answer["result"]["facts_created"] or answer["result"]["facts_reobserved"]
        [violation] = fact["warnings"]
        assert (violation["predicate"], violation["constraint"]) == ("employee_id", "format")
        assert violation["entity"]["id"] == world.alex.pk
        [warning] = answer["result"]["warnings"]
        assert warning.startswith("attributes[0]: ")
        assert "'12-34' does not match" in warning and "format constraint" in warning


def test_refused_items_are_warnings_of_the_tools_result(
    mcp_url: str, token_for: Callable[..., str], world: World
) -> None:
    async def work(client: Client) -> Any:
        return await call(
            client,
            "add_facts",
            {
                "scope": "org/acme",
                "relations": [
                    {
                        "subject": "Build Server",
                        "predicate": "deploys_with",
                        "object": "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                    }
                ],
            },
        )

    error, answer = with_mcp(mcp_url, token_for(["read,write:org/acme/*"]), work)

    assert not error, answer
    assert [u["code"] for u in answer["result"]["unresolved"]] == ["secret_refused"]
    assert answer["run"]["summary"]["warnings"] == 1
    assert answer["result"]["entities_created"] == []


def test_remember_takes_where_its_text_came_from(
    mcp_url: str, token_for: Callable[..., str], world: World
) -> None:
    def triples(value: str) -> dict[str, Any]:
        return {
            "entities": [{"name": "Alex Rivera", "type": "person"}],
            "attributes": [{"subject": "Alex Rivera", "key": "favourite_drink", "value": value}],
        }

    async def work(client: Client) -> Any:
        answers = {}
        for source, drink in (("web:news.example", "tea"), ("user", "coffee"), ("tool", "mate")):
            answers[source] = await call(
                client,
                "remember",
                {
                    "text": f"Alex Rivera drinks {drink}.",
                    "scope": "org/acme",
                    "infer": "triples",
                    "triples": triples(drink),
                    "source": source,
                },
            )
        return answers

    answers = with_mcp(mcp_url, token_for(["read,write:org/acme/*"], role=Role.CURATOR), work)

    assert not any(error for error, _ in answers.values()), answers
    assert {s: a[1]["run"]["source"] for s, a in answers.items()} == {
        s: s for s in ("web:news.example", "user", "tool")
    }
    trust = dict(
        Fact.objects.filter(predicate__name="favourite_drink").values_list("value_text", "trust")
    )
    assert trust == {"tea": "pending", "coffee": "trusted", "mate": "pending"}
    reasons = set(
        Fact.objects.filter(trust="pending", predicate__name="favourite_drink").values_list(
            "trust_reason", flat=True
        )
    )
    assert reasons == {"relayed_source"}
