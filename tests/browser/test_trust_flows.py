"""Curation you can trust, clicked through in Chromium: a bulk alias that confirms first
and skips the weak, an inverse alias and its undo, a kind mismatch refused inline, and a
run retracted from its page and brought back from the audit log."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from memory.domain.access import system_access
from memory.models import Context, Entity, Fact, FactStatus, Predicate, Role, Run
from memory.services.contexts import context_create
from memory.services.entities.writes import entity_upsert
from memory.services.facts.write import fact_write
from memory.services.ingest.run import run_create, run_execute
from tests.browser.conftest import log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SLOW = 90_000  # the first drift page loads the embedding model in the server


@pytest.fixture
def drifted(transactional_db: None) -> Context:
    """Drift of four sorts: a synonym (``works_for``), a concept the registry lacks
    (``speaks_language``), an inverse (``has_employee``) and an attribute
    (``favourite_colour``) that must never become a relation."""
    context = context_create(slug="trust", name="Trust memory")
    access = system_access(context)

    def entity(name: str, type_: str) -> Entity:
        return entity_upsert(access=access, name=name, type=type_, scope="org/acme").entity

    alex, sam, dana = (
        entity("Alex Kim", "person"),
        entity("Sam Lee", "person"),
        entity("Dana Cruz", "person"),
    )
    acme, globex = entity("Acme", "organisation"), entity("Globex", "organisation")
    portuguese, french = entity("Portuguese", "topic"), entity("French", "topic")
    fact_write(access=access, subject=alex, predicate="works_for", object=acme)
    fact_write(access=access, subject=sam, predicate="worksFor", object=globex)
    fact_write(access=access, subject=dana, predicate="speaks_language", object=portuguese)
    fact_write(access=access, subject=sam, predicate="speaks_language", object=french)
    fact_write(access=access, subject=acme, predicate="has_employee", object=dana)
    fact_write(access=access, subject=globex, predicate="has_employee", object=alex)
    fact_write(access=access, subject=sam, predicate="favourite_colour", value="green")
    return context


def _drift_page(page: Page, member: Callable[..., Any], context: Context) -> None:
    member("casey", context, Role.CURATOR)
    log_in(page, "casey")
    page.goto(f"/c/{context.slug}/drift/", timeout=SLOW)
    expect(page.locator("#drift-works_for")).to_be_visible(timeout=SLOW)


def test_a_bulk_alias_confirms_first_and_skips_the_weak_item(
    page: Page, drifted: Context, member: Callable[..., Any]
) -> None:
    _drift_page(page, member, drifted)
    weak = page.locator("#drift-speaks_language")
    expect(weak.locator(".suggestions li").first).to_contain_text("weak")
    expect(weak.locator("select[name=target]")).to_have_value("")  # nothing pre-selected
    page.check("input[name=names][value=works_for]")
    page.check("input[name=names][value=speaks_language]")
    page.click("button:has-text('Alias each to its top suggestion')")

    confirm = page.locator(".bulk-confirm")
    expect(confirm).to_be_visible()
    ready = confirm.locator("[data-testid=bulk-ready]")
    expect(ready.locator("li").first).to_contain_text(re.compile(r"works_for\s*→\s*works_at"))
    expect(ready).to_contain_text("Alex Kim works_at Acme")
    expect(ready).to_contain_text("Sam Lee works_at Globex")
    expect(ready).not_to_contain_text("speaks_language")
    expect(confirm.locator("[data-testid=bulk-skipped]")).to_contain_text("speaks_language")
    screenshot(page, "trust-bulk-confirm")
    assert Predicate.objects.filter(context=drifted, name="works_for").exists()  # not yet

    confirm.locator("[data-testid=bulk-confirm]").click()
    expect(page.locator("#flash")).to_contain_text(
        "Aliased 1 drift item (works_for → works_at)", timeout=SLOW
    )
    expect(page.locator("#drift-works_for")).to_have_count(0)
    expect(page.locator("#drift-speaks_language")).to_be_visible()
    screenshot(page, "trust-bulk-done")


def test_an_inverse_alias_swaps_the_ends_and_its_undo_swaps_them_back(
    page: Page, drifted: Context, member: Callable[..., Any]
) -> None:
    _drift_page(page, member, drifted)
    item = page.locator("#drift-has_employee")
    expect(item.locator(".suggestions li").first).to_contain_text("inverse of works_at")
    expect(item.locator("select[name=target]")).to_have_value("inverse:works_at")
    screenshot(page, "trust-inverse-suggested")
    item.locator("button[value=alias]").click()

    flash = page.locator("#drift-has_employee.resolved")  # the outcome, at the card
    expect(flash).to_contain_text("Aliased has_employee → inverse of works_at")
    expect(flash).to_contain_text("subject and object swapped")
    dana = Entity.objects.get(context=drifted, name="Dana Cruz")
    moved = Fact.objects.get(subject=dana, predicate__name="works_at")
    assert moved.object is not None
    assert moved.object.name == "Acme" and moved.raw_predicate == "has_employee"
    screenshot(page, "trust-inverse-done")

    flash.locator("button:has-text('Undo')").click()
    expect(page.locator("#flash")).to_contain_text("Undone")
    page.goto(f"/c/{drifted.slug}/drift/", timeout=SLOW)
    expect(page.locator("#drift-has_employee")).to_contain_text("2 facts", timeout=SLOW)
    back = Fact.objects.get(object=dana, predicate__name="has_employee")
    assert back.subject.name == "Acme"


def test_a_kind_mismatch_is_refused_inline_and_moves_nothing(
    page: Page, drifted: Context, member: Callable[..., Any]
) -> None:
    _drift_page(page, member, drifted)
    item = page.locator("#drift-favourite_colour")
    item.locator("select[name=target]").select_option("works_at")
    item.locator("button[value=alias]").click()

    error = page.locator("#drift-favourite_colour .field-error")
    expect(error).to_contain_text("attribute")
    expect(error).to_contain_text("relation")
    screenshot(page, "trust-kind-mismatch")
    colour = Fact.objects.get(context=drifted, value_text="green")
    assert colour.predicate.name == "favourite_colour"


JUNK = {
    "entities": [
        {"name": "Alex Kim", "type": "person", "aliases": ["Lex the Hacker"]},
        {"name": "Evil Corp", "type": "organisation"},
    ],
    "relations": [{"subject": "Alex Kim", "predicate": "works_at", "object": "Evil Corp"}],
    "attributes": [{"subject": "Alex Kim", "key": "current_title", "value": "Supreme Leader"}],
}


def test_a_run_retracted_from_its_page_comes_back_from_the_audit_log(
    page: Page, drifted: Context, member: Callable[..., Any]
) -> None:
    access = system_access(drifted)
    alex = Entity.objects.get(context=drifted, name="Alex Kim")
    fact_write(access=access, subject=alex, predicate="current_title", value="Engineer")
    run = run_create(access=access, text="", scope="org/acme", infer="triples", triples=JUNK)
    run = run_execute(run_id=run.pk)
    member("casey", drifted, Role.CURATOR)
    log_in(page, "casey")

    page.goto(f"/c/{drifted.slug}/runs/{run.pk}/")
    page.click("[data-testid=retract-preview]")
    preview = page.locator(".retract-preview")
    expect(preview).to_contain_text("retract 2 facts it wrote")
    expect(preview).to_contain_text("earlier value it replaced current again")
    expect(preview).to_contain_text("Evil Corp")
    expect(preview).to_contain_text("“Lex the Hacker”")
    screenshot(page, "trust-retract-preview")
    assert Run.objects.get(pk=run.pk).retracted_at is None  # the preview wrote nothing

    preview.locator("[data-testid=retract-confirm]").click()
    expect(page.locator("#flash")).to_contain_text(f"Retracted run {run.pk}")
    expect(page.locator("#run-retracted")).to_be_visible()
    screenshot(page, "trust-retracted")
    title = Fact.objects.get(subject=alex, predicate__name="current_title", status="current")
    assert title.value_text == "Engineer"
    assert not Entity.objects.filter(context=drifted, name="Evil Corp").exists()

    page.click("nav.tabs >> text=Audit log")
    row = page.locator("tr", has_text=f"retracted run {run.pk}")
    row.locator("button:has-text('Undo')").click()
    expect(page.locator("#flash")).to_contain_text("Undone")
    screenshot(page, "trust-retract-undone")
    assert {f.status for f in Fact.objects.filter(run=run)} == {FactStatus.CURRENT}
    assert Entity.objects.filter(context=drifted, name="Evil Corp").exists()
    page.goto(f"/c/{drifted.slug}/runs/{run.pk}/")
    expect(page.locator("[data-testid=retract-preview]")).to_be_visible()
