"""A refused or rejected item leaves nothing behind — no entity, no drift item, no count —
and a refusal is a warning the run counts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rest_framework.test import APIClient

from memory.models import Context, Entity, Fact, Predicate

GITHUB_TOKEN = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"


def _remember(api: APIClient, base: str, triples: dict[str, Any], text: str = "") -> Any:
    body = {"text": text, "scope": "org/acme", "infer": "triples", "triples": triples, "wait": True}
    response = api.post(f"{base}/memories", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def _drift(api: APIClient, base: str) -> dict[str, int]:
    return {i["name"]: i["fact_count"] for i in api.get(f"{base}/drift").json()["results"]}


def test_items_refused_as_secrets_leave_no_entity_no_drift_and_count_warnings(
    api: APIClient, base: str
) -> None:
    body = _remember(
        api,
        base,
        {
            "relations": [
                {"subject": "Build Server", "predicate": "deploys_with", "object": GITHUB_TOKEN}
            ],
            "attributes": [
                {"subject": "Wiki Admin", "key": "admin_password", "value": "hunter2"},
                {"subject": "Ops Bot", "key": "deploy_note", "value": "AKIAIOSFODNN7EXAMPLE"},
            ],
        },
    )

    run, result = body["run"], body["result"]
    assert run["outcome"] == "succeeded_with_warnings"
    assert run["summary"]["warnings"] == 3 and run["summary"]["unresolved"] == 3
    assert [(u["section"], u["position"], u["code"]) for u in result["unresolved"]] == [
        ("relations", 0, "secret_refused"),
        ("attributes", 0, "secret_refused"),
        ("attributes", 1, "secret_refused"),
    ]
    assert all(w.endswith("nothing of it was written") for w in result["warnings"])
    assert GITHUB_TOKEN not in str(result) and "AKIAIOSFODNN7EXAMPLE" not in str(result)
    assert result["entities_created"] == [] and result["new_predicates"] == []
    assert not Entity.objects.exists() and not Fact.objects.exists()
    names = {"deploys_with", "admin_password", "deploy_note"}
    assert not Predicate.objects.filter(name__in=names).exists()
    assert not names & set(_drift(api, base))


def test_a_secret_the_turn_carries_refuses_its_fact_and_nothing_else(
    api: APIClient, base: str
) -> None:
    text = "The office wifi password is Tr0ub4dor&3, Sam says; Kim works at Acme."
    body = _remember(
        api,
        base,
        {
            "relations": [
                {"subject": "Kim", "predicate": "works_at", "object": "Acme"},
                {"subject": "Office Router", "predicate": "has_wifi_key", "object": "Tr0ub4dor&3"},
            ]
        },
        text=text,
    )

    result = body["result"]
    assert [u["code"] for u in result["unresolved"]] == ["secret_refused"]
    assert body["run"]["summary"]["warnings"] == 1
    assert sorted(Entity.objects.values_list("name", flat=True)) == ["Acme", "Kim"]
    assert not Predicate.objects.filter(name="has_wifi_key").exists()


def test_a_strict_context_refusal_creates_no_entity_but_is_drift(api: APIClient, base: str) -> None:
    assert api.patch(base, {"predicate_mode": "strict"}, format="json").status_code == 200

    body = _remember(
        api,
        base,
        {
            "entities": [{"name": "Kim", "type": "person"}],
            "relations": [
                {"subject": "Nadia Kerr", "predicate": "adores", "object": "Tea Co"},
                {"subject": "Kim", "predicate": "adores", "object": "Tea Co"},
            ],
        },
    )

    result = body["result"]
    assert [u["code"] for u in result["unresolved"]] == ["unknown_predicate"] * 2
    assert body["run"]["summary"]["warnings"] == 2
    assert [e["name"] for e in result["entities_created"]] == ["Kim"]  # listed: kept
    assert list(Entity.objects.values_list("name", flat=True)) == ["Kim"]
    [refused] = result["new_predicates"]
    assert (refused["name"], refused["status"], refused["forms"]) == (
        "adores",
        "refused",
        ["adores"],
    )
    assert refused["examples"][0] == "Nadia Kerr adores Tea Co"
    assert "adores" in _drift(api, base)  # a strict refusal is drift, as ever


def test_a_rejected_claim_leaves_no_drift_item_and_no_count(
    api: APIClient, base: str, context: Context, api_client_for: Callable[..., APIClient]
) -> None:
    untrusted = api_client_for(context, trust="untrusted")
    claims = [
        untrusted.post(
            f"{base}/facts",
            {
                "subject": {"name": name, "type": "person"},
                "predicate": "secretly_controls",
                "object": {"name": "Acme", "type": "organisation"},
                "scope": "org/acme",
            },
            format="json",
        ).json()["fact"]
        for name in ("Mallory", "Eve")
    ]
    assert {c["trust"] for c in claims} == {"pending"}
    assert _drift(api, base)["secretly_controls"] == 2

    first = api.post(f"{base}/facts/{claims[0]['id']}/review", {"action": "reject"}, format="json")
    assert first.status_code == 200, first.content
    assert _drift(api, base)["secretly_controls"] == 1  # the rejected claim is not counted

    second = api.post(f"{base}/facts/{claims[1]['id']}/review", {"action": "reject"}, format="json")
    assert "secretly_controls" not in _drift(api, base)

    undo = api.post(f"{base}/audit/{second.json()['audit_event']}/undo", format="json")
    assert undo.status_code == 200, undo.content
    assert _drift(api, base)["secretly_controls"] == 1  # pending again: drift again
