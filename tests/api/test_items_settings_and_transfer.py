"""The context's ``item_extract`` setting (puts extract by default; a put's own
``extract`` wins), and items in a memory export: carried exactly, restored by the
import, still linked to the facts they extracted."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from memory.domain.access import system_access
from memory.kernel.errors import ValidationFailed
from memory.models import (
    AuditEvent,
    Context,
    Fact,
    FactStatus,
    FactTrust,
    Item,
    Role,
    Run,
    RunOutcome,
    TrustReason,
    Turn,
)
from memory.selectors.items import items_search
from memory.services.ingest.run import run_execute
from memory.services.transfer.export import memory_export_lines
from memory.services.transfer.importer import memory_import
from tests.api.conftest import assert_error, operation
from tests.api.test_memory_transfer_api import assert_same_memory
from tests.fake_llm import FakeLLM
from tests.ingest import conftest as ingest

pytestmark = pytest.mark.django_db

fake_llm_server = ingest.fake_llm_server
fake_llm = ingest.fake_llm
no_chat_model = ingest.no_chat_model

ANSWER = ingest.extraction(
    entities=[{"name": "Maria Chen", "type": "person"}, {"name": "Globex", "type": "organisation"}],
    relations=[{"subject": "Maria Chen", "predicate": "works_at", "object": "Globex"}],
)


def put(api: APIClient, ctx: str, key: str, value: Any, **extra: Any) -> Any:
    op = {"op": "put", "namespace": ["org", "maria"], "key": key, "value": value, **extra}
    return api.post(f"/api/v1/contexts/{ctx}/items/batch", {"ops": [op]}, format="json")


# --- the setting ------------------------------------------------------------------------


def test_item_extract_is_a_context_setting_an_admin_changes(api: APIClient, base: str) -> None:
    assert api.get(base).json()["item_extract"] is False
    changed = api.patch(base, {"item_extract": True}, format="json")
    assert changed.status_code == 200 and changed.json()["item_extract"] is True
    assert Context.objects.get(slug="acme-test").item_extract is True
    [event] = AuditEvent.objects.filter(action="context_update")
    assert event.summary == "changed settings: item_extract off → on"
    # Sent again with the value it has: answered as it is, nothing audited.
    again = api.patch(base, {"item_extract": True}, format="json")
    assert again.status_code == 200 and again.json()["item_extract"] is True
    assert AuditEvent.objects.filter(action="context_update").count() == 1


@pytest.mark.parametrize("bad", ["yes", 1, "true", [True], {"on": True}])
def test_item_extract_must_be_true_or_false(api: APIClient, base: str, bad: Any) -> None:
    assert_error(api.patch(base, {"item_extract": bad}, format="json"), 400, "invalid")
    assert Context.objects.get(slug="acme-test").item_extract is False


def test_item_extract_null_is_refused(api: APIClient, base: str) -> None:
    assert_error(api.patch(base, {"item_extract": None}, format="json"), 400, "invalid")


@pytest.mark.parametrize("role", [Role.VIEWER, Role.CURATOR])
def test_only_an_admin_sets_item_extract(
    context: Context, api_client_for: Callable[..., APIClient], base: str, role: Role
) -> None:
    client = api_client_for(context, role=role)
    assert_error(client.patch(base, {"item_extract": True}, format="json"), 403, "role_required")
    assert Context.objects.get(pk=context.pk).item_extract is False


def test_the_schema_documents_item_extract(openapi: dict[str, Any]) -> None:
    patch = operation(openapi, "patch", "")
    ref = patch["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    body = openapi["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert body["properties"]["item_extract"]["type"] == "boolean"
    answer = openapi["components"]["schemas"]["ContextOutput"]["properties"]
    assert answer["item_extract"]["type"] == "boolean"


def test_with_the_setting_on_a_put_extracts_unless_it_says_not_to(
    api: APIClient, base: str, context: Context, fake_llm: FakeLLM
) -> None:
    api.patch(base, {"item_extract": True}, format="json")
    assert (
        put(api, context.slug, "plain", {"text": "Maria Chen works at Globex."}).status_code == 200
    )
    assert (
        put(api, context.slug, "kept", {"text": "Globex hired Maria."}, extract=False).status_code
        == 200
    )
    extracted = Item.objects.get(key="plain")
    assert extracted.run is not None and extracted.turn is not None
    assert Item.objects.get(key="kept").run is None
    assert Run.objects.count() == 1


def test_with_the_setting_off_an_explicit_extract_still_extracts(
    api: APIClient, context: Context, fake_llm: FakeLLM
) -> None:
    assert put(api, context.slug, "a", {"text": "Maria Chen works at Globex."}).status_code == 200
    assert Item.objects.get(key="a").run is None
    response = put(api, context.slug, "b", {"text": "Maria Chen works at Globex."}, extract=True)
    assert response.status_code == 200
    assert Item.objects.get(key="b").run is not None


@pytest.mark.usefixtures("no_chat_model")
def test_with_the_setting_on_and_no_chat_model_a_put_is_refused_unless_it_says_not_to(
    api: APIClient, base: str, context: Context
) -> None:
    api.patch(base, {"item_extract": True}, format="json")
    assert_error(put(api, context.slug, "a", {"text": "x y"}), 503, "chat_model_not_configured")
    assert not Item.objects.exists()
    assert put(api, context.slug, "a", {"text": "x y"}, extract=False).status_code == 200


# --- export and import ------------------------------------------------------------------


@pytest.fixture
def with_items(
    make_context: Callable[..., Context],
    api_client_for: Callable[..., APIClient],
    fake_llm: FakeLLM,
) -> Context:
    """A context with items: one extracted (its facts), one with a lifetime and an index
    path, one unindexed with odd labels, and non-default settings."""
    context = make_context("with-items", fact_review="all", item_extract=True)
    api = api_client_for(context)
    fake_llm.reply_json(ANSWER)
    assert put(api, context.slug, "bio", {"text": "Maria Chen works at Globex."}).status_code == 200
    run = Item.objects.get(key="bio").run
    assert run is not None and run_execute(run_id=run.pk).outcome == RunOutcome.SUCCEEDED
    odd = {
        "op": "put",
        "namespace": ["x/y", "a%b", "alice\n"],
        "key": "k#1",
        "value": {"z": [1, 2.5, None, {"deep": "é"}], "big": 2**70 + 1, "a": ""},
        "index": False,
    }
    timed = {
        "op": "put",
        "namespace": ["notes"],
        "key": "ttl",
        "value": {"note": "Globex moved offices", "n": 3},
        "index": ["note"],
        "ttl": 600,
        "extract": False,
    }
    response = api.post(
        f"/api/v1/contexts/{context.slug}/items/batch", {"ops": [odd, timed]}, format="json"
    )
    assert response.status_code == 200, response.content
    return context


def _item_lines(context: Context) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in memory_export_lines(access=system_access(context))]
    return [line for line in lines if line["record"] == "item"]


def test_an_export_carries_items_exactly_and_the_settings(with_items: Context) -> None:
    lines = list(memory_export_lines(access=system_access(with_items)))
    header = json.loads(lines[0])
    assert header["context"]["fact_review"] == "all"
    assert header["context"]["item_extract"] is True
    assert json.loads(lines[-1])["counts"]["item"] == 3
    items = {line["key"]: line for line in _item_lines(with_items)}
    odd = items["k#1"]
    assert odd["namespace"] == ["x/y", "a%b", "alice\n"]
    assert odd["value"] == {"z": [1, 2.5, None, {"deep": "é"}], "big": 2**70 + 1, "a": ""}
    assert odd["index"] is None and odd["text"] == ""
    timed = items["ttl"]
    assert timed["index"] == ["note"] and timed["ttl_minutes"] == 600
    assert timed["expires_at"] and timed["created_at"] and timed["updated_at"]
    bio = items["bio"]
    assert bio["turn_id"] == Turn.objects.get(context=with_items).pk
    assert "embedding" not in bio


def test_items_round_trip_and_keep_their_extracted_facts(
    with_items: Context,
    make_context: Callable[..., Context],
    api_client_for: Callable[..., APIClient],
) -> None:
    target = make_context("copy")
    report = memory_import(
        access=system_access(target), lines=memory_export_lines(access=system_access(with_items))
    )
    assert report.counts["item"] == 3
    assert_same_memory(with_items, target)
    target.refresh_from_db()
    assert target.fact_review == "all" and target.item_extract is True
    # The link to what it extracted survives: the facts of the item's turn.
    bio = Item.objects.get(context=target, key="bio")
    assert bio.run is None and bio.turn is not None
    fact = Fact.objects.get(context=target)
    assert fact.turn_id == bio.turn_id and fact.status == FactStatus.CURRENT
    # Its review too: under fact_review "all" the extracted fact waits for a curator.
    assert (fact.trust, fact.trust_reason) == (FactTrust.PENDING, TrustReason.REVIEW_ALL)
    # Searchable by words and meaning at once (the import embeds items itself).
    access = system_access(target)
    timed = Item.objects.get(context=target, key="ttl")
    assert timed.embedding is not None
    hits = items_search(access=access, namespace_prefix=("notes",), query="Globex offices")
    assert [hit.item.pk for hit in hits] == [timed.pk] and hits[0].score is not None
    # Overwriting the imported item takes back what it extracted, through its turn.
    api = api_client_for(target)
    assert put(api, target.slug, "bio", {"text": "Maria left."}, extract=False).status_code == 200
    assert not Fact.objects.filter(context=target, status=FactStatus.CURRENT).exists()


def test_an_import_needs_a_context_without_items(
    with_items: Context,
    make_context: Callable[..., Context],
    api_client_for: Callable[..., APIClient],
) -> None:
    target = make_context("holds-items")
    api = api_client_for(target)
    assert put(api, target.slug, "one", {"a": 1}, extract=False).status_code == 200
    body = "".join(memory_export_lines(access=system_access(with_items)))
    response = api.post(
        f"/api/v1/contexts/{target.slug}/import", body, content_type="application/x-ndjson"
    )
    assert_error(response, 409, "context_not_empty")
    assert Item.objects.filter(context=target).count() == 1


def test_an_item_line_with_a_turn_the_file_does_not_hold_writes_nothing(
    with_items: Context, make_context: Callable[..., Context]
) -> None:
    lines = [json.loads(line) for line in memory_export_lines(access=system_access(with_items))]
    for line in lines:
        if line["record"] == "item" and line["turn_id"]:
            line["turn_id"] = 987654
    target = make_context("dangling")
    with pytest.raises(ValidationFailed, match=r"item \d+: turn_id 987654 is not in the file"):
        memory_import(access=system_access(target), lines=(json.dumps(x) for x in lines))
    assert not Item.objects.filter(context=target).exists()
