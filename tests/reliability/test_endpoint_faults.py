"""The model endpoint down (connection refused) or hanging (accepts, never answers): the run
fails with its reason within the client's timeout, writes nothing, keeps its input, and a
retry once the endpoint is back succeeds. Both the chat model (an ``llm`` run) and the
embedder (a ``triples`` run whose entity resolution compares embeddings) are covered."""

from __future__ import annotations

import time
from typing import Any

import pytest

from memory.domain.access import ContextAccess
from memory.models import Entity, Fact, Run, RunOutcome
from memory.services.ingest.run import run_create, run_execute, run_retry
from tests.fake_llm import FakeLLM, fake_embedding
from tests.ingest.conftest import extraction
from tests.reliability.conftest import ENDPOINT_TIMEOUT, graph_footprint
from tests.reliability.endpoint import FlakyEndpoint

TURN = "Maria Chen joined Globex as CFO."
ANSWER = extraction(
    entities=[
        {"name": "Maria Chen", "type": "person",
         "identifiers": [{"kind": "email", "value": "maria@globex.example"}]},
        {"name": "Globex", "type": "organisation"},
    ],
    relations=[{"subject": "Maria Chen", "predicate": "works_at", "object": "Globex"}],
    attributes=[{"subject": "Maria Chen", "key": "current_title", "value": "CFO"}],
)  # fmt: skip
TIMEOUT = ENDPOINT_TIMEOUT


def _execute(run: Run) -> tuple[Run, float]:
    started = time.monotonic()
    return run_execute(run_id=run.pk), time.monotonic() - started


def _assert_failed_cleanly(
    run: Run, *, text: str, code: str, reason: str, before: dict[str, int]
) -> None:
    assert run.outcome == RunOutcome.FAILED
    assert run.summary == {"error_code": code}
    assert reason in run.error, run.error
    assert run.input_text == text  # kept for the retry
    assert graph_footprint() == before  # nothing of the run was stored


def _reason(state: str, what: str, url: str) -> tuple[str, str]:
    if what == "chat":
        if state == "down":
            return "llm_unreachable", f"could not reach the chat model at {url} (tried 2 times)"
        return "llm_timeout", f"did not answer within {TIMEOUT:g} s (tried 2 times)"
    if state == "down":
        return "embedding_unavailable", "could not reach the embedding model flaky-embed-"
    return "embedding_unavailable", f"did not answer within {TIMEOUT:g} s (tried 2 times)"


@pytest.mark.parametrize("state", ["down", "hang"])
def test_the_chat_endpoint_failing_fails_the_run_and_a_retry_after_recovery_succeeds(
    access: ContextAccess, fake_llm: FakeLLM, flaky: FlakyEndpoint, state: str
) -> None:
    flaky.set(state)  # type: ignore[arg-type]
    before = graph_footprint()
    run, took = _execute(run_create(access=access, text=TURN, scope="s", infer="llm"))

    code, reason = _reason(state, "chat", flaky.base_url)
    _assert_failed_cleanly(run, text=TURN, code=code, reason=reason, before=before)
    assert took < 10 * TIMEOUT + 5  # bounded by the client's timeout and retries
    assert run.prompt  # what was asked stays visible on the failed run
    assert fake_llm.chat_requests == []  # nothing ever reached the model

    flaky.set("up")
    fake_llm.reply_json(ANSWER)
    retry = run_execute(run_id=run_retry(access=access, run=run).pk)
    assert retry.outcome == RunOutcome.SUCCEEDED, retry.error
    assert retry.retry_of_id == run.pk
    assert Fact.objects.filter(run=retry).count() == 2
    assert Run.objects.get(pk=run.pk).outcome == RunOutcome.FAILED  # history stays


@pytest.mark.parametrize("state", ["down", "hang"])
def test_the_embedding_endpoint_failing_fails_a_triples_run_and_a_retry_succeeds(
    access: ContextAccess, fake_llm: FakeLLM, flaky: FlakyEndpoint, settings: Any, state: str
) -> None:
    # An embedded organisation in scope: resolving "Globex" compares embeddings.
    Entity.objects.create(
        context=access.context, scope="s", name="Initech", type="organisation",
        normalized_key="initech", embedding=fake_embedding("Initech (organisation)"),
        embedding_model=settings.MEMORY_EMBED_MODEL,
    )  # fmt: skip
    triples = ANSWER
    flaky.set(state)  # type: ignore[arg-type]
    before = graph_footprint()
    run, took = _execute(
        run_create(access=access, text="", scope="s", infer="triples", triples=triples)
    )

    code, reason = _reason(state, "embeddings", flaky.base_url)
    _assert_failed_cleanly(run, text="", code=code, reason=reason, before=before)
    assert run.input_payload["triples"] == triples
    assert took < 10 * TIMEOUT + 5

    flaky.set("up")
    retry = run_execute(run_id=run_retry(access=access, run=run).pk)
    assert retry.outcome == RunOutcome.SUCCEEDED, retry.error
    assert Fact.objects.filter(run=retry).count() == 2
    assert fake_llm.embedding_requests  # resolution did compare embeddings this time
