"""An untrusted token cannot erase: every retraction path (REST one and bulk, a run's
retraction and its preview) refuses facts it did not write or that agents are told, and
writes nothing; a trusted token and the token's own pending claims are unaffected. MCP's
``retract_fact`` is in tests/mcp/test_mcp_untrusted_retract.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from memory.domain.access import ContextAccess
from memory.models import Context, Fact, FactStatus, Role, Run
from memory.services.ingest.run import run_create, run_execute
from tests.api.conftest import assert_error

ALEX = {"name": "Alex Rivera", "type": "person"}


@pytest.fixture
def untrusted(context: Context, api_client_for: Callable[..., APIClient]) -> APIClient:
    return api_client_for(context, role=Role.ADMIN, trust="untrusted")


def _fact(client: APIClient, base: str, value: str) -> dict[str, Any]:
    response = client.post(
        f"{base}/facts",
        {"scope": "org/acme", "subject": ALEX, "predicate": "likes", "value": value},
        format="json",
    )
    assert response.status_code in (200, 201), response.content
    return response.json()["fact"]  # type: ignore[no-any-return]


def _current(*ids: int) -> bool:
    return all(Fact.objects.get(pk=i).status != FactStatus.RETRACTED for i in ids)


def test_delete_of_a_trusted_fact_is_refused(
    api: APIClient, untrusted: APIClient, base: str
) -> None:
    fact = _fact(api, base, "tea")
    assert_error(untrusted.delete(f"{base}/facts/{fact['id']}"), 403, "untrusted_retract")
    assert _current(fact["id"])


def test_bulk_retract_is_refused_whole(api: APIClient, untrusted: APIClient, base: str) -> None:
    a, b = _fact(api, base, "tea"), _fact(api, base, "coffee")
    own = _fact(untrusted, base, "juice")
    response = untrusted.post(
        f"{base}/facts/retract", {"ids": [a["id"], b["id"], own["id"]]}, format="json"
    )
    assert_error(response, 403, "untrusted_retract")
    assert _current(a["id"], b["id"], own["id"])


def test_an_untrusted_token_retracts_its_own_pending_claim(untrusted: APIClient, base: str) -> None:
    own = _fact(untrusted, base, "juice")
    assert own["trust"] == "pending"
    assert untrusted.delete(f"{base}/facts/{own['id']}").status_code == 200
    assert not _current(own["id"])


def test_a_pending_claim_of_another_untrusted_writer_is_refused(
    context: Context, api_client_for: Callable[..., APIClient], untrusted: APIClient, base: str
) -> None:
    other = api_client_for(context, role=Role.ADMIN, trust="untrusted")
    theirs = _fact(other, base, "juice")
    assert_error(untrusted.delete(f"{base}/facts/{theirs['id']}"), 403, "untrusted_retract")


def test_a_trusted_token_still_retracts(api: APIClient, base: str) -> None:
    fact = _fact(api, base, "tea")
    assert api.delete(f"{base}/facts/{fact['id']}").status_code == 200


def _run(access: ContextAccess) -> Run:
    triples = {
        "entities": [{"name": "Mallory", "type": "person"}, {"name": "Shady", "type": "org"}],
        "relations": [{"subject": "Mallory", "predicate": "works_at", "object": "Shady"}],
    }
    run = run_create(access=access, text="", scope="org/acme", infer="triples", triples=triples)
    return run_execute(run_id=run.pk)


@pytest.mark.parametrize("preview", [True, False], ids=["preview", "retract"])
def test_a_run_of_another_user_is_refused(
    access: ContextAccess, untrusted: APIClient, base: str, preview: bool
) -> None:
    run = _run(access)
    response = untrusted.post(f"{base}/runs/{run.pk}/retract", {"preview": preview}, format="json")
    assert_error(response, 403, "untrusted_retract")
    run.refresh_from_db()
    assert run.retracted_at is None
    assert Fact.objects.filter(run=run, status=FactStatus.CURRENT).count() == 1
