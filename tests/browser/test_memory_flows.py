"""An admin moves a memory from one context to another in the browser: the export
downloaded from one context's Export & import page, uploaded on an empty one's, and the
job watched until it has written the same memory."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from memory.domain.access import system_access
from memory.models import Context, ContextMembership, Entity, Fact, Role
from memory.services.contexts import context_create
from memory.services.entities.writes import entity_upsert
from memory.services.facts.write import fact_write
from tests.browser.conftest import log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SLOW = 90_000  # a shared CI machine: the worker starts Django before it imports


@pytest.fixture
def source(transactional_db: None) -> Context:
    context = context_create(slug="acme", name="Acme memory")
    access = system_access(context)
    people = [
        entity_upsert(access=access, name=name, type="person", scope="org/acme").entity
        for name in ("Alex Kim", "Sam Ortiz", "Priya Patel")
    ]
    acme = entity_upsert(access=access, name="Acme", type="organisation", scope="org/acme")
    for person in people:
        fact_write(access=access, subject=person, predicate="works_at", object=acme.entity)
    fact_write(access=access, subject=people[0], predicate="current_title", value="CTO")
    return context


def test_a_memory_downloaded_from_one_context_is_imported_into_an_empty_one(
    page: Page,
    source: Context,
    member: Callable[..., Any],
    task_worker: Callable[[], Any],
    tmp_path: Path,
) -> None:
    target = context_create(slug="restored", name="Restored memory")
    admin = member("ada", source, Role.ADMIN)
    ContextMembership.objects.create(user=admin, context=target, role=Role.ADMIN)
    log_in(page, "ada")

    page.goto("/c/acme/")
    page.click("nav >> text=Export & import")
    expect(page.locator("#import-refused")).to_contain_text("already holds 4 entities")
    with page.expect_download() as download:
        page.click("text=Download the export (JSON lines)")
    exported = tmp_path / "acme.memory.jsonl"
    download.value.save_as(exported)
    assert download.value.suggested_filename == "acme.memory.jsonl"

    page.goto("/c/restored/memory/")
    page.set_input_files("input[name=file]", str(exported))
    page.click("button:has-text('Upload and import')")
    page.wait_for_url(re.compile(r"/c/restored/memory/jobs/\d+/$"))
    expect(page.locator("#job-progress")).to_be_visible()
    worker = task_worker()  # the job waits, polled, until a worker takes it

    counts = page.locator("#job-counts")
    expect(counts).to_be_visible(timeout=SLOW)
    # The rows by kind, in the order an export lists them.
    expect(counts.locator("tbody td:first-child")).to_have_text(
        ["predicate", "predicate alias", "entity", "fact"]
    )
    expect(page.locator("#job-state")).to_have_text("finished")
    assert page.locator("#job-status[hx-trigger]").count() == 0  # polling stopped (286)
    screenshot(page, "memory-import-job")
    assert worker.wait(timeout=30) == 0
    assert Entity.objects.filter(context=target).count() == 4
    assert sorted(Fact.objects.filter(context=target).values_list("value_text", flat=True)) == (
        sorted(Fact.objects.filter(context=source).values_list("value_text", flat=True))
    )
    # The restored context holds a memory now: its page offers no second import.
    page.goto("/c/restored/memory/")
    expect(page.locator("#import-refused")).to_be_visible()
