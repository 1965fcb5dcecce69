"""Duplicates and search, clicked through in Chromium."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from memory.domain.access import system_access
from memory.models import Context, Entity, Role
from memory.models.duplicate import DuplicateCandidate
from memory.services.contexts import context_create
from memory.services.entities.writes import entity_upsert
from memory.services.facts.write import fact_write
from memory.services.ingest.documents import document_create, documents_embed
from tests.browser.conftest import log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SLOW = 90_000  # the first query embedding loads the model in the server


@pytest.fixture
def acme(transactional_db: None) -> Context:
    return context_create(slug="acme", name="Acme memory")


def test_merge_a_cluster_see_the_redirect_and_undo_it(
    page: Page, acme: Context, member: Callable[..., Any]
) -> None:
    access = system_access(acme)
    shah, shaw = (
        entity_upsert(access=access, name=n, type="person", scope="org/acme").entity
        for n in ("Priya Shah", "Priya Shaw")
    )
    fact_write(access=access, subject=shaw, predicate="lives_in", value="Leeds")
    DuplicateCandidate.objects.update_or_create(  # the writes' check may have found it
        context=acme,
        entity_a=shah,
        entity_b=shaw,
        defaults={"score": 0.92, "methods": ["edit_distance"]},
    )
    member("casey", acme, Role.CURATOR)
    page.set_viewport_size({"width": 390, "height": 800})  # a phone: the cluster is far down
    log_in(page, "casey")

    page.goto("/c/acme/duplicates/")
    cluster = page.locator(f"#cluster-{shah.pk}-{shaw.pk}")
    expect(cluster).to_contain_text("a letter or two apart")
    cluster.locator(f"#survivor-{shah.pk}-{shaw.pk}-{shah.pk}").check()
    cluster.locator("button:has-text('Preview')").click()
    expect(cluster.locator(".merge-preview")).to_contain_text("Facts moving")
    expect(cluster.locator("[data-testid=facts-moving]")).to_have_text("1")
    screenshot(page, "duplicates-preview")

    merge = cluster.locator("button:has-text('Merge')")
    merge.scroll_into_view_if_needed()
    assert page.evaluate("window.scrollY") > 0
    merge.click()
    expect(page.locator("#flash")).to_contain_text("Merged 1 entity into Priya Shah")
    expect(page.locator("#flash")).to_be_in_viewport()  # said where the curator looks
    expect(page.locator(".duplicate-cluster")).to_have_count(0)
    assert page.url.endswith("/c/acme/duplicates/")  # htmx swapped the list in place
    assert Entity.objects.get(pk=shaw.pk).merged_into_id == shah.pk

    other = page.context.new_page()
    other.goto(f"/c/acme/entities/{shaw.pk}/")
    expect(other.locator(".message.warning")).to_contain_text("Merged into")
    other.close()

    page.locator("#flash button:has-text('Undo')").click()
    expect(page.locator("#flash")).to_contain_text("Undid the merge into Priya Shah")
    expect(page.locator(".duplicate-cluster")).to_have_count(1)
    assert Entity.objects.get(pk=shaw.pk).merged_into_id is None


def test_a_pair_explains_itself_and_the_list_refreshes_when_a_scan_ends(
    page: Page,
    acme: Context,
    member: Callable[..., Any],
    task_worker: Callable[[], Any],
) -> None:
    access = system_access(acme)
    born = {"date_of_birth": "1988-04-12", "city": "Leeds"}
    patel, patil = (
        entity_upsert(access=access, name=n, type="person", scope=s, attributes=born).entity
        for n, s in (("Priya Patel", "org/acme"), ("Priya Patil", "org/globex"))
    )
    member("casey", acme, Role.CURATOR)
    log_in(page, "casey")

    # Found as they were written: no scan.
    page.goto("/c/acme/duplicates/")
    cluster = page.locator(f"#cluster-{patel.pk}-{patil.pk}")
    explain = cluster.locator("[data-testid=explain]")
    explain.locator("summary").click()
    expect(explain).to_contain_text("Priya Patel ~ Priya Patil")
    rows = explain.locator("tbody tr")
    expect(rows.filter(has_text="date_of_birth")).to_contain_text("equal")
    expect(rows.filter(has_text="date_of_birth").locator("td.num")).to_have_text(re.compile(r"^\+"))
    expect(rows.filter(has_text="city")).to_contain_text("equal")
    screenshot(page, "duplicates-explain")

    # A third spelling written behind the page's back; a scan is queued; the list polls
    # until the worker has run it, then shows the new pair without a reload.
    entity_upsert(access=access, name="Priya Pattel", type="person", scope="org/initech",
                  attributes=born)  # fmt: skip
    page.locator("button:has-text('Scan now')").click()
    expect(page.locator("[data-testid=scan-running]")).to_be_visible()
    with page.expect_response(
        lambda r: "poll=1" in r.url and r.status == 286, timeout=SLOW
    ) as last:
        task_worker()
    assert last.value.status == 286
    expect(page.locator("[data-testid=scan-running]")).to_have_count(0)
    expect(page.locator(".duplicate-cluster").first).to_contain_text("Priya Pattel")


def test_search_as_you_type_and_switch_modes(
    page: Page, acme: Context, member: Callable[..., Any]
) -> None:
    access = system_access(acme)
    docs = [
        document_create(access=access, title=t, text=x, scope="org/acme")
        for t, x in (
            ("Harbour", "The harbour crane lifted containers onto the ship at dawn."),
            ("Orchard", "Apples ripen in the orchard; the harvest starts in September."),
        )
    ]
    documents_embed(document_ids=[d.pk for d in docs])
    member("vic", acme, Role.VIEWER)
    log_in(page, "vic")

    page.goto("/c/acme/search/")
    page.select_option("#search-mode", "bm25")
    page.fill("#search-q", "harbour crane")
    results = page.locator("#search-results")
    expect(results.locator(".search-result").first).to_contain_text("harbour crane", timeout=SLOW)
    expect(results).to_contain_text("bm25")
    expect(results).not_to_contain_text("cosine")
    assert "q=harbour%20crane" in page.url  # hx-push-url keeps the search linkable

    page.select_option("#search-mode", "hybrid")
    expect(results).to_contain_text("cosine", timeout=SLOW)
    expect(results.locator(".search-result").first).to_contain_text("harbour crane")
    assert "mode=hybrid" in page.url
    screenshot(page, "search-hybrid")
