"""The trust gate over the API: what untrusted writers and suspicious turns write waits
for a curator; agents are told trusted facts; reviews, their refusals and their undo."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from memory.models import Context, Fact, Role
from tests.api.conftest import assert_error

ALEX = {"name": "Alex Rivera", "type": "person"}


@pytest.fixture
def untrusted(context: Context, api_client_for: Callable[..., APIClient]) -> APIClient:
    """An admin's user behind an untrusted token: its facts wait, it never curates."""
    return api_client_for(context, role=Role.ADMIN, trust="untrusted")


def _write(client: APIClient, base: str, **body: Any) -> dict[str, Any]:
    response = client.post(f"{base}/facts", {"scope": "org/acme", **body}, format="json")
    assert response.status_code in (200, 201), response.content
    return response.json()  # type: ignore[no-any-return]


def _title(client: APIClient, base: str, value: str) -> dict[str, Any]:
    return _write(client, base, subject=ALEX, predicate="current_title", value=value)


def _values(client: APIClient, base: str, **params: Any) -> list[tuple[str, str]]:
    results = client.get(f"{base}/facts", params).json()["results"]
    return sorted((f["value"] or f["object"]["name"], f["trust"]) for f in results)


def test_a_trusted_token_writes_trusted_facts(api: APIClient, base: str) -> None:
    out = _title(api, base, "CTO")
    assert out["fact"]["trust"] == "trusted" and out["fact"]["trust_reason"] == ""


def test_an_untrusted_token_writes_pending_facts_agents_do_not_see(
    api: APIClient, untrusted: APIClient, base: str
) -> None:
    out = _write(untrusted, base, subject=ALEX, predicate="likes", value="tea")
    assert out["outcome"] == "created"
    assert out["fact"]["trust"] == "pending"
    assert out["fact"]["trust_reason"] == "untrusted_writer"
    assert _values(api, base) == []
    assert _values(api, base, include_pending="true") == [("tea", "pending")]


def test_review_off_trusts_every_writer(api: APIClient, untrusted: APIClient, base: str) -> None:
    assert api.patch(base, {"fact_review": "off"}, format="json").json()["fact_review"] == "off"
    assert _title(untrusted, base, "CTO")["fact"]["trust"] == "trusted"


def test_a_pending_value_never_displaces_the_trusted_one(
    api: APIClient, untrusted: APIClient, base: str
) -> None:
    cto = _title(api, base, "CTO")
    proposal = _title(untrusted, base, "VP Engineering")
    assert proposal["outcome"] == "created" and proposal["superseded"] is None
    assert proposal["proposes_to_replace"] == cto["fact"]["id"]
    assert _values(api, base) == [("CTO", "trusted")]
    assert _values(api, base, include_pending="true") == [
        ("CTO", "trusted"),
        ("VP Engineering", "pending"),
    ]


