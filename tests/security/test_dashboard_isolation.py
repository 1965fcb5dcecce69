"""Property: no dashboard page shows a record outside the member's read grants.

Each page is judged twice: by the records its template received (exactly the visible ones,
so the check is not vacuous), and by its HTML, which must not hold the marker of a record
the member may not read (a template or a helper reading around the selectors would)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from memory.models import FactKind, FactStatus
from memory.selectors.search import MODES, TARGETS
from tests.security.conftest import PROPERTY_SETTINGS, rolled_back
from tests.security.test_search_isolation import expected_results
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


def _page(caller: Caller, path: str, status: int = 200) -> Any:
    response = caller.web.get(f"/c/{caller.world.context.slug}/{path}")
    assert response.status_code == status, (path, response.status_code)
    if status == 200:
        html = response.content.decode().lower()
        leaked = sorted(m for m in caller.forbidden_markers() if m in html)
        assert not leaked, (path, caller.grants, leaked)
    return response


@settings(PROPERTY_SETTINGS, max_examples=4)
@given(
    scenario=scenarios(),
    mode=st.sampled_from(MODES),
    target=st.sampled_from(list(TARGETS)),
)
@example(scenario=CONFUSION, mode="hybrid_graph", target="entities")
def test_dashboard_pages_show_only_granted_records(
    scenario: Scenario, mode: str, target: str, embedder: None
) -> None:
    with rolled_back():
        world = world_build(scenario.spec)
        for grants, scopes in scenario.callers:
            caller = caller_make(world, grants)
            _check_overview(caller)
            _check_entities(caller)
            _check_search(caller, mode, target, scopes)
            _check_duplicates(caller)
            _check_conflicts(caller)
            _check_drift(caller)
            _check_audit(caller)
            _check_runs(caller)
            _check_registry(caller)
            _check_facts(caller)


def _check_facts(caller: Caller) -> None:
    """The facts list holds visible facts only (the first 50, newest first); a fact's
    page is found exactly when its fact is visible; the conversations list leaks none."""
    facts = _page(caller, "facts/").context["page"].facts
    newest = sorted(caller.facts, key=lambda pk: (caller.world.facts[pk].recorded_at, pk))
    assert [f.pk for f in facts] == list(reversed(newest))[:50], caller.grants
    for pk in sorted(caller.world.facts)[:12]:
        _page(caller, f"facts/{pk}/", status=200 if pk in caller.facts else 404)
    _page(caller, "conversations/")


def _check_overview(caller: Caller) -> None:
    response = _page(caller, "")
    counts = response.context["counts"]
    assert counts.entities == len(caller.entities), caller.grants
    assert counts.facts == caller.observations(caller.current_facts), caller.grants
    assert counts.documents == len(caller.documents), caller.grants
    assert counts.open_conflicts == sum(
        1 for pk in caller.conflicts if caller.world.conflicts[pk].status == "open"
    )
    assert counts.open_duplicates == len(caller.pairs()), caller.grants
    assert counts.open_drift == len(caller.drift_names()), caller.grants
    assert {run.pk for run in response.context["runs"]} <= caller.runs


def _check_entities(caller: Caller) -> None:
    rows = _page(caller, "entities/").context["rows"]
    assert {entity.pk for entity, _ in rows} == caller.entities, caller.grants
    for entity_id in caller.world.entities:
        if entity_id not in caller.entities:
            _page(caller, f"entities/{entity_id}/", status=404)
            continue
        context = _page(caller, f"entities/{entity_id}/").context
        ranked = {r.fact.pk for r in context["ranked"].rows}
        timeline = {fact.pk for fact, _ in context["timeline"].rows}
        successors = {later.pk for _, later in context["timeline"].rows if later is not None}
        incoming = {fact_id for fact_id, *_ in context["incoming"].rows}
        neighbours = {node.id for node in context["neighbours"]}
        assert ranked | incoming <= caller.current_facts, caller.grants
        assert timeline | successors <= caller.facts, caller.grants
        about = {pk for pk in caller.facts if caller.world.facts[pk].subject_id == entity_id}
        assert ranked | timeline <= about
        # The picture draws only what visible current relations link the entity to.
        linked = {
            other
            for f in (caller.world.facts[pk] for pk in caller.current_facts)
            for one, other in ((f.subject_id, f.object_id), (f.object_id, f.subject_id))
            if one == entity_id and f.kind == FactKind.RELATION
        }
        assert neighbours <= linked, caller.grants


def _check_search(caller: Caller, mode: str, target: str, scopes: list[str] | None) -> None:
    query = urlencode({"q": QUERY, "mode": mode, "target": target, "scope": " ".join(scopes or [])})
    context = _page(caller, f"search/?{query}").context
    found = {r.id for r in context["response"].results}
    expected = expected_results(caller, target, scopes)
    assert found == expected, (mode, target, caller.grants, scopes)


def _check_duplicates(caller: Caller) -> None:
    rows = _page(caller, "duplicates/").context["rows"]
    members = [{m.pk for m in row.cluster.members} for row in rows]
    for ids in members:
        assert ids <= caller.entities, caller.grants
    for pair in caller.pairs():
        assert any({pair.entity_a_id, pair.entity_b_id} <= ids for ids in members)


def _check_conflicts(caller: Caller) -> None:
    page = _page(caller, "conflicts/?status=all").context["page"]
    assert {c.pk for c in page.object_list} == caller.conflicts, caller.grants


def _check_drift(caller: Caller) -> None:
    response = _page(caller, "drift/")
    rows = response.context["rows"]
    assert {row.name for row in rows} == caller.drift_names(), caller.grants
    for row in rows:
        assert {f.pk for f in row.item.examples} <= caller.facts, caller.grants
    # An observed predicate used only outside the grants is not named on the page.
    hidden = {p.name for p in caller.world.observed.values()} - caller.drift_names()
    html = response.content.decode()
    assert not [name for name in hidden if name in html], caller.grants


def _check_audit(caller: Caller) -> None:
    page = _page(caller, "audit/").context["page"]
    expected = {e.pk for e in caller.world.events if caller.event_visible(e)}
    assert {e.pk for e in page.object_list} == expected, caller.grants


def _check_runs(caller: Caller) -> None:
    page = _page(caller, "runs/").context["page"]
    assert {run.pk for run in page.object_list} == caller.runs, caller.grants


def _check_registry(caller: Caller) -> None:
    """Registry rows are context-wide; their use figures and a predicate's facts are not."""
    facts = caller.world.facts
    rows = _page(caller, "registry/?status=all").context["predicates"]
    counts = {p.name: p.fact_count for p in rows}
    for name in {f.predicate.name for f in facts.values()}:
        current = {pk for pk in caller.current_facts if facts[pk].predicate.name == name}
        assert counts[name] == caller.observations(current), (name, caller.grants)
        context = _page(caller, f"registry/{name}/").context
        live = {
            pk
            for pk in caller.facts
            if facts[pk].predicate.name == name and facts[pk].status != FactStatus.RETRACTED
        }
        assert {f.pk for f in context["facts"]} == live, (name, caller.grants)
        assert context["fact_count"] == caller.observations(live)
