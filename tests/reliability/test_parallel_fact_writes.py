"""Fact writes over real HTTP from several threads while a real ``db_worker`` process
drains the embeddings of the entities they create: every answer is a success, none a
5xx, and the worker's drains neither fail nor leave rows behind (docs/decisions/0119)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from memory.domain.access import ContextAccess
from memory.infra.queueing import EMBEDDINGS_DRAIN_TASK
from memory.models import Entity, Role
from memory.services.entities.writes import entity_upsert
from memory.services.tokens import token_issue
from memory.services.vectors import embedding_backlog
from tests.fake_llm import FakeLLM
from tests.ingest.test_worker import start_worker  # noqa: F401  (the worker process fixture)
from tests.reliability.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 6
WRITES_PER_THREAD = 20
PEOPLE = 8
RECENT = 6  # newcomers a write picks from: the ones the worker is embedding right now


class Pool:
    """The people the threads write about: the first ones, and each newcomer a write
    created (which the worker embeds while later writes lock it)."""

    def __init__(self, people: list[int]) -> None:
        self.people = list(people)
        self.lock = threading.Lock()

    def add(self, entity_id: int) -> None:
        with self.lock:
            self.people.append(entity_id)

    def two(self, chooser: random.Random) -> list[int]:
        with self.lock:
            recent = self.people[-RECENT:]
            return chooser.sample(sorted({*recent, *chooser.sample(self.people, 2)}), 2)


def _writes(url: str, token: str, pool: Pool, seed: int) -> list[tuple[int, str]]:
    """One thread's requests: relations between people by id (in either order, newcomers
    among them) and relations from a new person (by name) to one of them."""
    chooser = random.Random(seed)
    answers = []
    with httpx.Client(base_url=url, headers={"Authorization": f"Token {token}"}) as client:
        for n in range(WRITES_PER_THREAD):
            subject: Any
            subject, target = pool.two(chooser)
            if n % 2:
                subject = {"name": f"Newcomer {seed}-{n}", "type": "person"}
            body = {"subject": subject, "predicate": "knows", "object": target}
            response = client.post("/facts", json={**body, "scope": "org/acme"}, timeout=60)
            answers.append((response.status_code, response.text[:300]))
            if response.status_code == 201 and isinstance(subject, dict):
                pool.add(response.json()["fact"]["subject"]["id"])
    return answers


def test_parallel_fact_writes_while_the_worker_drains_answer_no_5xx(
    live_server: Any,
    access: ContextAccess,
    make_user: Callable[..., Any],
    fake_llm: FakeLLM,
    start_worker: Callable[[], Any],  # noqa: F811
) -> None:
    people = [
        entity_upsert(access=access, name=f"Person {n}", type="person", scope="org/acme").entity.pk
        for n in range(PEOPLE)
    ]  # their vectors are left to the worker too: its drain meets the writers' locks
    user = make_user(context=access.context, role=Role.ADMIN)
    token = token_issue(user=user, context=access.context, grants=["read,write:*"]).raw
    url = f"{live_server.url}/api/v1/contexts/{access.context.slug}"
    start_worker()

    answers: list[tuple[int, str]] = []
    lock = threading.Lock()
    pool = Pool(people)

    def run(seed: int) -> None:
        mine = _writes(url, token, pool, seed)
        with lock:
            answers.extend(mine)

    threads = [threading.Thread(target=run, args=(seed,)) for seed in range(THREADS)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert time.monotonic() - started < 300

    writes_ended = timezone.now()

    assert len(answers) == THREADS * WRITES_PER_THREAD
    failed = [a for a in answers if a[0] not in (200, 201)]
    assert failed == []
    # The worker embeds every entity the writes left without a vector, its drains
    # passing over rows the writers held and coming back for them.
    drains = DBTaskResult.objects.filter(task_path=EMBEDDINGS_DRAIN_TASK)

    def drained() -> bool:
        idle = not drains.filter(status="RUNNING").exists()
        return idle and embedding_backlog()["entities"] == 0

    wait_until(drained, "the worker to drain", timeout=90)
    assert Entity.objects.filter(embedding__isnull=True, merged_into__isnull=True).count() == 0
    assert not drains.filter(status="FAILED").exists()
    # ... and it drained while the writes ran, not only after them.
    assert drains.filter(status="SUCCESSFUL", started_at__lt=writes_ended).exists()
