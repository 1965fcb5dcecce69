"""Writers that lock entities do not stop other writers from *referring* to them.

Every writer serializes on the entities it changes (``entities_lock_live``, merges,
curator edits), in id order. But writes also insert rows that only point at other
entities — a duplicate candidate at its partner, an identifier, a fact at its object —
and PostgreSQL checks such a foreign key with a ``FOR KEY SHARE`` lock on the row pointed
at. That lock waits for a ``FOR UPDATE`` and not for a ``FOR NO KEY UPDATE``. With
``FOR UPDATE``, two ingest runs that each held their own entities and each stored a
candidate pointing at the other's crossed and one was aborted as a deadlock (the
load_mixed smoke, docs/decisions/0056 and 0058)."""

from __future__ import annotations

from typing import Any

import pytest

from memory.domain.access import system_access
from memory.models import Context, DuplicateCandidate, Entity, Fact, Merge, RunOutcome
from memory.services.contexts import context_create
from memory.services.entities.writes import entity_upsert
from memory.services.facts.write import fact_write
from memory.services.ingest.run import run_create, run_execute
from memory.services.merges.merge import entity_merge
from tests.reliability.conftest import HeldOpen, SideSession, in_thread

pytestmark = pytest.mark.django_db(transaction=True)

SCOPE = "org/acme"
# Long enough for a blocked writer to be seen blocked; a free one takes milliseconds.
BLOCKED_AFTER_SECONDS = 5.0


def _upsert(context: Context, name: str, scope: str = SCOPE, **kw: Any) -> Entity:
    access = system_access(Context.objects.get(pk=context.pk))
    return entity_upsert(access=access, name=name, type="person", scope=scope, **kw).entity


def _pair_exists(a: Entity, b: Entity) -> bool:
    low, high = sorted((a.pk, b.pk))
    return DuplicateCandidate.objects.filter(entity_a_id=low, entity_b_id=high).exists()


def _writing_a_fact_about(context: Context, entity: Entity, title: str) -> HeldOpen:
    """A fact about ``entity`` being written, its transaction (and the entity's row
    lock) held open until ``commit``."""
    return HeldOpen(
        lambda: fact_write(
            access=system_access(Context.objects.get(pk=context.pk)),
            subject=Entity.objects.get(pk=entity.pk),
            predicate="job_title",
            value=title,
        )
    )


@pytest.fixture
def context() -> Context:
    return context_create(slug="lock-order", name="Lock order")


def test_a_new_entity_pairs_with_one_whose_writer_has_not_committed(
    context: Context, side: SideSession
) -> None:
    marianne = _upsert(context, "Marianne Kowalczyk")
    # A fact about Marianne is being written: her row is locked until it commits.
    writer = _writing_a_fact_about(context, marianne, "Engineer")
    newcomer = in_thread(lambda: _upsert(context, "Marianne Kowalczik", scope="org/globex"))
    try:
        created = newcomer.join(timeout=BLOCKED_AFTER_SECONDS)
    finally:
        writer.commit()

    assert created is not None and _pair_exists(marianne, created)
    assert side.waiting_on_lock() == []


def test_an_ingest_run_pairs_a_new_entity_with_one_being_written(
    context: Context, side: SideSession
) -> None:
    # The run creates a person one slip from Ada while a fact about Ada is being
    # written: its candidate points at Ada's locked row.
    ada = _upsert(context, "Adalbert Wierzbicki")
    writer = _writing_a_fact_about(context, ada, "Pilot")
    run = run_create(
        access=system_access(context),
        text="",
        scope="org/globex",
        infer="triples",
        triples={"entities": [{"name": "Adalbert Wierzbicky", "type": "person"}]},
    )
    worker = in_thread(lambda: run_execute(run_id=run.pk))
    try:
        finished = worker.join(timeout=BLOCKED_AFTER_SECONDS)
    finally:
        writer.commit()

    assert finished is not None and finished.outcome == RunOutcome.SUCCEEDED, finished
    newcomer = Entity.objects.get(context=context, scope="org/globex")
    assert _pair_exists(ada, newcomer)
    assert Fact.objects.filter(subject=ada, value_text="Pilot").exists()


def test_a_merge_still_waits_for_a_writer_of_its_entities(
    context: Context, side: SideSession
) -> None:
    # Referring is free; changing is not: a merge of an entity being written queues.
    a = _upsert(context, "Cornelius Abernathy")
    b = _upsert(context, "Cornelius Abernathey", scope="org/globex")
    writer = _writing_a_fact_about(context, b, "Clerk")
    merge = in_thread(
        lambda: entity_merge(
            access=system_access(Context.objects.get(pk=context.pk)),
            survivor_id=a.pk,
            merged_ids=[b.pk],
        )
    )
    side.wait_for_lock_wait("FOR NO KEY UPDATE")
    writer.commit()
    record = merge.join()

    assert isinstance(record, Merge)
    assert Fact.objects.get(value_text="Clerk").subject_id == a.pk
