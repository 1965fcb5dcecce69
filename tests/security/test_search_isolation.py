"""Property: search, in every mode and over every target, returns only records inside the
caller's read grants (narrowed by the request's scope patterns) — and, since every record
matches the query and k exceeds their number, exactly those records."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings

from memory.selectors.search import MODES, TARGETS
from tests.security.conftest import PROPERTY_SETTINGS, rolled_back
from tests.security.world import (
    CONFUSION,
    QUERY,
    Caller,
    Scenario,
    caller_make,
    in_patterns,
    scenarios,
    world_build,
)

pytestmark = pytest.mark.django_db


def expected_results(
    caller: Caller, target: str, scopes: list[str] | None, thread: str | None = None
) -> set[int]:
    """Every visible record of ``target`` a search may return (live entities, current
    facts, chunks, turns — of ``thread`` when given), within the request's scope patterns."""
    world = caller.world
    records = {
        "chunks": {pk: world.chunks[pk].scope for pk in caller.chunks},
        "turns": {
            pk: world.turns[pk].scope
            for pk in caller.turns
            if thread is None or world.turns[pk].thread == thread
        },
        "facts": {pk: world.facts[pk].scope for pk in caller.current_facts},
        "entities": {pk: world.entities[pk].scope for pk in caller.entities},
    }[target]
    return {pk for pk, scope in records.items() if scopes is None or in_patterns(scopes, scope)}


@settings(PROPERTY_SETTINGS, max_examples=4)
@given(scenario=scenarios())
@example(scenario=CONFUSION)
def test_search_returns_exactly_the_granted_records_in_every_mode(
    scenario: Scenario, embedder: None
) -> None:
    with rolled_back():
        world = world_build(scenario.spec)
        for grants, scopes in scenario.callers:
            caller = caller_make(world, grants)
            url = f"/api/v1/contexts/{world.context.slug}/search"
            for target in TARGETS:
                expected = expected_results(caller, target, scopes)
                for mode in MODES:
                    body = {"query": QUERY, "mode": mode, "target": target, "k": 100}
                    if scopes is not None:
                        body["scope"] = scopes
                    response = caller.api.post(url, body, format="json")
                    assert response.status_code == 200, response.content
                    results = response.json()["results"]
                    assert all(caller.sees(r["scope"]) for r in results), (mode, target, grants)
                    found = {r["id"] for r in results}
                    assert found == expected, (mode, target, grants, scopes)
            # One conversation's turns: the thread narrows, the grants still hold.
            expected = expected_results(caller, "turns", scopes, thread="thread1")
            for mode in MODES:
                body = {"query": QUERY, "mode": mode, "target": "turns", "k": 100}
                body["thread"] = "thread1"
                if scopes is not None:
                    body["scope"] = scopes
                response = caller.api.post(url, body, format="json")
                assert response.status_code == 200, response.content
                results = response.json()["results"]
                assert {r["id"] for r in results} == expected, (mode, grants, scopes)
                assert all(r["meta"]["thread"] == "thread1" for r in results)
