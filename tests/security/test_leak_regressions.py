"""Leaks the isolation properties found, pinned one by one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from memory.domain.access import ContextAccess
from memory.models import Context, Role
from memory.services.entities.writes import entity_upsert
from memory.services.facts.write import fact_write
from memory.services.ingest.documents import document_create, document_delete

pytestmark = pytest.mark.django_db


def test_a_deleted_documents_audit_event_is_shown_only_to_readers_of_its_scope(
    context: Context,
    access: ContextAccess,
    api_client_for: Callable[..., APIClient],
    make_user: Callable[..., Any],
) -> None:
    """The event keeps the document's title and text for undo; it used to be listed to
    every member of the context."""
    document = document_create(
        access=access, title="Board minutes", text="Secret merger talks.", scope="org/b"
    )
    document_delete(access=access, document=document)
    url = f"/api/v1/contexts/{context.slug}/audit"

    outsider = api_client_for(context, role=Role.VIEWER, grants=["read:org/a/*"])
    assert outsider.get(url).json()["results"] == []
    insider = api_client_for(context, role=Role.VIEWER, grants=["read:org/b"])
    [event] = insider.get(url).json()["results"]
    assert event["action"] == "document_delete"
    assert event["before"]["title"] == "Board minutes"

    browser = Client()
    browser.force_login(make_user(context=context, grants=["read:org/a/*"]))
    page = browser.get(f"/c/{context.slug}/audit/")
    assert page.status_code == 200
    assert "Board minutes" not in page.content.decode()


def test_predicate_fact_counts_count_only_the_callers_visible_facts(
    context: Context, access: ContextAccess, api_client_for: Callable[..., APIClient]
) -> None:
    for scope in ("org/a", "org/b", "org/b/user/sam"):
        person = entity_upsert(access=access, name="Alex", type="person", scope=scope).entity
        fact_write(access=access, subject=person, predicate="current_title", value="CTO")
    url = f"/api/v1/contexts/{context.slug}/predicates?limit=500"

    def count(grants: list[str]) -> int:
        rows = api_client_for(context, role=Role.VIEWER, grants=grants).get(url).json()
        return next(r["fact_count"] for r in rows["results"] if r["name"] == "current_title")

    assert count(["read:org/a"]) == 1
    assert count(["read:org/b/*"]) == 2
    assert count(["read:org/c/*"]) == 0
    assert count(["read:*"]) == 3
