"""The embedding drain is queued once per committed transaction, however many writers ask."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction
from django_tasks_db.models import DBTaskResult

from memory.infra.queueing import EMBEDDINGS_DRAIN_TASK, embeddings_drain_enqueue

pytestmark = pytest.mark.django_db


def _drains() -> int:
    return DBTaskResult.objects.filter(task_path=EMBEDDINGS_DRAIN_TASK).count()


def test_writers_asking_twice_in_a_transaction_register_one_hook(
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks(execute=True) as hooks, transaction.atomic():
        embeddings_drain_enqueue()
        with transaction.atomic():
            embeddings_drain_enqueue()
        embeddings_drain_enqueue()
    assert len(hooks) == 1
    assert _drains() == 1


def test_a_hook_rolled_back_with_its_savepoint_does_not_stand_for_a_later_one(
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks(execute=True) as hooks, transaction.atomic():
        try:
            with transaction.atomic():
                embeddings_drain_enqueue()
                raise RuntimeError("rolled back")
        except RuntimeError:
            pass
        embeddings_drain_enqueue()
    assert len(hooks) == 1
    assert _drains() == 1


def test_a_rolled_back_transaction_queues_nothing(
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks(execute=True) as hooks, transaction.atomic():
        embeddings_drain_enqueue()
        transaction.set_rollback(True)
    assert hooks == []
    assert _drains() == 0
