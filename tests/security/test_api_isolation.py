"""Property: no REST list returns a record outside the caller's read grants, and each
returns every visible record it should (so the property cannot hold vacuously)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import example, given, settings

from memory.models import FactKind, FactStatus, PredicateStatus
from memory.selectors.vocabulary import scope_lineage
from tests.security.conftest import PROPERTY_SETTINGS, rolled_back
from tests.security.world import (
    CONFUSION,
    QUERY,
    Caller,
    Scenario,
    caller_make,
    scenarios,
    world_build,
)

pytestmark = pytest.mark.django_db

ALL = {"limit": 500}


def _url(caller: Caller, path: str) -> str:
    return f"/api/v1/contexts/{caller.world.context.slug}/{path}"


def _get(caller: Caller, path: str, **params: Any) -> Any:
    response = caller.api.get(_url(caller, path), params)
    assert response.status_code == 200, (path, response.content)
    return response.json()


def _status(caller: Caller, path: str) -> int:
    return int(caller.api.get(_url(caller, path)).status_code)


def _ids(rows: list[dict[str, Any]]) -> set[int]:
    return {row["id"] for row in rows}


@settings(PROPERTY_SETTINGS, max_examples=4)
@given(scenario=scenarios())
@example(scenario=CONFUSION)
def test_api_lists_return_exactly_the_granted_records(scenario: Scenario, embedder: None) -> None:
    with rolled_back():
        world = world_build(scenario.spec, embed=False)
        for grants, _ in scenario.callers:
            caller = caller_make(world, grants)
            _check_entities(caller)
            _check_facts(caller)
            _check_predicates(caller)
            _check_drift(caller)
            _check_duplicates(caller)
            _check_conflicts(caller)
            _check_audit(caller)
            _check_runs(caller)
            _check_documents(caller)
            _check_keywords(caller)
            _check_vocabulary(caller)


def _check_entities(caller: Caller) -> None:
    listed = _get(caller, "entities", **ALL)["results"]
    assert _ids(listed) == caller.entities, caller.grants
    for entity_id, entity in caller.world.entities.items():
        if entity_id not in caller.entities:
            assert _status(caller, f"entities/{entity_id}") == 404
            assert _status(caller, f"entities/{entity_id}/history") == 404
            continue
        detail = _get(caller, f"entities/{entity_id}")
        ranked = {row["fact"]["id"] for row in detail["facts"]}
        assert ranked <= caller.current_facts
        history = _get(caller, f"entities/{entity_id}/history")
        about = {pk for pk in caller.facts if caller.world.facts[pk].subject_id == entity_id}
        assert _ids(history["facts"]) == about, (entity.name, caller.grants)


def _check_facts(caller: Caller) -> None:
    everything = _get(caller, "facts", include_superseded="true", **ALL)["results"]
    assert _ids(everything) == caller.facts, caller.grants
    assert all(caller.sees(row["scope"]) for row in everything)
    current = _ids(_get(caller, "facts", **ALL)["results"])
    assert current == caller.current_facts, caller.grants


def _check_predicates(caller: Caller) -> None:
    """The registry is context-wide, but a predicate's fact count counts visible facts."""
    rows = _get(caller, "predicates", **ALL)["results"]
    counts = {row["name"]: row["fact_count"] for row in rows}
    for name in {caller.world.facts[pk].predicate.name for pk in caller.world.facts}:
        expected = sum(
            1 for pk in caller.current_facts if caller.world.facts[pk].predicate.name == name
        )
        assert counts[name] == expected, (name, caller.grants)


def _check_drift(caller: Caller) -> None:
    items = _get(caller, "drift", **ALL)["results"]
    assert {item["name"] for item in items} == caller.drift_names(), caller.grants
    facts = caller.world.facts
    for item in items:
        live = {
            pk
            for pk in caller.facts
            if facts[pk].predicate.name == item["name"] and facts[pk].status != FactStatus.RETRACTED
        }
        assert item["fact_count"] == caller.observations(live)
        examples = _ids(item["examples"])
        assert examples <= live
        assert len(examples) == min(len(live), 3)


def _check_duplicates(caller: Caller) -> None:
    clusters = _get(caller, "duplicates", limit=1000)["results"]
    members = [_ids(cluster["members"]) for cluster in clusters]
    for ids in members:
        assert ids <= caller.entities, caller.grants
    for pair in caller.pairs():
        assert any({pair.entity_a_id, pair.entity_b_id} <= ids for ids in members)


