"""POST memories, the runs endpoints and their permissions, through the REST API."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django_tasks_db.models import DBTaskResult
from rest_framework.test import APIClient

from memory.models import Context, Entity, Fact, Role, Run, RunOutcome
from tests.api.conftest import assert_error
from tests.fake_llm import FakeLLM
from tests.ingest.conftest import extraction

TRIPLES = extraction(
    entities=[{"name": "Alex", "type": "person"}, {"name": "Acme", "type": "organisation"}],
    relations=[{"subject": "Alex", "predicate": "works_at", "object": "Acme"}],
)


def _post(client: APIClient, base: str, **body: Any) -> Any:
    return client.post(f"{base}/memories", body, format="json")


def test_a_memory_is_queued_for_the_worker(
    api: APIClient, base: str, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = _post(api, base, scope="org/acme", infer="triples", triples=TRIPLES)
    assert response.status_code == 202, response.content
    run = response.json()["run"]
    assert (run["outcome"], run["mode"], run["scope"]) == ("pending", "triples", "org/acme")
    task = DBTaskResult.objects.get()
    assert task.task_path == "memory.tasks.ingest_run_task"
    assert task.args_kwargs["args"] == [run["id"]]
    assert Fact.objects.count() == 0  # not before the worker runs it


def test_wait_returns_the_finished_run_and_its_result(api: APIClient, base: str) -> None:
    response = _post(
        api, base, scope="org/acme", infer="triples", triples=TRIPLES, wait=True, source="crm-sync"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["run"]["outcome"] == "succeeded" and body["run"]["source"] == "crm-sync"
    assert body["run"]["input"] == {"text": "", "triples": TRIPLES}
    assert [f["predicate"] for f in body["result"]["facts_created"]] == ["works_at"]
    assert "result" not in body["run"]  # said once, beside the run
    assert set(body["result"]) >= {
        "entities_created",
        "entities_matched",
        "facts_created",
        "facts_superseded",
        "new_predicates",
        "unresolved",
        "conflicts",
        "merges",
    }


def test_llm_memory_through_the_api(api: APIClient, base: str, fake_llm: FakeLLM) -> None:
    fake_llm.reply_json(TRIPLES)
    response = _post(api, base, text="Alex works at Acme.", scope="org/acme", wait=True)
    assert response.status_code == 200, response.content
    run = response.json()["run"]
    assert run["mode"] == "llm" and run["outcome"] == "succeeded"
    assert run["prompt"][1]["content"].splitlines()[1] == "Alex works at Acme."
    assert run["prompt_tokens"] == 120


def test_writing_needs_a_write_grant_on_the_scope(
    context: Context, base: str, api_client_for: Callable[..., APIClient]
) -> None:
    reader = api_client_for(
        context, role=Role.ADMIN, grants=["read:*", "write:org/acme/user/alex/*"]
    )
    refused = _post(reader, base, scope="org/acme", infer="triples", triples=TRIPLES, wait=True)
    assert_error(refused, 403, "scope_forbidden")
    viewer = api_client_for(context, role=Role.VIEWER, grants=["read:*"])
    assert_error(
        _post(viewer, base, text="x", scope="org/acme", infer="none"), 403, "scope_forbidden"
    )
    ok = _post(
        reader, base, scope="org/acme/user/alex", infer="triples", triples=TRIPLES, wait=True
    )
    assert ok.status_code == 200
    assert Run.objects.count() == 1


def test_unknown_or_foreign_context_is_not_found(
    api: APIClient,
    make_context: Callable[..., Context],
    api_client_for: Callable[..., APIClient],
    base: str,
) -> None:
    assert_error(
        _post(api, "/api/v1/contexts/nope", scope="s", infer="none", text="x"),
        404,
        "context_not_found",
    )
    other = api_client_for(make_context("other"), role=Role.ADMIN)
    assert_error(_post(other, base, scope="s", infer="none", text="x"), 404, "context_not_found")
    assert_error(other.get(f"{base}/runs"), 404, "context_not_found")


def test_bad_input_is_refused_and_writes_nothing(api: APIClient, base: str) -> None:
    malformed = api.post(f"{base}/memories", "{not json", content_type="application/json")
    assert_error(malformed, 400, "malformed")
    assert_error(_post(api, base, scope="s", infer="guess", text="x"), 400, "invalid")
    assert_error(_post(api, base, scope="a//b", infer="none", text="x"), 400, "invalid_scope")
    assert_error(_post(api, base, scope="s", infer="none", text="nul\x00byte"), 400, "invalid")
    assert_error(_post(api, base, scope="s", infer="none", text="   "), 400, "missing_text")
    assert_error(_post(api, base, scope="s", infer="triples"), 400, "missing_triples")
    assert_error(
        _post(api, base, scope="s", infer="llm", text="x", triples=TRIPLES),
        400,
        "unexpected_triples",
    )
    wrong = _post(
        api,
        base,
        scope="s",
        infer="triples",
        triples={"relations": [{"subject": "A", "object": "B"}]},
    )
    assert_error(wrong, 400, "invalid_triples")
    assert wrong.json()["error"]["details"] == [
        {"at": "relations[0].predicate", "message": "Field required"}
    ]
    typo = _post(api, base, scope="s", infer="triples", triples={"relation": []})
    assert_error(typo, 400, "invalid_triples")
    assert_error(
        _post(api, base, scope="s", infer="triples", triples=[1, 2]), 400, "invalid_triples"
    )
    confidence = extraction(
        relations=[{"subject": "A", "predicate": "p", "object": "B", "confidence": 7}]
    )
    assert_error(
        _post(api, base, scope="s", infer="triples", triples=confidence), 400, "invalid_triples"
    )
    assert Run.objects.count() == 0


def test_a_hostile_predicate_is_reported_not_written(api: APIClient, base: str) -> None:
    triples = extraction(
        entities=TRIPLES["entities"],
        relations=[
            {"subject": "Alex", "predicate": "works_at]->(x) DELETE x //", "object": "Acme"}
        ],
    )
    body = _post(api, base, scope="s", infer="triples", triples=triples, wait=True).json()
    assert body["run"]["outcome"] == "succeeded_with_warnings"  # an item was refused
    [unresolved] = body["result"]["unresolved"]
    assert unresolved["code"] == "invalid_predicate"
    assert Fact.objects.count() == 0


@pytest.mark.parametrize(
    ("triples", "path"),
    [
        (
            {"relations": [{"subject": "Alex", "predicate": "works_at", "object": "Acme",
                            "confidance": 0.1}]},
            "relations[0].confidance",
        ),
        ({"entities": [{"name": "Alex", "typ": "person"}]}, "entities[0].typ"),
        (
            {"entities": [{"name": "Alex", "identifiers": [{"kind": "email",
                                                            "value": "a@x.io", "note": 1}]}]},
            "entities[0].identifiers[0].note",
        ),
        (
            {"attributes": [{"subject": "Alex", "key": "title", "value": "x", "when": "2020"}]},
            "attributes[0].when",
        ),
        ({"actions": [{"subject": "Alex", "verb": "met", "objet": "Sam"}]}, "actions[0].objet"),
    ],
    ids=["relation", "entity", "identifier", "attribute", "action"],
)  # fmt: skip
def test_an_unknown_key_at_any_level_of_triples_is_a_400_naming_its_path(
    api: APIClient, base: str, triples: dict[str, Any], path: str
) -> None:
    response = _post(api, base, scope="s", infer="triples", triples=triples, wait=True)

    assert_error(response, 400, "invalid_triples")
    assert response.json()["error"]["details"] == [{"at": path, "message": "unknown field"}]
    assert path in response.json()["error"]["message"]
    assert Run.objects.count() == 0 and Entity.objects.count() == 0


def test_a_relation_refused_for_its_predicate_leaves_no_entities_and_warns(
    api: APIClient, base: str
) -> None:
    triples = {
        "relations": [
            {"subject": "Mallory", "predicate": "KNOWS]->() DETACH DELETE n //", "object": "Eve"},
            {
                "subject": "Alex",
                "subject_type": "person",  # typed: no constraint of works_at to warn of
                "predicate": "works_at",
                "object": "Acme",
                "object_type": "organisation",
            },
        ]
    }
    body = _post(api, base, scope="s", infer="triples", triples=triples, wait=True).json()

    assert body["run"]["outcome"] == "succeeded_with_warnings"
    assert body["run"]["summary"]["unresolved"] == 1
    assert body["run"]["summary"]["warnings"] == 1
    [unresolved] = body["result"]["unresolved"]
    assert (unresolved["section"], unresolved["position"], unresolved["code"]) == (
        "relations",
        0,
        "invalid_predicate",
    )
    assert sorted(Entity.objects.values_list("name", flat=True)) == ["Acme", "Alex"]
    assert Fact.objects.count() == 1


def test_a_relation_on_a_rejected_predicate_leaves_no_entities_and_warns(
    api: APIClient, base: str
) -> None:
    drift = {"relations": [{"subject": "Alex", "predicate": "hangs_with", "object": "Sam"}]}
    _post(api, base, scope="s", infer="triples", triples=drift, wait=True)
    rejected = api.post(f"{base}/drift/hangs_with/resolve", {"action": "reject"}, format="json")
    assert rejected.status_code == 200, rejected.content

    again = {"relations": [{"subject": "Mallory", "predicate": "hangs_with", "object": "Eve"}]}
    body = _post(api, base, scope="s", infer="triples", triples=again, wait=True).json()

    assert body["run"]["outcome"] == "succeeded_with_warnings"
    assert body["run"]["summary"]["warnings"] == 1
    assert [u["code"] for u in body["result"]["unresolved"]] == ["rejected_predicate"]
    assert not Entity.objects.filter(name__in=["Mallory", "Eve"]).exists()


def test_runs_list_in_three_queries(
    api: APIClient, base: str, django_assert_num_queries: Any
) -> None:
    for _ in range(3):
        _post(api, base, scope="org/acme", infer="triples", triples=TRIPLES, wait=True)
    # 1. the API token with its user, context and the caller's membership (its last use
    #    was stamped by the posts above, less than a minute ago)
    # 2. count of visible runs           3. the page of runs with their creators
    with django_assert_num_queries(3):
        response = api.get(f"{base}/runs")
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 3
    first = body["results"][0]
    assert first["summary"]["facts_created"] in (0, 1)
    assert "prompt" not in first and "result" not in first


def test_runs_are_filtered_and_limited_to_grants(
    api: APIClient, base: str, context: Context, api_client_for: Callable[..., APIClient]
) -> None:
    mine = _post(
        api, base, scope="org/acme/user/alex", infer="triples", triples=TRIPLES, wait=True
    ).json()["run"]
    theirs = _post(
        api, base, scope="org/globex", infer="triples", triples=TRIPLES, wait=True
    ).json()["run"]
    alex = api_client_for(context, role=Role.VIEWER, grants=["read,write:org/acme/user/alex/*"])
    assert [r["id"] for r in alex.get(f"{base}/runs").json()["results"]] == [mine["id"]]
    assert alex.get(f"{base}/runs/{mine['id']}").status_code == 200
    assert_error(alex.get(f"{base}/runs/{theirs['id']}"), 404, "run_not_found")
    assert_error(alex.post(f"{base}/runs/{theirs['id']}/retry", {}, format="json"), 404)
    assert api.get(f"{base}/runs", {"outcome": "failed"}).json()["count"] == 0
    assert api.get(f"{base}/runs", {"outcome": "succeeded", "mode": "triples"}).json()["count"] == 2


def test_run_detail_shows_prompt_output_and_result(
    api: APIClient, base: str, fake_llm: FakeLLM
) -> None:
    fake_llm.reply_text("not json", times=2)
    run = _post(api, base, text="Alex works at Acme.", scope="s", wait=True).json()["run"]
    detail = api.get(f"{base}/runs/{run['id']}").json()
    assert detail["outcome"] == "failed" and "not valid twice" in detail["error"]
    assert detail["input"] == {"text": "Alex works at Acme.", "triples": None}
    assert [m["role"] for m in detail["prompt"]] == ["system", "user"]
    assert detail["raw_output"].count("not json") == 2
    assert detail["result"] is None and "grants" not in str(detail["input"])


def test_retry_a_failed_run(
    api: APIClient,
    base: str,
    fake_llm: FakeLLM,
    context: Context,
    api_client_for: Callable[..., APIClient],
) -> None:
    fake_llm.reply_status(500, times=3)
    failed = _post(api, base, text="Alex works at Acme.", scope="s", wait=True).json()["run"]
    assert failed["outcome"] == "failed"
    reader = api_client_for(context, role=Role.VIEWER, grants=["read:*"])
    assert_error(
        reader.post(f"{base}/runs/{failed['id']}/retry", {}, format="json"), 403, "scope_forbidden"
    )
    fake_llm.reply_json(TRIPLES)
    retried = api.post(f"{base}/runs/{failed['id']}/retry", {"wait": True}, format="json")
    assert retried.status_code == 200, retried.content
    run = retried.json()["run"]
    assert (run["outcome"], run["retry_of"]) == ("succeeded", failed["id"])
    again = api.post(f"{base}/runs/{run['id']}/retry", {}, format="json")
    assert_error(again, 409, "run_not_failed")
    assert_error(api.post(f"{base}/runs/999999/retry", {}, format="json"), 404, "run_not_found")
    assert Run.objects.get(pk=failed["id"]).outcome == RunOutcome.FAILED  # history stays
