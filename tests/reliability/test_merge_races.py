"""Merges racing writes into the same entities: whatever the interleaving, no fact,
identifier or conflict ends up on an entity that was merged away, and the merge can still
be undone (or says why not)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from django.db.models import Count, Q

from memory.domain.access import ContextAccess, system_access
from memory.models import (
    Conflict,
    Context,
    Entity,
    EntityIdentifier,
    Fact,
    FactStatus,
    Merge,
    Run,
    RunOutcome,
)
from memory.services.contexts import context_create
from memory.services.entities.writes import entity_upsert
from memory.services.facts.write import fact_write
from memory.services.ingest.run import run_create, run_execute
from memory.services.merges.merge import entity_merge, merge_undo
from memory.services.registry.predicates import predicate_register
from tests.reliability.conftest import HeldOpen, SideSession, in_thread

pytestmark = pytest.mark.django_db(transaction=True)

SCOPE = "org/acme"


def _access(context: Context) -> ContextAccess:
    # A fresh Context row per thread: model instances are not shared across threads.
    return system_access(Context.objects.get(pk=context.pk))


def _world(tag: str = "") -> dict[str, Any]:
    context = context_create(slug=f"merge-race{tag}", name="Race")
    access = system_access(context)
    predicate_register(access=access, name="primary_employer", kind="relation", single_valued=True)

    def upsert(name: str, type_: str, **kw: Any) -> Entity:
        return entity_upsert(access=access, name=name, type=type_, scope=SCOPE, **kw).entity

    a = upsert(f"Acme Logistics{tag}", "organisation")
    b = upsert(
        f"Acme Freight{tag}",
        "organisation",
        aliases=[f"Acme Haulage{tag}"],
        identifiers=[{"kind": "domain", "value": f"acme{tag}.io"}],
    )
    sam = upsert(f"Sam{tag}", "person")
    fact_write(access=access, subject=sam, predicate="primary_employer", object=b)
    fact_write(access=access, subject=b, predicate="industry", value="logistics")
    return {"context": context, "access": access, "a": a, "b": b, "sam": sam}


def _merge(context: Context, a: Entity, b: Entity) -> Merge:
    return entity_merge(access=_access(context), survivor_id=a.pk, merged_ids=[b.pk])


def _ingest(context: Context, triples: dict[str, Any]) -> Any:
    access = _access(context)
    run = run_create(access=access, text="", scope=SCOPE, infer="triples", triples=triples)
    return run_execute(run_id=run.pk)


def assert_nothing_on_merged_entities(context: Context) -> None:
    merged = Entity.objects.filter(context=context, merged_into__isnull=False)
    stray = Fact.objects.filter(Q(subject__in=merged) | Q(object__in=merged))
    assert not stray.exists(), list(stray.values("id", "subject_id", "object_id", "status"))
    assert not EntityIdentifier.objects.filter(entity__in=merged).exists()
    assert not Conflict.objects.filter(subject__in=merged, status="open").exists()
    doubled = (
        Fact.objects.filter(context=context, status=FactStatus.CURRENT, single_valued=True)
        .values("subject_id", "predicate_id", "scope")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
    )
    assert not doubled.exists(), list(doubled)


# --- deterministic interleavings: the merge holds its locks while a writer arrives ----------


def test_an_ingest_planned_before_the_merge_committed_writes_to_the_survivor(
    side: SideSession,
) -> None:
    w = _world()
    triples = {
        "entities": [
            {"name": "Dana", "type": "person"},
            {"name": "Acme web", "type": "organisation",
             "identifiers": [{"kind": "domain", "value": "acme.io"}]},
        ],
        "relations": [
            {"subject": "Alex", "subject_type": "person", "predicate": "works_at",
             "object": "Acme Freight", "object_type": "organisation"},
            {"subject": "Dana", "predicate": "works_at", "object": "Acme web"},
            {"subject": "Kim", "subject_type": "person", "predicate": "works_at",
             "object": "Acme Haulage", "object_type": "organisation"},
        ],
        "attributes": [
            {"subject": "Acme Haulage", "subject_type": "organisation", "key": "headcount",
             "value": 120},
        ],
    }  # fmt: skip
    merge = HeldOpen(lambda: _merge(w["context"], w["a"], w["b"]))
    ingest = in_thread(lambda: _ingest(w["context"], triples))
    side.wait_for_lock_wait("FOR NO KEY UPDATE")  # the run, planned on B, waits for B's row
    record = merge.commit()
    run = ingest.join()

    assert run.outcome == RunOutcome.SUCCEEDED, run.error
    assert_nothing_on_merged_entities(w["context"])
    written = Fact.objects.filter(run=run)
    assert written.count() == 4
    assert set(written.filter(kind="relation").values_list("object_id", flat=True)) == {w["a"].pk}
    assert written.get(kind="attribute").subject_id == w["a"].pk

    undone = merge_undo(access=w["access"], merge_id=record.pk)
    assert "4 facts written after the merge stay with" in undone.summary["undo_note"]
    assert_nothing_on_merged_entities(w["context"])
    assert Fact.objects.get(predicate__name="primary_employer").object_id == w["b"].pk


def test_a_direct_fact_write_holding_stale_entities_follows_the_merge(
    side: SideSession,
) -> None:
    w = _world()
    stale_b = Entity.objects.get(pk=w["b"].pk)  # loaded before the merge, as an API view would
    alex = entity_upsert(access=w["access"], name="Alex", type="person", scope=SCOPE).entity
    merge = HeldOpen(lambda: _merge(w["context"], w["a"], w["b"]))
    as_subject = in_thread(
        lambda: fact_write(
            access=_access(w["context"]), subject=stale_b, predicate="industry", value="freight"
        )
    )
    side.wait_for_lock_wait("FOR NO KEY UPDATE")
    as_object = in_thread(
        lambda: fact_write(
            access=_access(w["context"]), subject=alex, predicate="works_at", object=stale_b
        )
    )
    side.wait_for_lock_wait("FOR NO KEY UPDATE", sessions=2)  # both queue behind the merge's locks
    merge.commit()
    assert as_subject.join().fact.subject_id == w["a"].pk
    assert as_object.join().fact.object_id == w["a"].pk
    assert_nothing_on_merged_entities(w["context"])


def test_a_write_to_a_fact_pointing_at_the_merged_entity_does_not_undo_the_move(
    side: SideSession,
) -> None:
    w = _world()
    merge = HeldOpen(lambda: _merge(w["context"], w["a"], w["b"]))
    # Sam's employer changes; the run never names B, but the fact it supersedes points at B.
    triples = {
        "relations": [
            {"subject": "Sam", "subject_type": "person", "predicate": "primary_employer",
             "object": "Globex", "object_type": "organisation"},
        ]
    }  # fmt: skip
    ingest = in_thread(lambda: _ingest(w["context"], triples))
    side.wait_for_lock_wait("")
    merge.commit()
    run = ingest.join()
    assert run.outcome == RunOutcome.SUCCEEDED, run.error
    assert_nothing_on_merged_entities(w["context"])
    old = Fact.objects.get(predicate__name="primary_employer", status=FactStatus.SUPERSEDED)
    assert old.object_id == w["a"].pk


# --- real races: a barrier, several rounds ----------------------------------------------

ROUNDS = 4


def test_merges_racing_ingests_and_fact_writes_leave_nothing_on_the_merged_entity(
    transactional_db: None,
) -> None:
    for round_ in range(ROUNDS):
        _race_round(round_)


def _race_round(round_: int) -> None:
    """B is merged into A while three runs name B (by name, alias, identifier), a fourth
    supersedes a fact pointing at B, and the facts API writes with B loaded beforehand."""
    tag = f"-r{round_}"
    w = _world(tag)
    context, a, b = w["context"], w["a"], w["b"]
    jo = entity_upsert(access=w["access"], name=f"Jo{tag}", type="person", scope=SCOPE).entity
    stale_b = Entity.objects.get(pk=b.pk)

    def ingest(*relations: dict[str, Any], **lists: Any) -> Callable[[], Any]:
        return lambda: _ingest(context, {"relations": list(relations), **lists})

    person = {"subject_type": "person", "object_type": "organisation"}
    jobs = [
        lambda: _merge(context, a, b),
        ingest(  # B by name, as subject and object
            {"subject": f"Alex{tag}", "predicate": "works_at", "object": f"Acme Freight{tag}",
             **person},
            attributes=[{"subject": f"Acme Freight{tag}", "subject_type": "organisation",
                         "key": "headcount", "value": round_}],
        ),
        ingest(  # B by alias
            {"subject": f"Kim{tag}", "predicate": "works_at", "object": f"Acme Haulage{tag}",
             **person}
        ),
        ingest(  # B by identifier
            {"subject": f"Dana{tag}", "predicate": "works_at", "object": f"Acme site{tag}",
             "subject_type": "person"},
            entities=[{"name": f"Acme site{tag}", "type": "organisation",
                       "identifiers": [{"kind": "domain", "value": f"acme{tag}.io"}]}],
        ),
        ingest(  # supersedes Sam's fact pointing at B, without naming B
            {"subject": f"Sam{tag}", "predicate": "primary_employer", "object": f"Globex{tag}",
             **person}
        ),
        lambda: fact_write(  # the facts API, holding B as it was loaded before the merge
            access=_access(context), subject=stale_b, predicate="industry", value="freight"
        ),
        lambda: fact_write(
            access=_access(context), subject=jo, predicate="works_at", object=stale_b
        ),
    ]  # fmt: skip
    results = _race(jobs)

    runs = [r for r in results if isinstance(r, Run)]
    assert [r.outcome for r in runs] == [RunOutcome.SUCCEEDED] * 4, [r.error for r in runs]
    assert_nothing_on_merged_entities(context)
    relations = Fact.objects.filter(context=context, predicate__name="works_at")
    assert set(relations.values_list("object_id", flat=True)) == {a.pk}
    assert Fact.objects.get(context=context, predicate__name="headcount").subject_id == a.pk

    merge_undo(access=w["access"], merge_id=results[0].pk)
    assert_nothing_on_merged_entities(context)
    assert Entity.objects.get(pk=b.pk).merged_into_id is None
    # What the merge moved goes back; what was written after it stays with the survivor.
    employer = Fact.objects.get(
        context=context, predicate__name="primary_employer", status=FactStatus.SUPERSEDED
    )
    assert employer.object_id == b.pk
    industry = Fact.objects.get(context=context, predicate__name="industry", value="logistics")
    assert industry.subject_id == b.pk


def _race(jobs: list[Any]) -> list[Any]:
    barrier = threading.Barrier(len(jobs))

    def start(job: Any) -> Any:
        barrier.wait()
        return job()

    workers = [in_thread(partial(start, job)) for job in jobs]
    return [worker.join(60) for worker in workers]


# --- undo and merge rules the races exposed -------------------------------------------------


@pytest.mark.django_db  # no threads here: a rolled-back transaction is enough
def test_undo_keeps_a_later_write_that_superseded_a_moved_fact() -> None:
    w = _world()
    record = _merge(w["context"], w["a"], w["b"])
    globex = entity_upsert(access=w["access"], name="Globex", type="organisation", scope=SCOPE)
    later = fact_write(
        access=w["access"], subject=w["sam"], predicate="primary_employer", object=globex.entity
    )
    assert later.outcome == "superseded"

    undone = merge_undo(access=w["access"], merge_id=record.pk)

    # Restoring the moved fact's "current" would bring back a replaced employer (and two
    # current values in a single-valued slot); it goes back to B, still superseded.
    moved = Fact.objects.get(pk=later.superseded.pk)  # type: ignore[union-attr]
    assert (moved.object_id, moved.status) == (w["b"].pk, FactStatus.SUPERSEDED)
    assert Fact.objects.get(pk=later.fact.pk).status == FactStatus.CURRENT
    assert "1 moved facts changed status after the merge" in undone.summary["undo_note"]
    assert_nothing_on_merged_entities(w["context"])


@pytest.mark.django_db  # no threads here: a rolled-back transaction is enough
def test_a_merge_folds_only_facts_of_the_same_subject() -> None:
    w = _world()
    access, a, b, sam = w["access"], w["a"], w["b"], w["sam"]
    predicate_register(access=access, name="chief_partner", kind="relation", single_valued=True)
    # The survivor's own link to B, Sam's link to B: equal once B is A, but not the same
    # fact (different subjects). Sam's links to A and to B are the same fact after the merge.
    own = fact_write(access=access, subject=a, predicate="partner_of", object=b).fact
    sams = fact_write(access=access, subject=sam, predicate="partner_of", object=b).fact
    sams_a = fact_write(access=access, subject=sam, predicate="partner_of", object=a).fact
    kim = entity_upsert(access=access, name="Kim", type="person", scope=SCOPE).entity
    fact_write(access=access, subject=a, predicate="chief_partner", object=sam)
    kims = fact_write(access=access, subject=kim, predicate="chief_partner", object=b).fact

    record = _merge(w["context"], a, b)

    status = dict(Fact.objects.values_list("pk", "status"))
    assert status[own.pk] == FactStatus.RETRACTED  # A → A: a self-loop
    assert status[sams.pk] == FactStatus.SUPERSEDED  # folded into Sam → A …
    assert Fact.objects.get(pk=sams_a.pk).observed_count == 2  # … which counts it
    assert status[kims.pk] == FactStatus.CURRENT  # Kim's one value, not A's: no contest
    assert not Conflict.objects.exists()
    assert_nothing_on_merged_entities(w["context"])

    merge_undo(access=access, merge_id=record.pk)
    assert Fact.objects.get(pk=sams_a.pk).observed_count == 1
    assert dict(Fact.objects.values_list("pk", "status")) | {} == {
        **status,
        own.pk: "current",
        sams.pk: "current",
    }
