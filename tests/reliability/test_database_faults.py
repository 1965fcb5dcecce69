"""The database connection drops while an ingest run is writing (its backend terminated
with ``pg_terminate_backend``) and the worker process is killed (SIGKILL) mid-write: the
run's transaction is rolled back whole, the run ends failed with its reason, keeps its
input, and its retry succeeds.

The hook that makes "mid-write" deterministic: a second session holds ``LOCK TABLE
memory_fact IN SHARE MODE``, which lets every read through but stops the run at its first
fact INSERT — after it has created its entities, identifiers and predicates in the same
transaction. The test sees the run's session wait there (``pg_stat_activity``) and strikes.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

import pytest
from django_tasks import TaskResultStatus
from django_tasks_db.models import DBTaskResult
from rest_framework.test import APIClient

from memory.domain.access import ContextAccess
from memory.models import Fact, Run, RunOutcome
from memory.services.ingest.run import run_create, run_execute, run_retry, runs_recover_stale
from tests.fake_llm import FakeLLM
from tests.ingest.conftest import extraction
from tests.ingest.test_worker import start_worker  # noqa: F401  (the worker process fixture)
from tests.reliability.conftest import SideSession, graph_footprint, in_thread, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

TURN = "Maria Chen joined Globex as CFO; she reports to Ivan Petrov."
ANSWER = extraction(
    entities=[
        {"name": "Maria Chen", "type": "person",
         "identifiers": [{"kind": "email", "value": "maria@globex.example"}]},
        {"name": "Globex", "type": "organisation", "aliases": ["Globex Corporation"]},
        {"name": "Ivan Petrov", "type": "person"},
    ],
    relations=[
        {"subject": "Maria Chen", "predicate": "works_at", "object": "Globex"},
        {"subject": "Maria Chen", "predicate": "reports_to", "object": "Ivan Petrov"},
    ],
    attributes=[
        {"subject": "Maria Chen", "key": "current_title", "value": "CFO"},
        {"subject": "Globex", "key": "founding_myth", "value": "a garage"},  # a new predicate
    ],
)  # fmt: skip
FACTS = 4


def _hold_fact_inserts(side: SideSession) -> None:
    side.execute("BEGIN")
    side.execute("LOCK TABLE memory_fact IN SHARE MODE")


def _assert_stopped_mid_write(side: SideSession, pid: int) -> None:
    """The run's session has inserted rows in this transaction (entities at least)."""
    wrote = side.execute(
        "SELECT relation::regclass::text FROM pg_locks WHERE pid = %s AND granted "
        "AND mode = 'RowExclusiveLock' AND relation = 'memory_entity'::regclass",
        [pid],
    )
    assert wrote, "the run was not inside its write transaction"


def test_a_dropped_database_connection_mid_write_stores_nothing_and_the_retry_works(
    access: ContextAccess, fake_llm: FakeLLM, side: SideSession
) -> None:
    fake_llm.reply_json(ANSWER)
    run = run_create(access=access, text=TURN, scope="s", infer="llm")
    before = graph_footprint()
    _hold_fact_inserts(side)
    executing = in_thread(lambda: run_execute(run_id=run.pk))
    pid = side.wait_for_lock_wait("INSERT INTO memory_fact")
    _assert_stopped_mid_write(side, pid)

    side.execute("SELECT pg_terminate_backend(%s)", [pid])
    side.execute("ROLLBACK")
    failed = executing.join()

    assert failed is not None and failed.outcome == RunOutcome.FAILED
    assert failed.summary == {"error_code": "database_error"}
    assert "terminating connection due to administrator command" in failed.error
    assert "rolled back, so nothing of it was stored" in failed.error
    assert failed.input_text == TURN and failed.raw_output  # input and model answer kept
    assert graph_footprint() == before

    fake_llm.reply_json(ANSWER)
    retry = run_execute(run_id=run_retry(access=access, run=failed).pk)
    assert retry.outcome == RunOutcome.SUCCEEDED, retry.error
    assert Fact.objects.filter(run=retry).count() == FACTS
    assert Fact.objects.count() == FACTS


def test_a_worker_killed_mid_write_stores_nothing_and_the_retry_works(
    api: APIClient,
    base: str,
    fake_llm: FakeLLM,
    side: SideSession,
    start_worker: Callable[[], Any],  # noqa: F811
) -> None:
    worker = start_worker()
    fake_llm.reply_json(ANSWER)
    before = graph_footprint()
    _hold_fact_inserts(side)
    response = api.post(f"{base}/memories", {"text": TURN, "scope": "s"}, format="json")
    assert response.status_code == 202
    run_id = response.json()["run"]["id"]
    pid = side.wait_for_lock_wait("INSERT INTO memory_fact")
    _assert_stopped_mid_write(side, pid)
    assert Run.objects.get(pk=run_id).outcome == RunOutcome.RUNNING

    worker.send_signal(signal.SIGKILL)
    worker.wait(timeout=10)
    side.execute("ROLLBACK")
    # Its session finishes the INSERT, finds no client to answer and ends, rolling back.
    wait_until(lambda: not side.alive(pid), "the dead worker's session to end")

    task = DBTaskResult.objects.get(task_path="memory.tasks.ingest_run_task")
    assert task.status == TaskResultStatus.RUNNING  # django-tasks-db leaves it so
    assert runs_recover_stale(run_ids=[run_id]) == 1
    dead = Run.objects.get(pk=run_id)
    assert dead.outcome == RunOutcome.FAILED
    assert dead.summary == {"error_code": "worker_lost"}
    assert "stopped before it finished" in dead.error and "nothing of it was stored" in dead.error
    assert dead.input_text == TURN
    assert graph_footprint() == before
    # Recovery failed the dead worker's task result too, with the run's reason.
    result = DBTaskResult.objects.get(pk=task.pk).task_result
    assert result.status == TaskResultStatus.FAILED and result.finished_at is not None
    [error] = result.errors
    assert error.exception_class_path == "memory.infra.queueing.WorkerLost"
    assert dead.error in error.traceback

    fake_llm.reply_json(ANSWER)
    retried = api.post(f"{base}/runs/{run_id}/retry", {"wait": True}, format="json")
    assert retried.status_code == 200, retried.content
    assert retried.json()["run"]["outcome"] == "succeeded"
    assert Fact.objects.count() == FACTS
