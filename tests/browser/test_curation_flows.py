"""Curator and admin flows clicked through in Chromium, as a person would."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from memory.domain.access import system_access
from memory.models import Context, Entity, Fact, Predicate, Role
from memory.services.contexts import context_create
from memory.services.entities.writes import IdentifierInput, entity_upsert
from memory.services.facts.write import fact_write
from tests.browser.conftest import log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SLOW = 90_000  # the first drift page loads the embedding model in the server


@pytest.fixture
def acme(transactional_db: None) -> Context:
    """A small memory: people, their company and projects, and vocabulary drift
    (``works_for`` / ``worksFor`` where ``works_at`` is registered)."""
    context = context_create(slug="acme", name="Acme memory")
    access = system_access(context)

    def entity(name: str, type_: str, **kwargs: Any) -> Entity:
        return entity_upsert(
            access=access, name=name, type=type_, scope="org/acme", **kwargs
        ).entity

    alex = entity(
        "Alex Kim",
        "person",
        aliases=["Alex", "A. Kim"],
        identifiers=[IdentifierInput("email", "alex@acme.test")],
        attributes={"team": "platform"},
    )
    sam, priya = entity("Sam Lee", "person"), entity("Priya Shah", "person")
    acme_org, berlin = entity("Acme", "organisation"), entity("Berlin", "location")
    apollo, k8s = entity("Project Apollo", "project"), entity("Kubernetes", "product")
    fact_write(access=access, subject=alex, predicate="works_for", object=acme_org)
    fact_write(access=access, subject=sam, predicate="worksFor", object=acme_org)
    fact_write(access=access, subject=alex, predicate="knows", object=sam)
    fact_write(access=access, subject=alex, predicate="manages", object=priya)
    fact_write(access=access, subject=alex, predicate="located_in", object=berlin)
    fact_write(access=access, subject=alex, predicate="committed_to", object=apollo)
    fact_write(access=access, subject=apollo, predicate="depends_on", object=k8s)
    fact_write(access=access, subject=priya, predicate="reports_to", object=alex)
    fact_write(access=access, subject=alex, predicate="current_title", value="Engineer")
    fact_write(access=access, subject=alex, predicate="current_title", value="Head of Platform")
    fact_write(access=access, subject=alex, predicate="likesFood", value="ramen")
    return context


def test_alias_a_drift_item_see_its_facts_move_and_undo_it(
    page: Page, acme: Context, member: Callable[..., Any]
) -> None:
    member("casey", acme, Role.CURATOR)
    log_in(page, "casey")

    page.click("text=Acme memory")
    expect(page.locator(".stat").first).to_contain_text("7")
    screenshot(page, "overview")

    page.click("nav.tabs >> text=Drift", timeout=SLOW)
    item = page.locator("#drift-works_for")
    expect(item).to_be_visible(timeout=SLOW)
    expect(item).to_contain_text("2 facts")
    expect(item).to_contain_text("retracts its 2 current facts")  # said before a reject
    expect(item.locator("select[name=target]")).to_have_value("works_at")  # top suggestion
    screenshot(page, "drift")
    item.locator("button[value=alias]").click()

    # The outcome and its Undo take the card's place, where the curator acted.
    resolved = page.locator("#drift-works_for.resolved")
    expect(resolved).to_contain_text("moved 2 facts")
    expect(resolved.locator("button:has-text('Undo')")).to_be_visible()
    expect(page.locator("#flash")).not_to_contain_text("moved 2 facts")
    expect(page.locator("#drift-works_for select")).to_have_count(0)
    assert page.url.endswith("/c/acme/drift/")  # htmx swapped the card in place
    screenshot(page, "drift-resolved-at-the-card")

    page.click("nav.tabs >> text=Registry")
    page.click("#p-works_at >> a:has-text('works_at')")
    facts = page.locator("#predicate-facts")
    expect(facts).to_contain_text("Alex Kim")
    expect(facts).to_contain_text("Sam Lee")
    expect(facts).to_contain_text("worksFor")  # the raw predicate is kept
    expect(page.locator(".chips")).to_contain_text("works_for")  # now an alias
    screenshot(page, "predicate")

    page.click("nav.tabs >> text=Audit log")
    row = page.locator("tr", has_text="aliased works_for → works_at")
    row.locator("button:has-text('Undo')").click()
    expect(page.locator("#flash")).to_contain_text("Undone")
    expect(page.locator("tr.undone", has_text="aliased works_for")).to_have_count(1)
    screenshot(page, "audit")

    page.click("nav.tabs >> text=Drift", timeout=SLOW)
    expect(page.locator("#drift-works_for")).to_contain_text("2 facts", timeout=SLOW)
    page.click("#drift-works_for h2 a")
    expect(page.locator("#predicate-facts")).to_contain_text("Alex Kim")
    expect(page.locator("#predicate-facts")).to_contain_text("Sam Lee")
    assert Fact.objects.filter(predicate__name="works_for").count() == 2

    alex = Entity.objects.get(name="Alex Kim")
    page.goto(f"/c/acme/entities/{alex.pk}/")
    expect(page.locator("svg.graph a.node")).to_have_count(5)
    screenshot(page, "entity")


def _csv(path: Path, rows: int) -> Path:
    lines = ["name,type,scope,domain"]
    lines += [f"Company {i:04},organisation,org/acme,company{i:04}.test" for i in range(rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_seed_a_thousand_entities_and_watch_the_progress_bar_finish(
    page: Page,
    acme: Context,
    member: Callable[..., Any],
    task_worker: Callable[[], Any],
    tmp_path: Path,
) -> None:
    member("ada", acme, Role.ADMIN)
    log_in(page, "ada")
    page.goto("/c/acme/entities/")
    page.click("text=Seed entities")

    page.set_input_files("input[name=file]", str(_csv(tmp_path / "companies.csv", 1000)))
    page.click("button:has-text('Upload and import')")
    page.wait_for_url(re.compile(r"/entities/seed/jobs/\d+/$"))
    bar = page.locator("#job-progress")
    expect(bar).to_be_visible()
    first = int(bar.get_attribute("value") or 0)
    worker = task_worker()  # the job waits, polled, until a worker takes it

    seen = {first}
    deadline = time.monotonic() + 600  # generous: a shared CI machine can be slow
    while time.monotonic() < deadline and not page.locator("#job-report").count():
        seen.add(int(page.locator("#job-progress").get_attribute("value") or 0))
        page.wait_for_timeout(200)

    expect(page.locator("#job-summary")).to_have_text(
        "1,000 created, 0 matched, 0 rows failed", timeout=SLOW
    )
    expect(page.locator("#job-progress")).to_have_attribute("value", "100")
    expect(page.locator(".progress-text")).to_contain_text("1,000 of 1,000 rows")
    assert first < 100 and min(seen) < 100, seen  # the bar was watched filling up
    assert page.locator("#job-status[hx-trigger]").count() == 0  # polling stopped (286)
    screenshot(page, "seed-job")
    assert worker.wait(timeout=30) == 0
    assert Entity.objects.filter(seeded=True).count() == 1000


def test_an_alias_that_collides_shows_the_error_inline(
    page: Page, acme: Context, member: Callable[..., Any]
) -> None:
    member("casey", acme, Role.CURATOR)
    log_in(page, "casey")
    page.goto("/c/acme/registry/")
    row = page.locator("#p-works_at")

    row.get_by_label("New alias for works_at").fill("knows")
    row.locator("button:has-text('Add')").click()

    error = page.locator("#p-works_at .field-error")
    expect(error).to_contain_text("collides with the registered predicate 'knows'")
    page.get_by_label("New alias for works_at").fill("staffed at")
    page.locator("#p-works_at button:has-text('Add')").click()
    expect(page.locator("#p-works_at .chips")).to_contain_text("staffed_at")
    expect(page.locator("#p-works_at .field-error")).to_have_count(0)
    page.get_by_label("New alias for works_at").fill("knows")
    page.locator("#p-works_at button:has-text('Add')").click()
    expect(page.locator("#p-works_at .field-error")).to_be_visible()
    page.evaluate("document.getElementById('p-works_at').scrollIntoView({block: 'center'})")
    screenshot(page, "registry", full_page=False)


def test_promote_a_drift_item_with_the_form_it_loads_when_opened(
    page: Page, acme: Context, member: Callable[..., Any]
) -> None:
    member("casey", acme, Role.CURATOR)
    log_in(page, "casey")

    page.goto("/c/acme/drift/", timeout=SLOW)
    item = page.locator("#drift-likes_food")
    expect(item).to_be_visible(timeout=SLOW)
    expect(item.locator("input[name=category]")).to_have_count(0)  # not rendered yet
    item.locator("details.promote summary").click()
    category = item.locator("input[name=category]")
    expect(category).to_be_visible(timeout=SLOW)
    expect(item.locator("select[name=kind]")).to_have_value("attribute")  # from its examples
    category.fill("preferences")
    screenshot(page, "drift-promote")
    item.locator("button:has-text('Register likes_food')").click()

    expect(page.locator("#drift-likes_food.resolved")).to_contain_text("likes_food")
    expect(page.locator("#drift-likes_food details.promote")).to_have_count(0)
    promoted = Predicate.objects.get(context=acme, name="likes_food")
    assert (promoted.status, promoted.category) == ("registered", "preferences")


def test_page_through_an_entitys_facts_in_place(
    page: Page, acme: Context, member: Callable[..., Any]
) -> None:
    access = system_access(acme)
    alex = Entity.objects.get(name="Alex Kim")
    for i in range(25):
        fact_write(access=access, subject=alex, predicate="interested_in", value=f"topic {i}")
    member("vic", acme, Role.VIEWER)
    log_in(page, "vic")
    page.goto(f"/c/acme/entities/{alex.pk}/")
    facts = page.locator("#entity-facts")
    expect(facts.locator("tbody tr")).to_have_count(20)

    facts.locator("a:has-text('Lower ranked')").click()

    expect(facts.locator(".pager")).to_contain_text("21–32")  # 25 + Alex's 7 of the fixture
    expect(facts.locator("tbody tr")).to_have_count(12)
    expect(page.locator("svg.graph a.node")).to_have_count(5)  # the rest stayed as it was
    assert page.url.endswith(f"/entities/{alex.pk}/")  # swapped in place by htmx
    facts.locator("a:has-text('Higher ranked')").click()
    expect(facts.locator("tbody tr")).to_have_count(20)
