"""Each way an ingest can fail ends in a clear refusal or a failed run with its reason,
writes nothing, and can be retried."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from memory.domain.access import ContextAccess
from memory.models import Entity, Fact, Run, RunOutcome
from memory.services.ingest.run import run_create, run_execute, run_retry
from tests.api.conftest import assert_error
from tests.fake_llm import FakeLLM
from tests.ingest.conftest import extraction

TURN = "Maria Chen joined Globex as CFO."
ANSWER = extraction(
    entities=[{"name": "Maria Chen", "type": "person"}, {"name": "Globex", "type": "organisation"}],
    relations=[{"subject": "Maria Chen", "predicate": "works_at", "object": "Globex"}],
)


def _run(access: ContextAccess) -> Run:
    return run_execute(run_id=run_create(access=access, text=TURN, scope="s", infer="llm").pk)


def _assert_failed_cleanly(run: Run, *, reason: str) -> None:
    assert run.outcome == RunOutcome.FAILED
    assert reason in run.error, run.error
    assert run.input_text == TURN  # the input is kept for the retry
    assert Entity.objects.count() == 0 and Fact.objects.count() == 0


def _retry_succeeds(access: ContextAccess, fake_llm: FakeLLM, run: Run) -> None:
    fake_llm.reply_json(ANSWER)
    retry = run_execute(run_id=run_retry(access=access, run=run).pk)
    assert retry.outcome == RunOutcome.SUCCEEDED, retry.error
    assert retry.retry_of_id == run.pk
    assert Fact.objects.count() == 1


def test_the_model_times_out(access: ContextAccess, fake_llm: FakeLLM, settings: Any) -> None:
    settings.MEMORY_LLM_TIMEOUT_SECONDS = 0.3
    settings.MEMORY_LLM_MAX_RETRIES = 1
    fake_llm.reply_slow(1.5, ANSWER, times=2)
    run = _run(access)
    _assert_failed_cleanly(run, reason="the chat model did not answer within 0.3 s (tried 2 times)")
    assert run.summary == {"error_code": "llm_timeout"}
    assert run.prompt  # what was asked stays visible on the failed run
    _retry_succeeds(access, fake_llm, run)


def test_the_model_answers_500(access: ContextAccess, fake_llm: FakeLLM) -> None:
    fake_llm.reply_status(500, times=3)
    run = _run(access)
    _assert_failed_cleanly(run, reason="answered HTTP 500 (tried 3 times)")
    assert len(fake_llm.chat_requests) == 3  # two retries with backoff
    _retry_succeeds(access, fake_llm, run)


def test_a_rate_limit_is_retried_with_backoff(access: ContextAccess, fake_llm: FakeLLM) -> None:
    fake_llm.reply_status(429, times=2)
    fake_llm.reply_json(ANSWER)
    run = _run(access)
    assert run.outcome == RunOutcome.SUCCEEDED, run.error
    assert len(fake_llm.chat_requests) == 3


def test_the_model_answers_non_json_twice(access: ContextAccess, fake_llm: FakeLLM) -> None:
    fake_llm.reply_text("I cannot help with that.", times=2)
    run = _run(access)
    _assert_failed_cleanly(run, reason="the model's answer was not valid twice")
    assert "it is not JSON" in run.error
    assert run.raw_output.count("I cannot help with that.") == 2
    assert run.summary == {"error_code": "llm_invalid_output"}
    _retry_succeeds(access, fake_llm, run)


def test_the_model_returns_ten_thousand_entities(access: ContextAccess, fake_llm: FakeLLM) -> None:
    flood = extraction(entities=[{"name": f"Entity {i}", "type": "concept"} for i in range(10_000)])
    fake_llm.reply_json(flood, times=2)
    run = _run(access)
    _assert_failed_cleanly(run, reason="entities: List should have at most 200 items")
    # The repair request does not echo a megabyte answer back to the model.
    repair = fake_llm.chat_requests[1]["messages"]
    assert len(repair[2]["content"]) == 8_000
    _retry_succeeds(access, fake_llm, run)


def test_a_one_megabyte_turn_is_refused_before_any_run(
    api: APIClient, base: str, fake_llm: FakeLLM
) -> None:
    response = api.post(
        f"{base}/memories",
        {"text": "x" * (1024 * 1024), "scope": "s", "infer": "llm"},
        format="json",
    )
    assert_error(response, 413, "text_too_large")
    assert response.json()["error"]["details"] == {"bytes": 1024 * 1024, "limit": 256 * 1024}
    assert Run.objects.count() == 0
    assert fake_llm.chat_requests == []


@pytest.mark.parametrize("infer", ["llm", "preview"])
def test_no_chat_model_refuses_model_runs_with_503(
    api: APIClient, base: str, no_chat_model: None, infer: str
) -> None:
    response = api.post(
        f"{base}/memories", {"text": TURN, "scope": "s", "infer": infer}, format="json"
    )
    assert_error(response, 503, "chat_model_not_configured")
    assert "set MEMORY_CHAT_MODEL" in response.json()["error"]["message"]
    assert Run.objects.count() == 0


def test_without_a_chat_model_triples_and_plain_turns_still_work(
    api: APIClient, base: str, no_chat_model: None
) -> None:
    triples = api.post(
        f"{base}/memories",
        {"scope": "s", "infer": "triples", "triples": ANSWER, "wait": True},
        format="json",
    )
    assert triples.status_code == 200 and triples.json()["run"]["outcome"] == "succeeded"
    document = api.post(
        f"{base}/memories",
        {"text": TURN, "scope": "s", "infer": "none", "wait": True},
        format="json",
    )
    assert document.status_code == 200 and document.json()["result"]["turn"]["id"]
