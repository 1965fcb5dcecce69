"""``extract: true`` on an item: its text becomes a turn for ingest, and overwriting or
deleting the item takes back what it extracted."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from memory.models import Fact, FactStatus, Item, Run, RunOutcome, Turn
from memory.services.ingest.run import run_execute
from tests.api.conftest import assert_error
from tests.fake_llm import FakeLLM
from tests.ingest import conftest as ingest

pytestmark = pytest.mark.django_db

# The scripted chat model's fixtures, as the ingest tests have them.
fake_llm_server = ingest.fake_llm_server
fake_llm = ingest.fake_llm
no_chat_model = ingest.no_chat_model
extraction = ingest.extraction

ANSWER = extraction(
    entities=[{"name": "Maria Chen", "type": "person"}, {"name": "Globex", "type": "organisation"}],
    relations=[{"subject": "Maria Chen", "predicate": "works_at", "object": "Globex"}],
)


def put(api: APIClient, base: str, value: Any, **extra: Any) -> Any:
    op = {"op": "put", "namespace": ["org", "maria"], "key": "bio", "value": value, **extra}
    return api.post(f"{base}/items/batch", {"ops": [op]}, format="json")


def extracted(api: APIClient, base: str, fake_llm: FakeLLM) -> Item:
    fake_llm.reply_json(ANSWER)
    response = put(api, base, {"text": "Maria Chen works at Globex."}, extract=True)
    assert response.status_code == 200, response.content
    item = Item.objects.get()
    assert item.run is not None
    assert run_execute(run_id=item.run.pk).outcome == RunOutcome.SUCCEEDED
    return item


def test_an_extracted_item_is_a_turn_whose_facts_point_back_to_it(
    api: APIClient, base: str, fake_llm: FakeLLM
) -> None:
    item = extracted(api, base, fake_llm)
    turn = Turn.objects.get()
    assert turn.text == "Maria Chen works at Globex." and turn.ref == "item:org/maria#bio"
    fact = Fact.objects.get()
    assert fact.turn_id == turn.pk and fact.status == FactStatus.CURRENT
    assert fact.scope == "org/maria"
    assert item.value == {"text": "Maria Chen works at Globex."}  # the item stays exact


# Not indexed, the new value would be a plain write, but not over an item with a run.
@pytest.mark.parametrize("index", [{}, {"index": False}])
def test_overwriting_the_item_retracts_what_it_extracted(
    api: APIClient, base: str, fake_llm: FakeLLM, index: dict[str, Any]
) -> None:
    extracted(api, base, fake_llm)
    assert put(api, base, {"text": "Maria left."}, **index).status_code == 200
    assert not Fact.objects.filter(status=FactStatus.CURRENT).exists()
    assert Run.objects.get().retracted_at is not None
    assert Item.objects.get().run is None


def test_deleting_the_item_retracts_what_it_extracted(
    api: APIClient, base: str, fake_llm: FakeLLM
) -> None:
    extracted(api, base, fake_llm)
    assert put(api, base, None).status_code == 200
    assert not Fact.objects.filter(status=FactStatus.CURRENT).exists()
    assert Run.objects.get().retracted_at is not None
    assert not Item.objects.exists()


def test_a_run_not_yet_executed_is_failed_when_its_item_changes(
    api: APIClient, base: str, fake_llm: FakeLLM
) -> None:
    put(api, base, {"text": "Maria Chen works at Globex."}, extract=True)
    run = Run.objects.get()
    put(api, base, None)
    run.refresh_from_db()
    assert run.outcome == RunOutcome.FAILED and "overwritten or deleted" in run.error
    assert run_execute(run_id=run.pk).outcome == RunOutcome.FAILED
    assert not Fact.objects.exists()


@pytest.mark.usefixtures("no_chat_model")
def test_without_a_chat_model_an_extracting_put_is_refused_and_writes_nothing(
    api: APIClient, base: str
) -> None:
    response = put(api, base, {"text": "Maria Chen works at Globex."}, extract=True)
    assert_error(response, 503, "chat_model_not_configured")
    assert not Item.objects.exists() and not Run.objects.exists()


def test_extract_must_be_a_boolean(api: APIClient, base: str) -> None:
    assert_error(put(api, base, {"text": "x"}, extract="yes"), 400, "invalid")
    assert not Item.objects.exists()
