"""The embedding worker's drain: rows of many documents, runs and contexts embedded in
large batches, the backlog counted per target, and a killed worker's work picked up
again by the watchdog drain."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from typing import Any

import pytest
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from memory.domain.access import ContextAccess, system_access
from memory.infra.embeddings import EmbeddingUnavailable
from memory.models import Context
from memory.services.entities.writes import entity_upsert
from memory.services.facts.write import fact_write
from memory.services.ingest.documents import document_create
from memory.services.ingest.run import run_create
from memory.services.ingest.turns import turn_fields_clean
from memory.services.vectors import EMBED_BATCH, embedding_backlog, embeddings_drain
from memory.tasks import embeddings_drain_task
from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db

SENTENCE = "Refunds are granted within thirty days of purchase for unopened items. "


def _corpus(access: ContextAccess, *, documents: int, turns: int) -> None:
    """Documents (several chunks each), turns, two entities and a fact: written through
    the services, their vectors left to the worker."""
    for n in range(documents):
        document_create(
            access=access, title=f"Policy {n}", text=(SENTENCE * 60) + f"Case {n}.", scope="s"
        )
    for n in range(turns):
        run_create(
            access=access,
            text=f"turn {n} about refunds",
            scope="s",
            infer="none",
            turn=turn_fields_clean(thread=f"c{n % 3}"),
        )
    alex = entity_upsert(access=access, name="Alex", type="person", scope="s").entity
    acme = entity_upsert(access=access, name="Acme", type="organisation", scope="s").entity
    fact_write(access=access, subject=alex, predicate="works_at", object=acme)


def test_a_corpus_is_embedded_in_few_full_model_calls_across_documents_and_contexts(
    access: ContextAccess, make_context: Callable[..., Context], fake_llm: FakeLLM, settings: Any
) -> None:
    # A model name of its own: the process keeps one client per name, and this test counts
    # the requests that reach the scripted server.
    settings.MEMORY_EMBED_MODEL = "openai:fake-embed-drain"
    _corpus(access, documents=40, turns=150)
    _corpus(system_access(make_context("second")), documents=10, turns=30)
    waiting = embedding_backlog()
    total = sum(waiting.values())
    assert waiting["chunks"] > 40 and waiting["turns"] == 180 and total > 2 * EMBED_BATCH

    report = embeddings_drain()

    calls = [len(r["input"]) for r in fake_llm.embedding_requests]
    assert report.model_calls == len(calls) == math.ceil(total / EMBED_BATCH)
    assert all(size == EMBED_BATCH for size in calls[:-1])  # full batches, across documents
    assert report.total == total and report.finished and not report.skipped
    assert embedding_backlog() == dict.fromkeys(waiting, 0)
    assert embeddings_drain().model_calls == 0  # nothing left: no model call at all


def test_a_context_backlog_counts_only_what_the_reader_may_see(
    access: ContextAccess, fake_llm: FakeLLM
) -> None:
    _corpus(access, documents=1, turns=2)
    from memory.kernel.scopes import Grants

    outside = Grants.from_strings(["read:elsewhere/*"]).read_q()
    assert sum(embedding_backlog(context=access.context, visible=outside).values()) == 0
    assert embedding_backlog(context=access.context)["turns"] == 2


def test_a_killed_workers_embedding_work_is_picked_up_again_by_the_watchdog(
    access: ContextAccess, fake_llm: FakeLLM, settings: Any
) -> None:
    _corpus(access, documents=3, turns=10)
    before = embedding_backlog()
    # The worker starts the drain and dies in the middle of it (here: its embedder
    # vanishes, so nothing is written; a SIGKILL leaves the same state behind).
    settings.MEMORY_EMBED_MODEL = "openai:vanishing-embed"
    settings.OPENAI_BASE_URL = "http://127.0.0.1:9/v1"
    settings.MEMORY_LLM_MAX_RETRIES = 0
    with pytest.raises(EmbeddingUnavailable):
        embeddings_drain_task.call()
    assert embedding_backlog() == before
    [watchdog] = DBTaskResult.objects.filter(task_path=embeddings_drain_task.module_path)
    assert watchdog.status == "READY" and watchdog.run_after > timezone.now()

    # The restarted worker runs the watchdog once it is due: no ``manage.py reembed``.
    settings.MEMORY_EMBED_MODEL = "openai:fake-embed"
    settings.OPENAI_BASE_URL = fake_llm.base_url
    watchdog.run_after = timezone.now() - dt.timedelta(seconds=1)
    watchdog.save(update_fields=["run_after"])
    for due in DBTaskResult.objects.ready():
        due.task.call(*due.args_kwargs["args"], **due.args_kwargs["kwargs"])
    assert not any(embedding_backlog().values())


def test_writes_queue_one_drain_not_one_task_per_row(
    access: ContextAccess, fake_llm: FakeLLM, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        _corpus(access, documents=5, turns=5)
    queued = DBTaskResult.objects.filter(status="READY")
    assert [r.task_path for r in queued] == [embeddings_drain_task.module_path]


def test_a_bad_batch_size_is_refused(access: ContextAccess) -> None:
    from memory.kernel.errors import ValidationFailed

    with pytest.raises(ValidationFailed):
        embeddings_drain(batch_size=0)