def _check_conflicts(caller: Caller) -> None:
    rows = _get(caller, "conflicts", status="all", **ALL)["results"]
    assert _ids(rows) == caller.conflicts, caller.grants
    for row in rows:
        assert {row["current_fact"]["id"], row["contested_fact"]["id"]} <= caller.facts


def _check_audit(caller: Caller) -> None:
    rows = _get(caller, "audit", **ALL)["results"]
    expected = {e.pk for e in caller.world.events if caller.event_visible(e)}
    assert _ids(rows) == expected, caller.grants


def _check_runs(caller: Caller) -> None:
    assert _ids(_get(caller, "runs", **ALL)["results"]) == caller.runs
    for run_id in caller.world.runs:
        assert _status(caller, f"runs/{run_id}") == (200 if run_id in caller.runs else 404)


def _check_documents(caller: Caller) -> None:
    assert _ids(_get(caller, "documents", **ALL)["results"]) == caller.documents
    visible = caller.keyword_documents()
    for document_id in [*caller.world.documents, *caller.world.deleted_documents]:
        if document_id not in caller.documents:
            assert _status(caller, f"documents/{document_id}") == 404
            assert _status(caller, f"documents/{document_id}/keywords") == 404
            continue
        chunks = _get(caller, f"documents/{document_id}")["chunks"]
        assert _ids(chunks) <= caller.chunks
        keywords = _get(caller, f"documents/{document_id}/keywords")
        mine = {
            caller.world.keywords[link.keyword_id].text
            for link in caller.world.links
            if link.document_id == document_id
        }
        assert {k["text"] for k in keywords} == mine
        for keyword in keywords:
            assert keyword["document_count"] == len(visible[keyword["text"]])


def _check_keywords(caller: Caller) -> None:
    visible = caller.keyword_documents()
    rows = _get(caller, "keywords", **ALL)["results"]
    assert {row["text"]: row["document_count"] for row in rows} == {
        text: len(documents) for text, documents in visible.items()
    }, caller.grants
    holders: dict[str, set[int]] = {}
    for link in caller.world.links:
        holders.setdefault(caller.world.keywords[link.keyword_id].text, set()).add(link.document_id)
    # A keyword's page where visibility matters: hidden, or shared by several documents.
    for text, documents in holders.items():
        path = f"keywords/{quote(text)}"
        if text not in visible:
            assert _status(caller, path) == 404
        elif len(documents) > 1:
            assert _ids(_get(caller, path)["documents"]) == visible[text]
    embedded = {k.text for k in caller.world.keywords.values() if k.embedding is not None}
    found = _get(caller, "keywords/search", q=QUERY, k=100)["results"]
    assert {row["text"] for row in found} == embedded & set(visible), caller.grants
    for row in found:
        assert row["document_count"] == len(visible[row["text"]])


def _check_vocabulary(caller: Caller) -> None:
    """For a write into each scope holding records (and two differing only in case): what
    the scope and its readable ancestors hold."""
    world = caller.world
    used = {e.scope for e in world.entities.values()} | {f.scope for f in world.facts.values()}
    for scope in sorted(used | {"org/a", "org/A"}):
        if not caller.sees(scope):
            assert _status(caller, f"vocabulary?scope={scope}") == 404
            continue
        lineage = {s for s in scope_lineage(scope) if caller.sees(s)}
        found = _get(caller, "vocabulary", scope=scope)
        assert set(found["visible_scopes"]) == lineage
        entities = {
            pk
            for pk, e in world.entities.items()
            if e.scope in lineage and e.merged_into_id is None
        }
        assert {e["id"] for e in found["entities"]} == entities, (scope, caller.grants)
        facts = [
            f
            for f in world.facts.values()
            if f.scope in lineage
            and f.predicate.status != PredicateStatus.REJECTED
            and not f.predicate.exclude_from_prompt
        ]
        relations = {
            f.predicate.name
            for f in facts
            if f.kind == FactKind.RELATION and f.status != FactStatus.RETRACTED
        }
        attributes = {
            f.predicate.name
            for f in facts
            if f.kind == FactKind.ATTRIBUTE and f.status == FactStatus.CURRENT
        }
        assert set(found["relation_labels"]) == relations, (scope, caller.grants)
        assert set(found["attribute_keys"]) == attributes, (scope, caller.grants)
