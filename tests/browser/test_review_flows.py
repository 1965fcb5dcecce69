"""The review queue by keyboard, in Chromium: j/k move, a accepts, r rejects, u undoes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from memory.domain.access import system_access
from memory.models import Context, Fact, Role
from memory.services.contexts import context_create
from memory.services.ingest.run import run_create, run_execute
from tests.browser.conftest import log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CLAIMS = [("favourite_drink", "tea"), ("hobby", "chess"), ("home_city", "Lisbon")]


@pytest.fixture
def queued(transactional_db: None) -> Context:
    """Three claims from an untrusted writer's turn, waiting for review; a trusted
    current title and an untrusted proposal to replace it."""
    context = context_create(slug="queue", name="Queue")
    writer = replace(system_access(context), trusted=False)
    run = run_create(
        access=writer,
        text="Sam Okafor drinks tea, plays chess and lives in Lisbon.",
        scope="org/acme",
        infer="triples",
        triples={
            "entities": [{"name": "Sam Okafor", "type": "person"}],
            "attributes": [
                {"subject": "Sam Okafor", "key": key, "value": value} for key, value in CLAIMS
            ],
        },
    )
    run_execute(run_id=run.pk)
    return context


def _trust(value: str) -> str:
    return str(Fact.objects.get(value_text=value).trust)


def test_a_curator_accepts_two_rejects_one_and_undoes_it_by_keyboard(
    page: Page, member: Callable[..., Any], queued: Context
) -> None:
    member("reviewer", queued, Role.CURATOR)
    log_in(page, "reviewer")
    page.goto(f"/c/{queued.slug}/review/")
    expect(page.get_by_test_id("nav-pending")).to_have_text("3")
    items = page.locator(".review-item")
    expect(items).to_have_count(3)
    expect(items.nth(0)).to_have_class("review-item focused")
    screenshot(page, "review-queue")
    # j/k move the focus without deciding anything.
    page.keyboard.press("j")
    expect(items.nth(1)).to_have_class("review-item focused")
    page.keyboard.press("k")
    expect(items.nth(0)).to_have_class("review-item focused")

    page.keyboard.press("a")  # accept the first
    expect(page.locator("#flash")).to_contain_text("Accepted fact")
    expect(items).to_have_count(2)
    page.keyboard.press("a")  # the next one comes to the focus: accept it too
    expect(items).to_have_count(1)
    page.keyboard.press("r")  # reject the last
    expect(page.locator("#flash")).to_contain_text("Rejected fact")
    expect(page.locator(".empty")).to_contain_text("Nothing waits for review")
    assert sorted(_trust(v) for _, v in CLAIMS) == ["rejected", "trusted", "trusted"]

    page.keyboard.press("u")  # undo the rejection: it waits again
    expect(items).to_have_count(1)
    expect(page.get_by_test_id("nav-pending")).to_have_text("1")
    assert sorted(_trust(v) for _, v in CLAIMS) == ["pending", "trusted", "trusted"]
    screenshot(page, "review-queue-after-undo")