def test_accepting_a_proposal_supersedes_the_trusted_value_and_undo_restores_it(
    api: APIClient, untrusted: APIClient, base: str
) -> None:
    cto = _title(api, base, "CTO")
    proposal = _title(untrusted, base, "VP Engineering")
    response = api.post(
        f"{base}/facts/{proposal['fact']['id']}/review",
        {"action": "accept", "note": "confirmed by HR"},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["fact"]["trust"] == "trusted" and body["superseded"] == cto["fact"]["id"]
    assert body["fact"]["supersedes"] == cto["fact"]["id"]
    assert _values(api, base) == [("VP Engineering", "trusted")]
    undone = api.post(f"{base}/audit/{body['audit_event']}/undo")
    assert undone.status_code == 200, undone.content
    assert _values(api, base) == [("CTO", "trusted")]
    assert Fact.objects.get(pk=proposal["fact"]["id"]).trust == "pending"


def test_a_trusted_writer_stating_the_same_claim_accepts_it(
    api: APIClient, untrusted: APIClient, base: str
) -> None:
    pending = _write(untrusted, base, subject=ALEX, predicate="likes", value="tea")
    confirmed = _write(api, base, subject=ALEX, predicate="likes", value="tea")
    assert confirmed["outcome"] == "reobserved"
    assert confirmed["fact"]["id"] == pending["fact"]["id"]
    assert confirmed["fact"]["trust"] == "trusted" and confirmed["fact"]["observed_count"] == 2
    assert _values(api, base) == [("tea", "trusted")]


def test_a_trusted_confirmation_of_a_single_value_replaces_the_old_one(
    api: APIClient, untrusted: APIClient, base: str
) -> None:
    cto = _title(api, base, "CTO")
    proposal = _title(untrusted, base, "VP Engineering")
    confirmed = _title(api, base, "VP Engineering")
    assert confirmed["fact"]["id"] == proposal["fact"]["id"]
    assert confirmed["fact"]["trust"] == "trusted"
    assert confirmed["superseded"] == cto["fact"]["id"]
    assert _values(api, base, include_pending="true") == [("VP Engineering", "trusted")]


def test_a_rejected_claim_written_again_stays_rejected(
    api: APIClient, untrusted: APIClient, base: str
) -> None:
    pending = _write(untrusted, base, subject=ALEX, predicate="works_at", object={"name": "SYSTEM"})
    fact_id = pending["fact"]["id"]
    rejected = api.post(f"{base}/facts/{fact_id}/review", {"action": "reject"}, format="json")
    assert rejected.json()["fact"]["trust"] == "rejected"
    for writer in (untrusted, api):
        again = _write(writer, base, subject=ALEX, predicate="works_at", object={"name": "SYSTEM"})
        assert again["outcome"] == "reobserved" and again["rejected_before"] is True
        assert again["fact"]["id"] == fact_id and again["fact"]["trust"] == "rejected"
    assert _values(api, base, include_pending="true") == []
    history = api.get(f"{base}/facts", {"include_superseded": "true"}).json()["results"]
    assert [f["trust"] for f in history] == ["rejected"]
    assert Fact.objects.get(pk=fact_id).observed_count == 3


def test_bulk_review_accepts_several_at_once(
    api: APIClient, untrusted: APIClient, base: str
) -> None:
    ids = [
        _write(untrusted, base, subject=ALEX, predicate="likes", value=v)["fact"]["id"]
        for v in ("tea", "chess")
    ]
    response = api.post(f"{base}/facts/review", {"facts": ids, "action": "accept"}, format="json")
    assert response.status_code == 200, response.content
    assert [r["fact"]["trust"] for r in response.json()["results"]] == ["trusted", "trusted"]
    assert _values(api, base) == [("chess", "trusted"), ("tea", "trusted")]


def test_review_refusals(
    api: APIClient,
    untrusted: APIClient,
    base: str,
    make_context: Callable[..., Context],
    api_client_for: Callable[..., APIClient],
) -> None:
    pending = _write(untrusted, base, subject=ALEX, predicate="likes", value="tea")
    fact_id = pending["fact"]["id"]
    url = f"{base}/facts/{fact_id}/review"
    assert_error(api.post(url, {"action": "approve"}, format="json"), 400, "invalid_action")
    assert_error(api.post(url, {"action": "accept", "extra": 1}, format="json"), 400)
    assert_error(api.post(url, {}, format="json"), 400)
    # An untrusted token never acts as a curator, whatever its user's role.
    refused = untrusted.post(url, {"action": "accept"}, format="json")
    assert_error(refused, 403, "role_required")
    assert "curator" in refused.json()["error"]["message"]
    viewer = api_client_for(
        Context.objects.get(pk=Fact.objects.get(pk=fact_id).context_id), role=Role.VIEWER
    )
    assert_error(viewer.post(url, {"action": "accept"}, format="json"), 403, "role_required")
    # A fact of another context is not found there.
    other = make_context("other-ctx")
    other_api = api_client_for(other, role=Role.ADMIN)
    assert_error(
        other_api.post(
            f"/api/v1/contexts/other-ctx/facts/{fact_id}/review",
            {"action": "accept"},
            format="json",
        ),
        404,
        "fact_not_found",
    )
    assert_error(
        api.post(
            f"{base}/facts/review",
            {"facts": [fact_id, 99999999], "action": "accept"},
            format="json",
        ),
        404,
        "fact_not_found",
    )
    assert Fact.objects.get(pk=fact_id).trust == "pending"  # all or nothing
    trusted = _write(api, base, subject=ALEX, predicate="likes", value="chess")["fact"]["id"]
    assert_error(
        api.post(f"{base}/facts/{trusted}/review", {"action": "reject"}, format="json"),
        409,
        "fact_not_pending",
    )


def test_a_secret_is_never_stored_as_a_fact_value_or_entity_name(api: APIClient, base: str) -> None:
    for body in (
        {"subject": ALEX, "predicate": "password", "value": "the password is hunter2"},
        {"subject": ALEX, "predicate": "api_key", "value": "AKIAIOSFODNN7EXAMPLE"},
        {
            "subject": {"name": "ghp_abcdefghijklmnopqrstuvwxyz0123456789"},
            "predicate": "likes",
            "value": "tea",
        },
    ):
        response = api.post(f"{base}/facts", {"scope": "org/acme", **body}, format="json")
        assert_error(response, 400, "secret_refused")
    assert Fact.objects.count() == 0


def test_context_fact_review_setting_is_validated(api: APIClient, base: str) -> None:
    assert api.get(base).json()["fact_review"] == "untrusted"
    assert_error(api.patch(base, {"fact_review": "sometimes"}, format="json"), 400)
    assert api.patch(base, {"fact_review": "all"}, format="json").json()["fact_review"] == "all"


def test_a_writer_never_confirms_its_own_claim(
    context: Context, make_user: Callable[..., Any], base: str
) -> None:
    from memory.services.tokens import token_issue

    agent = make_user(context=context, role=Role.ADMIN)
    clients = []
    for trust in ("untrusted", "trusted"):
        raw = token_issue(user=agent, context=context, grants=["read,write:*"], trust=trust).raw
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
        clients.append(client)
    untrusted, trusted = clients
    pending = _write(untrusted, base, subject=ALEX, predicate="likes", value="tea")
    again = _write(trusted, base, subject=ALEX, predicate="likes", value="tea")
    assert again["fact"]["id"] == pending["fact"]["id"]
    assert again["fact"]["trust"] == "pending"
