"""The Content Security Policy lets htmx work and the browser reports no violation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import ConsoleMessage, Page, expect

from memory.models import Context, Role
from memory.services.contexts import context_create
from tests.browser.conftest import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_htmx_runs_under_the_policy_without_violations(
    page: Page, transactional_db: None, member: Callable[..., Any]
) -> None:
    context: Context = context_create(slug="acme", name="Acme memory")
    member("vic", context, Role.VIEWER)
    errors: list[str] = []

    def note(message: ConsoleMessage) -> None:
        if message.type == "error":
            errors.append(message.text)

    page.on("console", note)
    log_in(page, "vic")
    response = page.goto("/c/acme/search/")
    assert response is not None
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy
    assert "unsafe-eval" not in policy
    assert page.evaluate("typeof window.htmx") == "object"

    # An htmx request (the mode switch swaps in the results partial), not a page load.
    with page.expect_request(lambda r: r.headers.get("hx-request") == "true") as request:
        page.select_option("#search-mode", "bm25")
    assert "mode=bm25" in request.value.url
    page.wait_for_url("**mode=bm25**")  # the swap and hx-push-url ran
    expect(page.locator("#search-results")).to_be_visible()
    assert not [e for e in errors if "Content Security Policy" in e], errors
