"""The constraints page in Chromium, at a desktop and a phone width: the counts, the
violations, and the fixes by keyboard — x makes an exception, u undoes it, r retracts,
c corrects."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from memory.domain.access import system_access
from memory.models import Context, Fact, Predicate, Role
from memory.services.contexts import context_create
from memory.services.entities.writes import entity_upsert
from memory.services.facts.write import fact_write
from tests.browser.conftest import log_in, screenshot
from tests.browser.test_every_page import OVERFLOW

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def broken(transactional_db: None) -> Context:
    """Three violations of works_at's library rules: Alex and Kim work at people, and
    Acme works at itself."""
    context = context_create(slug="rules", name="Rules")
    access = system_access(context)

    def entity(name: str, type_: str) -> Any:
        return entity_upsert(access=access, name=name, type=type_, scope="org").entity

    alex, kim, sam = entity("Alex", "person"), entity("Kim", "person"), entity("Sam", "person")
    acme = entity("Acme", "organisation")
    entity("Globex", "organisation")
    fact_write(access=access, subject=acme, predicate="works_at", object=acme)
    fact_write(access=access, subject=alex, predicate="works_at", object=sam)
    fact_write(access=access, subject=kim, predicate="works_at", object=sam)
    return context


def _exceptions() -> list[int]:
    rules = Predicate.objects.get(context__slug="rules", name="works_at").constraints
    return next(r["exceptions"] for r in rules if r["type"] == "value_type")


@pytest.mark.parametrize("width", [1280, 390])
def test_a_curator_fixes_violations_by_keyboard(
    page: Page, member: Callable[..., Any], broken: Context, width: int
) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    member("fixer", broken, Role.CURATOR)
    log_in(page, "fixer")
    page.goto(f"/c/{broken.slug}/constraints/")
    expect(page.get_by_test_id("violation-count")).to_have_text("3 violations")
    rows = page.locator(".violation")
    expect(rows).to_have_count(3)
    expect(rows.nth(0)).to_have_class("card violation focused")
    fit = page.evaluate(OVERFLOW)
    assert fit["over"] <= 0, fit
    screenshot(page, f"constraints-{width}")

    # Rows are ordered subject_type (Acme) then value_type (Alex, Kim).
    page.keyboard.press("j")
    expect(rows.nth(1)).to_have_class("card violation focused")
    page.keyboard.press("x")  # Alex is an exception to value_type
    expect(page.locator("#flash")).to_contain_text("is an exception")
    expect(rows).to_have_count(2)
    assert len(_exceptions()) == 1
    page.keyboard.press("u")  # undo it: Alex's row is back
    expect(rows).to_have_count(3)
    assert _exceptions() == []

    page.keyboard.press("k")
    page.keyboard.press("k")
    expect(rows.nth(0)).to_have_class("card violation focused")
    page.keyboard.press("r")  # retract Acme's fact
    expect(page.locator("#flash")).to_contain_text("Retracted")
    expect(rows).to_have_count(2)

    # c puts the cursor in the focused row's correction: Alex works at Globex.
    expect(rows.nth(0)).to_have_class("card violation focused")
    page.keyboard.press("c")
    page.keyboard.type("Globex")
    page.keyboard.press("Enter")
    expect(page.locator("#flash")).to_contain_text("Corrected works_at of Alex to Globex")
    expect(rows).to_have_count(1)
    expect(page.get_by_test_id("violation-count")).to_have_text("1 violation")
    current = Fact.objects.get(subject__name="Alex", predicate__name="works_at", status="current")
    assert current.object is not None and current.object.name == "Globex"
    screenshot(page, f"constraints-fixed-{width}")
