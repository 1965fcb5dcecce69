"""Writers take entity rows in one order, the drain never waits on a writer, and a
deadlock that still happens is run again inside the request (docs/decisions/0119).

The deadlocks here are real: a second session (``SideSession``) takes the rows in the
order the drain used to (its ``UPDATE … FROM unnest(…)`` followed no order), after the
request's session was seen waiting. PostgreSQL breaks the cycle by aborting the session
that waited first — the request's — after ``deadlock_timeout`` (1 s).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from rest_framework.test import APIClient

from memory.domain.access import ContextAccess
from memory.models import Entity, Fact
from memory.services.entities.writes import entity_upsert
from memory.services.facts.write import fact_write, fact_write_with_entities
from memory.services.vectors import embedding_backlog, embeddings_drain
from tests.api.conftest import assert_error
from tests.fake_llm import FakeLLM
from tests.reliability.conftest import HeldOpen, SideSession, Worker, in_thread, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

SCOPE = "org/acme"
# The drain's old statement: it locked the rows in whatever order its join produced.
UNORDERED_UPDATE = (
    "UPDATE memory_entity AS t SET updated_at = t.updated_at "
    "FROM unnest(%s::bigint[]) AS x(id) WHERE t.id = x.id"
)


def _person(access: ContextAccess, name: str) -> Entity:
    return entity_upsert(access=access, name=name, type="person", scope=SCOPE).entity


def _cross(side: SideSession, writer: Worker[Any], *, first: int, then: int) -> None:
    """Take ``first``; once ``writer`` waits for it (holding ``then``), take ``then``: a
    cycle. The writer waited first, so its deadlock check is the one that finds the cycle
    and PostgreSQL aborts the writer's transaction; this session gets both rows and
    commits."""
    side.execute("BEGIN")
    side.execute(UNORDERED_UPDATE, [[first]])
    _wait_for_writer_to_wait(side, writer)
    side.execute(UNORDERED_UPDATE, [[then]])  # returns once the deadlock is broken
    side.execute("COMMIT")


def _wait_for_writer_to_wait(side: SideSession, writer: Worker[Any]) -> None:
    """Until the writer waits on a row lock; a writer that ended instead says why."""
    wait_until(
        lambda: side.waiting_on_lock("FOR NO KEY UPDATE") or not writer.thread.is_alive(),
        "the writer to wait for a row lock",
    )
    if not writer.thread.is_alive():
        raise AssertionError(f"the writer ended without waiting: {writer.join()!r}")


def test_a_fact_write_broken_by_a_deadlock_is_run_again_inside_the_call(
    access: ContextAccess, side: SideSession, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="memory.infra.transactions")
    ada, grace = _person(access, "Ada Lovelace"), _person(access, "Grace Hopper")
    assert ada.pk < grace.pk
    writing = in_thread(
        lambda: fact_write_with_entities(
            access=access, subject=ada.pk, predicate="knows", object=grace.pk
        )
    )
    # The write locks Ada, then waits for Grace, whom the side session holds; the side
    # session then asks for Ada.
    _cross(side, writing, first=grace.pk, then=ada.pk)

    result = writing.join()
    assert result.outcome == "created"
    assert Fact.objects.filter(subject=ada, object=grace, predicate__name="knows").count() == 1
    broken = [r for r in caplog.records if "broken by concurrent writes (attempt 1)" in r.message]
    assert len(broken) == 1


def test_a_write_with_its_subject_above_its_object_takes_them_in_id_order(
    access: ContextAccess, side: SideSession, caplog: pytest.LogCaptureFixture
) -> None:
    """Named entities were locked as they were upserted, subject then object: a writer
    of the pair in id order (the side session here) crossed it."""
    caplog.set_level(logging.INFO, logger="memory.infra.transactions")
    low, high = _person(access, "Linus Low"), _person(access, "Hedy High")
    side.execute("BEGIN")
    side.execute("SELECT id FROM memory_entity WHERE id = %s FOR NO KEY UPDATE", [low.pk])
    writing = in_thread(
        lambda: fact_write_with_entities(
            access=access,
            subject={"name": "Hedy High", "type": "person"},
            predicate="knows",
            object={"name": "Linus Low", "type": "person"},
            scope=SCOPE,
        )
    )
    _wait_for_writer_to_wait(side, writing)  # for Linus, holding nothing
    side.execute("SELECT id FROM memory_entity WHERE id = %s FOR NO KEY UPDATE", [high.pk])
    side.execute("COMMIT")

    assert writing.join().fact.subject_id == high.pk
    assert not [r for r in caplog.records if "broken by concurrent writes" in r.message]


def test_retries_spent_answer_503_with_retry_after_and_store_nothing(
    settings: Any, access: ContextAccess, side: SideSession, api: APIClient, base: str
) -> None:
    settings.MEMORY_WRITE_ATTEMPTS = 1
    ada, grace = _person(access, "Ada Lovelace"), _person(access, "Grace Hopper")
    body = {"subject": ada.pk, "predicate": "knows", "object": grace.pk}
    posting = in_thread(lambda: api.post(f"{base}/facts", body, format="json"))
    _cross(side, posting, first=grace.pk, then=ada.pk)

    response = posting.join()
    assert_error(response, 503, "write_contention")
    assert response["Retry-After"] == "1"
    assert response.json()["error"]["details"] == {"retry_after_seconds": 1}
    assert not Fact.objects.filter(subject=ada).exists()
    assert api.post(f"{base}/facts", body, format="json").status_code == 201  # sent again


def test_a_deadlock_in_a_write_no_service_runs_again_answers_503_not_500(
    access: ContextAccess, side: SideSession, api: APIClient, base: str
) -> None:
    """A curator's edit runs its own transaction; the API maps what breaks it anyway."""
    ada, grace = _person(access, "Ada Lovelace"), _person(access, "Grace Hopper")
    fact = fact_write(access=access, subject=ada, predicate="knows", object=grace).fact
    editing = in_thread(
        lambda: api.patch(f"{base}/facts/{fact.pk}", {"confidence": 0.5}, format="json")
    )
    _cross(side, editing, first=grace.pk, then=ada.pk)

    response = editing.join()
    assert_error(response, 503, "write_contention")
    assert response["Retry-After"] == "1"
    fact.refresh_from_db()
    assert fact.confidence == 1.0


def test_the_drain_passes_over_an_entity_a_writer_holds_and_never_waits(
    access: ContextAccess, fake_llm: FakeLLM, side: SideSession
) -> None:
    held, free = _person(access, "Held Person"), _person(access, "Free Person")
    # A fact about the first is being written: its row stays locked until it commits.
    writer = HeldOpen(
        lambda: fact_write(
            access=access, subject=Entity.objects.get(pk=held.pk), predicate="nickname", value="H"
        )
    )
    try:
        report = in_thread(embeddings_drain).join(timeout=10)
        assert side.waiting_on_lock() == []
    finally:
        writer.commit()

    assert report.passed_over == 1 and not report.finished
    assert Entity.objects.get(pk=free.pk).embedding is not None
    assert Entity.objects.get(pk=held.pk).embedding is None
    # Released: the next drain (a later write's, or the watchdog) writes it.
    assert embeddings_drain().finished
    assert Entity.objects.get(pk=held.pk).embedding is not None
    assert embedding_backlog()["entities"] == 0
