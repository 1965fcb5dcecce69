"""What a newcomer meets first, as they click it: a context created on the staff page
opens for its creator, the slug check works in the browser, and a token is revoked only
after a second, explained click."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from playwright.sync_api import Page, expect

from memory.models import ApiToken, Role
from memory.services.contexts import context_create
from memory.services.tokens import token_issue
from tests.browser.conftest import log_in, screenshot


def test_staff_create_a_context_and_open_it_with_the_slug_checked_in_the_browser(
    page: Page, member: Callable[..., Any]
) -> None:
    home = context_create(slug="home", name="Home")
    staff = member("staff-person", home, Role.VIEWER)
    staff.is_staff = True
    staff.save(update_fields=["is_staff"])
    said: list[str] = []
    page.on("console", lambda m: said.append(m.text) if m.type in {"error", "warning"} else None)
    log_in(page, "staff-person")
    page.goto("/people/")

    slug = page.locator("#new-slug")
    slug.fill("not a slug!")
    assert slug.evaluate("e => e.validity.patternMismatch") is True  # the pattern compiles
    slug.fill("research")
    assert slug.evaluate("e => e.validity.valid") is True
    page.fill("#new-name", "Research")
    page.click("button:has-text('Create context')")
    expect(page.locator(".message").first).to_contain_text("you are its admin")
    with page.expect_navigation() as opened:
        page.locator("#context-research a:has-text('Open')").click()
    response = opened.value
    assert response is not None and response.status == 200 and response.url.endswith("/research/")
    expect(page.locator("body")).not_to_contain_text("not found")
    assert not said, said


def test_revoking_a_token_asks_first_and_says_what_it_does(
    page: Page, member: Callable[..., Any]
) -> None:
    context = context_create(slug="tok", name="Tokens")
    admin = member("token-admin", context, Role.ADMIN)
    token = token_issue(user=admin, context=context, grants=["read:*"], name="agent").token
    log_in(page, "token-admin")
    page.goto("/c/tok/tokens/")

    revoke = page.get_by_test_id(f"revoke-{token.pk}")
    confirm = revoke.locator("button:has-text('Revoke this token')")
    expect(confirm).to_be_hidden()
    revoke.locator("summary").click()
    expect(revoke).to_contain_text("is refused from now on. This cannot be undone.")
    screenshot(page, "token-revoke-confirm")
    assert ApiToken.objects.get(pk=token.pk).revoked_at is None  # one click did nothing
    confirm.click()
    expect(page.locator(".message").first).to_contain_text("it no longer works")
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None
