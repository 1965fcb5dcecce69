"""Items in Chromium, as a curator clicks them: walk the namespace tree, open an item,
follow one of its facts, delete the item (its facts go with it) and undo the delete; an
admin's default for extraction, and items carried by a memory's export into another
context."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from memory.domain.access import system_access
from memory.models import Context, ContextMembership, Fact, FactStatus, Item, Role, Turn
from memory.services.contexts import context_create
from memory.services.entities.writes import entity_upsert
from memory.services.facts.write import fact_write
from memory.services.items.writes import ItemPut, items_write
from tests.browser.conftest import log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SLOW = 90_000  # the import's worker starts Django before it imports


@pytest.fixture
def store(transactional_db: None) -> dict[str, Any]:
    """Two items under org/acme/user/alex and one under org/beta; the first stands for
    an extracted item: its turn, and a fact from that turn."""
    context = context_create(slug="store", name="Store")
    access = system_access(context)
    for namespace, key, value in (
        (("org", "acme", "user", "alex"), "profile", {"name": "Alex Kim", "team": "search"}),
        (("org", "acme", "user", "alex"), "settings", {"theme": "dark"}),
        (("org", "beta"), "about", {"text": "a small firm"}),
    ):
        items_write(
            access=access,
            puts=[ItemPut(namespace=namespace, key=key, value=value, index=["$"])],
        )
    turn = Turn.objects.create(
        context=context,
        scope="org/acme/user/alex",
        text="Alex Kim works at Acme.",
        ref="item:org/acme/user/alex#profile",
    )
    alex, acme = (
        entity_upsert(access=access, name=name, type=type_, scope="org/acme/user/alex").entity
        for name, type_ in (("Alex Kim", "person"), ("Acme", "organisation"))
    )
    fact = fact_write(access=access, subject=alex, predicate="works_at", object=acme).fact
    Fact.objects.filter(pk=fact.pk).update(turn=turn)
    item = Item.objects.get(context=context, key="profile")
    Item.objects.filter(pk=item.pk).update(turn=turn)
    return {"context": context, "item": item, "fact": fact}


def test_walk_the_tree_open_an_item_delete_it_and_undo(
    page: Page, member: Callable[..., Any], store: dict[str, Any]
) -> None:
    member("curator", store["context"], Role.CURATOR)
    log_in(page, "curator")
    page.goto("/c/store/items/")
    tree = page.get_by_test_id("namespace-tree")
    for label in ("org", "acme", "user", "alex"):
        tree.get_by_role("link", name=label, exact=True).click()
        expect(tree.locator("a[aria-current]")).to_contain_text(label)
    expect(page).to_have_url(
        re.compile(r"/c/store/items/\?namespace=org&namespace=acme&namespace=user&namespace=alex$")
    )
    listing = page.get_by_test_id("namespace-items")
    expect(listing).to_contain_text("settings")
    screenshot(page, "items-tree-opened")

    listing.get_by_role("link", name="profile").click()
    expect(page.get_by_test_id("item-key")).to_have_text("profile")
    expect(page.get_by_test_id("item-value")).to_contain_text('"team": "search"')
    expect(page.get_by_test_id("item-extracted")).to_contain_text("works_at")
    screenshot(page, "item-page")

    page.get_by_test_id("item-delete").click()
    flash = page.locator("#flash")
    expect(flash).to_contain_text("Deleted item org / acme / user / alex · profile")
    expect(flash).to_contain_text("retracted the 1 fact it extracted")
    assert not Item.objects.filter(pk=store["item"].pk).exists()
    assert Fact.objects.get(pk=store["fact"].pk).status == FactStatus.RETRACTED
    expect(page.get_by_test_id("namespace-items")).not_to_contain_text("profile")

    flash.get_by_role("button", name="Undo").click()
    expect(page.get_by_test_id("namespace-items")).to_contain_text("profile")
    assert Item.objects.get(pk=store["item"].pk).value == {"name": "Alex Kim", "team": "search"}
    assert Fact.objects.get(pk=store["fact"].pk).status == FactStatus.CURRENT
    screenshot(page, "item-delete-undone")


def test_a_fact_page_links_to_the_item_it_came_from(
    page: Page, member: Callable[..., Any], store: dict[str, Any]
) -> None:
    member("viewer", store["context"], Role.VIEWER)
    log_in(page, "viewer")
    page.goto(f"/c/store/facts/{store['fact'].pk}/")
    page.get_by_test_id("provenance-item").get_by_role("link").click()
    expect(page.get_by_test_id("item-key")).to_have_text("profile")
    expect(page.get_by_test_id("item-delete")).to_have_count(0)


def test_an_admin_sets_the_default_for_extraction_and_undoes_it(
    page: Page, member: Callable[..., Any], store: dict[str, Any]
) -> None:
    context: Context = store["context"]
    member("admin", context, Role.ADMIN)
    log_in(page, "admin")
    page.goto("/c/store/items/")
    tree = page.get_by_test_id("namespace-tree")
    for label in ("org", "beta"):  # browsed by htmx: the address follows
        tree.get_by_role("link", name=label, exact=True).click()
        expect(tree.locator("a[aria-current]")).to_contain_text(label)
    page.get_by_label("A put that does not say whether to extract facts").select_option("on")
    page.get_by_test_id("item-extract-form").get_by_role("button", name="Save").click()
    flash = page.locator("#flash")
    expect(flash).to_contain_text("Item puts extract facts unless they say otherwise.")
    # The namespace the admin had open stays open.
    expect(page.get_by_test_id("namespace-tree").locator("a[aria-current]")).to_contain_text("beta")
    assert page.url.endswith("/c/store/items/?namespace=org&namespace=beta")
    context.refresh_from_db()
    assert context.item_extract is True
    screenshot(page, "items-extract-setting")
    flash.get_by_role("button", name="Undo").click()
    expect(page.locator("#flash")).to_contain_text("Undone")
    context.refresh_from_db()
    assert context.item_extract is False


def test_items_travel_in_the_export_to_an_empty_context(
    page: Page,
    member: Callable[..., Any],
    store: dict[str, Any],
    task_worker: Callable[[], Any],
    tmp_path: Path,
) -> None:
    target = context_create(slug="copy", name="Copy")
    admin = member("admin", store["context"], Role.ADMIN)
    ContextMembership.objects.create(
        user=admin, context=target, role=Role.ADMIN, grants=["read,write:*"]
    )
    log_in(page, "admin")
    page.goto("/c/store/memory/")
    expect(page.locator("#import-refused")).to_contain_text("and 3 items")
    with page.expect_download() as download:
        page.click("text=Download the export (JSON lines)")
    exported = tmp_path / "store.memory.jsonl"
    download.value.save_as(exported)

    page.goto("/c/copy/memory/")
    page.set_input_files("input[name=file]", str(exported))
    page.click("button:has-text('Upload and import')")
    page.wait_for_url(re.compile(r"/c/copy/memory/jobs/\d+/$"))
    worker = task_worker()
    expect(page.locator("#job-state")).to_have_text("finished", timeout=SLOW)
    expect(page.locator("#job-counts")).to_contain_text("item")
    assert worker.wait(timeout=30) == 0

    page.goto("/c/copy/items/?namespace=org&namespace=acme&namespace=user&namespace=alex")
    page.get_by_test_id("namespace-items").get_by_role("link", name="profile").click()
    expect(page.get_by_test_id("item-value")).to_contain_text('"name": "Alex Kim"')
    # Still linked to what it extracted: the copied fact, and the fact to it.
    page.get_by_test_id("item-extracted").get_by_test_id("extracted-fact").click()
    expect(page.get_by_test_id("provenance-item")).to_contain_text("profile")
    assert Item.objects.filter(context=target).count() == 3
