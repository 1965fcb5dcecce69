"""Curating claims in Chromium, as a person would: retract a wrong fact from the entity
page and undo it; correct a single value and read its history on the fact page; walk a
conversation and retract what one turn produced."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from memory.domain.access import system_access
from memory.models import Entity, Fact, FactStatus, Role, Turn
from memory.services.contexts import context_create
from memory.services.entities.writes import entity_upsert
from memory.services.facts.write import fact_write
from tests.browser.conftest import log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def claims(transactional_db: None) -> dict[str, Any]:
    context = context_create(slug="claims", name="Claims")
    access = system_access(context)

    def entity(name: str, type_: str) -> Entity:
        return entity_upsert(access=access, name=name, type=type_, scope="org/acme").entity

    alex, acme, globex = (
        entity("Alex Kim", "person"),
        entity("Acme", "organisation"),
        entity("Globex", "organisation"),
    )
    right = fact_write(access=access, subject=alex, predicate="works_at", object=acme).fact
    wrong = fact_write(access=access, subject=alex, predicate="works_at", object=globex).fact
    title = fact_write(access=access, subject=alex, predicate="current_title", value="Enginer")
    turns = [
        Turn.objects.create(
            context=context,
            scope="org/acme",
            thread="standup-42",
            speaker=speaker,
            text=text,
            said_at=datetime(2024, 5, 1, 9, minute, tzinfo=UTC),
        )
        for minute, (speaker, text) in enumerate(
            [
                ("Kim", "Morning! Alex is at Globex now, I think."),
                ("Alex Kim", "No, I still work at Acme."),
            ]
        )
    ]
    Fact.objects.filter(pk=wrong.pk).update(turn=turns[0])
    Fact.objects.filter(pk=right.pk).update(turn=turns[1])
    return {
        "context": context,
        "alex": alex,
        "right": right,
        "wrong": wrong,
        "title": title.fact,
        "turns": turns,
    }


def test_retract_a_wrong_fact_from_the_entity_page_and_undo_it(
    page: Page, member: Callable[..., Any], claims: dict[str, Any]
) -> None:
    member("curator", claims["context"], Role.CURATOR)
    log_in(page, "curator")
    wrong = claims["wrong"]
    page.goto(f"/c/claims/entities/{claims['alex'].pk}/")
    page.get_by_test_id(f"retract-fact-{wrong.pk}").click()
    flash = page.locator("#flash")
    expect(flash).to_contain_text(f"Retracted fact {wrong.pk} (Alex Kim works_at Globex)")
    expect(page.locator("#entity-facts")).not_to_contain_text("Globex")
    assert Fact.objects.get(pk=wrong.pk).status == FactStatus.RETRACTED
    screenshot(page, "fact-retracted-on-entity-page")

    flash.locator("button:has-text('Undo')").click()
    expect(page.locator("#flash")).to_contain_text("Undone")
    expect(page.locator("#entity-facts")).to_contain_text("Globex")
    assert Fact.objects.get(pk=wrong.pk).status == FactStatus.CURRENT


def test_correct_a_single_value_and_read_its_history_on_the_fact_page(
    page: Page, member: Callable[..., Any], claims: dict[str, Any]
) -> None:
    member("curator", claims["context"], Role.CURATOR)
    log_in(page, "curator")
    title = claims["title"]
    page.goto(f"/c/claims/facts/{title.pk}/")
    expect(page.get_by_test_id("statement")).to_contain_text("Alex Kim current title Enginer")
    page.locator("summary:has-text('Correct')").click()
    form = page.get_by_test_id("correct-form")
    form.get_by_label("Correct value").fill("Engineer")
    form.get_by_label("Why").fill("typo")
    form.locator("button:has-text('Correct')").click()

    expect(page.locator("#flash")).to_contain_text(
        "Corrected current_title of Alex Kim to Engineer"
    )
    expect(page.get_by_test_id("statement")).to_contain_text("Engineer")
    expect(page.get_by_test_id("fact-status")).to_have_text("current")
    history = page.get_by_test_id("fact-history")
    expect(history).to_contain_text(f"Replaced #{title.pk} Enginer superseded")
    screenshot(page, "fact-corrected-history")

    history.locator(f"a:has-text('#{title.pk}')").first.click()
    expect(page.get_by_test_id("fact-status")).to_have_text("superseded")
    expect(page.get_by_test_id("fact-history")).to_contain_text("Replaced by")
    expect(page.get_by_test_id("fact-history")).to_contain_text("(typo)")


def test_walk_a_conversation_and_retract_one_turns_facts(
    page: Page, member: Callable[..., Any], claims: dict[str, Any]
) -> None:
    member("curator", claims["context"], Role.CURATOR)
    log_in(page, "curator")
    page.goto("/c/claims/")
    page.locator("nav.tabs a:has-text('Conversations')").click()
    page.locator("a:has-text('standup-42')").click()
    turns = page.get_by_test_id("turn")
    expect(turns).to_have_count(2)
    expect(turns.nth(0)).to_contain_text("Kim")
    expect(turns.nth(0)).to_contain_text("Globex")
    expect(turns.nth(1)).to_contain_text("No, I still work at Acme.")

    first = turns.nth(0)
    first.get_by_test_id("turn-retract-preview").click()
    expect(first.locator(".retract-preview")).to_contain_text("takes back 1 fact")
    screenshot(page, "turn-retract-preview")
    first.get_by_test_id("turn-retract-confirm").click()
    expect(page.locator("#flash")).to_contain_text(
        f"Retracted 1 fact of turn {claims['turns'][0].pk}"
    )
    expect(page.get_by_test_id("turn").nth(0)).to_contain_text("retracted")
    # Nothing left to take back: no button that would offer it.
    expect(page.get_by_test_id("turn").nth(0).get_by_test_id("turn-retract-preview")).to_have_count(
        0
    )
    expect(page.get_by_test_id("turn").nth(0).get_by_test_id("turn-retracted")).to_have_text(
        "Every fact of this turn is retracted."
    )
    assert Fact.objects.get(pk=claims["wrong"].pk).status == FactStatus.RETRACTED
    assert Fact.objects.get(pk=claims["right"].pk).status == FactStatus.CURRENT

    page.locator("#flash button:has-text('Undo')").click()
    expect(page.locator("#flash")).to_contain_text("Undone")
    assert Fact.objects.get(pk=claims["wrong"].pk).status == FactStatus.CURRENT
    page.reload()
    expect(
        page.get_by_test_id("turn").nth(0).get_by_test_id("turn-retract-preview")
    ).to_be_visible()


def test_a_viewer_reads_the_facts_list_without_curation_controls(
    page: Page, member: Callable[..., Any], claims: dict[str, Any]
) -> None:
    member("viewer", claims["context"], Role.VIEWER)
    log_in(page, "viewer")
    page.goto("/c/claims/facts/")
    expect(page.locator("nav.tabs a[aria-current='page']")).to_have_text("Facts")
    expect(page.locator("table.facts-list tbody tr")).to_have_count(3)
    expect(page.get_by_test_id("retract-selected")).to_have_count(0)
    page.locator("table.facts-list a:has-text('#')").first.click()
    expect(page.get_by_test_id("statement")).to_be_visible()
    expect(page.locator("#fact-actions")).to_have_count(0)
