"""The ingest task on a real ``manage.py db_worker`` process, including one that dies."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection
from rest_framework.test import APIClient

from memory.models import Fact, Run, RunOutcome
from memory.services.ingest.run import runs_recover_stale
from tests.fake_llm import FakeLLM
from tests.ingest.conftest import extraction

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
ANSWER = extraction(
    entities=[{"name": "Alex", "type": "person"}, {"name": "Acme", "type": "organisation"}],
    relations=[{"subject": "Alex", "predicate": "works_at", "object": "Acme"}],
)


def _database_url() -> str:
    """The test database, as a URL for the worker process (memory/settings.py reads it)."""
    db = connection.settings_dict
    user = quote(str(db["USER"] or ""), safe="")
    password = f":{quote(str(db['PASSWORD']), safe='')}" if db["PASSWORD"] else ""
    host = str(db["HOST"] or "")
    if host.startswith("/"):  # a Unix socket folder (the embedded server)
        return f"postgresql://{user}{password}@/{db['NAME']}?host={quote(host, safe='')}"
    return f"postgresql://{user}{password}@{host}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def start_worker(fake_llm: FakeLLM) -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    workers: list[subprocess.Popen[bytes]] = []
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "OPENAI_BASE_URL": settings.OPENAI_BASE_URL,
        "OPENAI_API_KEY": "test-key",
        "MEMORY_CHAT_MODEL": settings.MEMORY_CHAT_MODEL,
        "MEMORY_EMBED_MODEL": "openai:fake-embed",
        "MEMORY_LLM_TIMEOUT_SECONDS": "60",
    }

    def start() -> subprocess.Popen[bytes]:
        worker = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "db_worker",
                "--interval",
                "0.1",
                "--no-startup-delay",
                "--no-reload",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        workers.append(worker)
        return worker

    yield start
    for worker in workers:
        if worker.poll() is None:
            worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)


def _wait_for(predicate: Callable[[], Any], what: str, timeout: float = 45.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _outcome(run_id: int) -> str:
    return Run.objects.get(pk=run_id).outcome


def test_the_worker_executes_a_queued_memory(
    api: APIClient, base: str, fake_llm: FakeLLM, start_worker: Callable[[], Any]
) -> None:
    start_worker()
    fake_llm.reply_json(ANSWER)
    response = api.post(
        f"{base}/memories", {"text": "Alex works at Acme.", "scope": "s"}, format="json"
    )
    assert response.status_code == 202
    run_id = response.json()["run"]["id"]
    _wait_for(lambda: _outcome(run_id) == RunOutcome.SUCCEEDED, "the worker to finish the run")
    run = api.get(f"{base}/runs/{run_id}").json()
    assert run["attempts"] == 1
    assert re.fullmatch(r".+:\d+", run["worker"])  # host:pid of the worker process
    assert Fact.objects.filter(run_id=run_id).count() == 1


def test_a_run_whose_worker_dies_fails_with_its_reason_and_retry_works(
    api: APIClient, base: str, fake_llm: FakeLLM, start_worker: Callable[[], Any]
) -> None:
    worker = start_worker()
    fake_llm.reply_slow(60, ANSWER)  # the model is thinking when the worker dies
    response = api.post(
        f"{base}/memories", {"text": "Alex works at Acme.", "scope": "s"}, format="json"
    )
    run_id = response.json()["run"]["id"]
    _wait_for(lambda: fake_llm.chat_requests, "the run to reach the model")
    assert _outcome(run_id) == RunOutcome.RUNNING
    assert runs_recover_stale(run_ids=[run_id]) == 0  # alive: its worker holds the run
    worker.send_signal(signal.SIGKILL)
    worker.wait(timeout=10)
    assert _outcome(run_id) == RunOutcome.RUNNING  # nobody has noticed yet

    # A new worker notices when it picks up its next ingest task.
    start_worker()
    fake_llm.reply_json(ANSWER)
    other = api.post(
        f"{base}/memories", {"text": "Dana works at Globex.", "scope": "s"}, format="json"
    )
    _wait_for(lambda: _outcome(other.json()["run"]["id"]) == RunOutcome.SUCCEEDED, "the second run")
    dead = Run.objects.get(pk=run_id)
    assert dead.outcome == RunOutcome.FAILED
    assert "stopped before it finished" in dead.error and "nothing of it was stored" in dead.error
    assert dead.summary == {"error_code": "worker_lost"}
    assert dead.input_text == "Alex works at Acme."
    assert not Fact.objects.filter(run_id=run_id).exists()

    fake_llm.reply_json(ANSWER)
    retried = api.post(f"{base}/runs/{run_id}/retry", {"wait": True}, format="json")
    assert retried.status_code == 200, retried.content
    assert retried.json()["run"]["outcome"] == "succeeded"
    assert retried.json()["run"]["retry_of"] == run_id
