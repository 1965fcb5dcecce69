"""Runs over the API: what the answers look like against what the document says."""

from __future__ import annotations

from typing import Any

from rest_framework.test import APIClient

from memory.domain.access import ContextAccess
from memory.services.ingest.run import run_create
from tests.api.conftest import response_schema


def test_a_run_the_system_created_has_no_creator(
    api: APIClient, base: str, access: ContextAccess, openapi: dict[str, Any]
) -> None:
    # A command or task creates runs without a user: created_by is null, which the
    # document did not allow.
    run_create(access=access, text="Maria joined Acme.", scope="s", infer="none")
    listed = api.get(f"{base}/runs").json()["results"]
    assert [r["created_by"] for r in listed] == [None]
    run = openapi["components"]["schemas"]["RunOutput"]["properties"]["created_by"]
    assert run["nullable"] is True


def test_a_queued_run_is_documented_as_answered(
    api: APIClient, base: str, openapi: dict[str, Any]
) -> None:
    response = api.post(
        f"{base}/memories",
        {"text": "Maria joined Acme.", "scope": "s", "infer": "none"},
        format="json",
    )
    assert response.status_code == 202, response.content
    assert set(response.json()) == {"run"}
    queued = response_schema(openapi, "POST", "/memories", 202)
    assert queued["properties"]["run"]["$ref"].endswith("/RunOutput")
