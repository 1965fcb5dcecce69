"""POST runs/{id}/retract over the API: preview, retraction, undo, refusals, permissions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rest_framework.test import APIClient

from memory.domain.access import ContextAccess
from memory.models import AuditEvent, Context, Entity, Fact, FactStatus, Role, Run, RunOutcome
from memory.services.ingest.run import run_create, run_execute
from tests.api.conftest import assert_error, operation, response_schema

TRIPLES = {
    "entities": [
        {"name": "Mallory", "type": "person"},
        {"name": "Shady Ltd", "type": "organisation"},
    ],
    "relations": [{"subject": "Mallory", "predicate": "works_at", "object": "Shady Ltd"}],
}


def _run(access: ContextAccess, scope: str = "org/acme") -> Run:
    run = run_create(access=access, text="", scope=scope, infer="triples", triples=TRIPLES)
    return run_execute(run_id=run.pk)


def _counts(context: Context) -> tuple[int, int, int, int]:
    return (
        Fact.objects.filter(context=context, status=FactStatus.CURRENT).count(),
        Entity.objects.filter(context=context).count(),
        AuditEvent.objects.filter(context=context).count(),
        Run.objects.filter(context=context, retracted_at__isnull=False).count(),
    )


def test_a_preview_answers_what_would_change_and_writes_nothing(
    api: APIClient, base: str, access: ContextAccess
) -> None:
    run = _run(access)
    before = _counts(access.context)
    response = api.post(f"{base}/runs/{run.pk}/retract", {"preview": True}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["preview"] is True and "audit_event" not in body
    assert {e["name"] for e in body["entities_deleted"]} == {"Mallory", "Shady Ltd"}
    assert [f["predicate"] for f in body["facts"]] == ["works_at"]
    assert _counts(access.context) == before


def test_a_retracted_run_is_restored_by_its_audit_undo(
    api: APIClient, base: str, access: ContextAccess
) -> None:
    run = _run(access)
    response = api.post(f"{base}/runs/{run.pk}/retract", {}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["preview"] is False
    assert not Entity.objects.filter(name="Mallory").exists()
    assert api.get(f"{base}/runs/{run.pk}").json()["retracted_at"] is not None
    again = api.post(f"{base}/runs/{run.pk}/retract", {}, format="json")
    assert_error(again, 409, "already_retracted")
    undone = api.post(f"{base}/audit/{body['audit_event']}/undo", {}, format="json")
    assert undone.status_code == 200, undone.content
    assert Fact.objects.get(run=run).status == FactStatus.CURRENT
    assert api.get(f"{base}/runs/{run.pk}").json()["retracted_at"] is None


def test_retract_refusals_are_json_errors_and_write_nothing(
    api: APIClient,
    base: str,
    access: ContextAccess,
    make_context: Callable[..., Context],
) -> None:
    run = _run(access)
    pending = run_create(access=access, text="", scope="org/acme", infer="triples", triples=TRIPLES)
    failed = run_create(access=access, text="", scope="org/acme", infer="triples", triples=TRIPLES)
    Run.objects.filter(pk=failed.pk).update(outcome=RunOutcome.FAILED)
    elsewhere = make_context("elsewhere")
    foreign = _run(ContextAccess(elsewhere, None, Role.ADMIN, access.grants))
    before = _counts(access.context)
    url = f"{base}/runs/{{}}/retract"
    assert_error(api.post(url.format(999999), {}, format="json"), 404, "run_not_found")
    assert_error(api.post(url.format(foreign.pk), {}, format="json"), 404, "run_not_found")
    assert_error(api.post(url.format(pending.pk), {}, format="json"), 409, "run_not_finished")
    assert_error(api.post(url.format(failed.pk), {}, format="json"), 409, "nothing_to_retract")
    assert_error(api.post(url.format(run.pk), {"preview": "yes"}, format="json"), 400)
    assert_error(api.post(url.format(run.pk), {"force": True}, format="json"), 400)
    assert_error(api.post(url.format(run.pk), [1, 2], format="json"), 400)
    assert _counts(access.context) == before


def test_retracting_needs_a_write_grant_on_the_run_scope(
    base: str,
    access: ContextAccess,
    api_client_for: Callable[..., APIClient],
) -> None:
    run = _run(access)
    hidden = _run(access, scope="org/secret")
    reader = api_client_for(access.context, role=Role.CURATOR, grants=["read:org/acme/*"])
    before = _counts(access.context)
    url = f"{base}/runs/{run.pk}/retract"
    assert_error(reader.post(url, {}, format="json"), 403, "scope_forbidden")
    assert_error(reader.post(url, {"preview": True}, format="json"), 403, "scope_forbidden")
    # A run outside the read grants does not exist for the caller.
    assert_error(
        reader.post(f"{base}/runs/{hidden.pk}/retract", {}, format="json"), 404, "run_not_found"
    )
    assert _counts(access.context) == before


def test_the_runs_list_says_how_many_items_were_refused(
    api: APIClient, base: str, access: ContextAccess
) -> None:
    hostile = {
        **TRIPLES,
        "relations": [
            *TRIPLES["relations"],
            {"subject": "Mallory", "predicate": "'; DROP TABLE x; --", "object": "Shady Ltd"},
        ],
    }
    run = run_create(access=access, text="", scope="org/acme", infer="triples", triples=hostile)
    run_execute(run_id=run.pk)
    listed = api.get(f"{base}/runs?outcome=succeeded_with_warnings").json()["results"]
    assert [(r["id"], r["outcome"], r["summary"]["unresolved"]) for r in listed] == [
        (run.pk, "succeeded_with_warnings", 1)
    ]


def test_the_retract_endpoint_is_documented(openapi: dict[str, Any]) -> None:
    op = operation(openapi, "POST", "/runs/{run_id}/retract")
    assert {"200", "403", "404", "409"} <= set(op["responses"])
    answer = response_schema(openapi, "POST", "/runs/{run_id}/retract", 200)
    assert {"facts", "entities_kept", "dependencies", "audit_event"} <= set(answer["properties"])
    outcome = openapi["components"]["schemas"]["RunOutcomeEnum"]["enum"]
    assert "succeeded_with_warnings" in outcome


def test_an_unknown_entity_type_is_a_warning_of_the_run(api: APIClient, base: str) -> None:
    triples = {
        "entities": [{"name": "Merlin", "type": "wizard"}],
        "attributes": [{"subject": "Merlin", "key": "motto", "value": "Archmage"}],
    }
    body = api.post(
        f"{base}/memories",
        {"text": "", "scope": "org/acme", "infer": "triples", "triples": triples, "wait": True},
        format="json",
    ).json()
    assert body["run"]["outcome"] == "succeeded_with_warnings"
    assert body["run"]["summary"]["warnings"] == 1
    assert body["result"]["warnings"] == [
        "entity 'Merlin': type 'wizard' is not a type a memory may use; stored as other"
    ]
    assert body["result"]["entities_created"][0]["type"] == "other"
