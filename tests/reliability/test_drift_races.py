"""Two curators resolving the same drift item with different actions, in both orders: the
first wins, the second gets a 409 ("drift_not_open"), the audit log holds exactly one event,
the graph shows exactly the winner's change, and undoing it lets the other action through.

The existing race (tests/api/test_curation_api.py) has both curators alias; here the
actions differ, and the order is forced: a second session holds the registry lock both
resolutions queue on, the test lets curator 1 queue, then curator 2, then releases.
"""

from __future__ import annotations

import threading
from functools import partial
from typing import Any

import pytest
from django.db import connections

from memory.domain.access import system_access
from memory.kernel.errors import Conflict as ConflictError
from memory.models import AuditEvent, Context, Fact, FactStatus, Predicate, PredicateAlias
from memory.services.contexts import context_create
from memory.services.drift.resolve import drift_resolve
from memory.services.entities.writes import entity_upsert
from memory.services.facts.write import fact_write
from memory.services.undo import audit_undo
from tests.reliability.conftest import SideSession, in_thread

pytestmark = pytest.mark.django_db(transaction=True)

# What each resolution records in the audit log (promote registers the predicate).
EVENTS = {"alias": "drift_alias", "reject": "drift_reject", "promote": "predicate_register"}
ACTIONS: dict[str, dict[str, Any]] = {
    "alias": {"action": "alias", "target": "works_at"},
    "reject": {"action": "reject"},
    "promote": {"action": "promote", "definition": {"description": "employed by the object"}},
}


def _drift(slug: str) -> Context:
    context = context_create(slug=slug, name="Race")
    access = system_access(context)
    acme = entity_upsert(access=access, name="Acme", type="organisation", scope="s").entity
    for name in ("Alex", "Sam"):
        person = entity_upsert(access=access, name=name, type="person", scope="s").entity
        fact_write(access=access, subject=person, predicate="works_for", object=acme)
    return context


def _resolve(context: Context, action: str) -> str:
    try:
        drift_resolve(
            access=system_access(Context.objects.get(pk=context.pk)),
            name="works_for",
            **ACTIONS[action],
        )
    except ConflictError as exc:
        return exc.code
    return "ok"


def _assert_only(context: Context, winner: str) -> None:
    events = AuditEvent.objects.filter(context=context, action__in=EVENTS.values())
    assert list(events.values_list("action", flat=True)) == [EVENTS[winner]]
    works_for = Predicate.objects.filter(context=context, name="works_for").first()
    facts = Fact.objects.filter(context=context)
    if winner == "alias":
        assert works_for is None
        assert PredicateAlias.objects.filter(predicate__name="works_at", alias="works_for")
        assert set(facts.values_list("predicate__name", "status")) == {("works_at", "current")}
    elif winner == "reject":
        assert works_for is not None and works_for.status == "rejected"
        assert set(facts.values_list("status", flat=True)) == {FactStatus.RETRACTED}
    else:
        assert works_for is not None and works_for.status == "registered"
        assert works_for.description == "employed by the object"
        assert set(facts.values_list("predicate__name", "status")) == {("works_for", "current")}


@pytest.mark.parametrize(
    "pair", [("alias", "reject"), ("alias", "promote")], ids=["alias-reject", "alias-promote"]
)
def test_two_curators_resolving_one_drift_item_in_either_order(
    side: SideSession, pair: tuple[str, str]
) -> None:
    for first, second in (pair, pair[::-1]):
        context = _drift(f"drift-{first}-{second}")
        side.execute("BEGIN")
        side.execute("SELECT 1 FROM memory_context WHERE id = %s FOR UPDATE", [context.pk])
        curator_1 = in_thread(partial(_resolve, context, first))
        side.wait_for_lock_wait(sessions=1)
        curator_2 = in_thread(partial(_resolve, context, second))
        side.wait_for_lock_wait(sessions=2)
        side.execute("ROLLBACK")

        assert (curator_1.join(), curator_2.join()) == ("ok", "drift_not_open"), first
        _assert_only(context, first)

        event = AuditEvent.objects.get(context=context, action=EVENTS[first])
        audit_undo(access=system_access(context), event_id=event.pk)
        assert Predicate.objects.get(context=context, name="works_for").status == "observed"
        assert _resolve(context, second) == "ok"  # the other curator's choice now goes through


def test_unordered_races_between_alias_and_reject_leave_one_event(transactional_db: None) -> None:
    for round_ in range(3):
        context = _drift(f"drift-round-{round_}")
        outcomes = _race(context, ["alias", "reject"])
        assert sorted(outcomes.values()) == ["drift_not_open", "ok"]
        _assert_only(context, next(a for a, o in outcomes.items() if o == "ok"))


def _race(context: Context, actions: list[str]) -> dict[str, str]:
    barrier = threading.Barrier(len(actions))
    outcomes: dict[str, str] = {}

    def resolve(action: str) -> None:
        try:
            barrier.wait()
            outcomes[action] = _resolve(context, action)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=resolve, args=(a,)) for a in actions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes
