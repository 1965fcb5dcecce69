"""The small things a curator notices: the icon, plurals, the figures explained, links."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.staticfiles import finders
from django.test import Client

from memory.domain.access import ContextAccess
from memory.models import Context, Role
from memory.services.entities.writes import entity_upsert
from memory.services.facts.write import fact_write
from tests.curation.conftest import page, person

pytestmark = pytest.mark.django_db


def test_every_page_links_an_icon_that_exists(viewer: Client, base: str) -> None:
    html = page(viewer.get(f"{base}/"))

    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in html
    assert finders.find("favicon.svg")
    legacy = Client().get("/favicon.ico")
    assert legacy.status_code == 301 and legacy["Location"] == "/static/favicon.svg"


def test_one_of_a_thing_is_singular(viewer: Client, base: str, access: ContextAccess) -> None:
    alex = person(access, "Alex")
    acme = entity_upsert(access=access, name="Acme", type="organisation", scope="org/acme").entity
    fact_write(access=access, subject=alex, predicate="works_at", object=acme)

    html = page(viewer.get(f"{base}/"))

    assert '<span class="stat-label">current fact</span>' in html
    assert '<span class="stat-label">entities</span>' in html
    assert "1 facts" not in html


def test_variants_per_concept_is_explained(viewer: Client, base: str) -> None:
    html = page(viewer.get(f"{base}/"))

    assert 'id="variants-explained"' in html
    assert "Aliasing, promoting or rejecting a drift item lowers it" in html


def test_the_home_page_gives_the_api_path_without_a_trailing_slash(
    client_for: Callable[..., Client], context: Context
) -> None:
    html = page(client_for(Role.VIEWER).get("/"))

    assert f"<code>/api/v1/contexts/{context.slug}</code>" in html
    assert f"/api/v1/contexts/{context.slug}/</code>" not in html


def test_deleting_an_entity_with_one_fact_says_one_fact(
    curator: Client, base: str, access: ContextAccess, settings: Any
) -> None:
    alex = person(access, "Alex")
    fact_write(access=access, subject=alex, predicate="current_title", value="CTO")

    response = curator.post(f"{base}/entities/{alex.pk}/delete", follow=True)

    assert "Deleted Alex and 1 fact about it." in page(response)


def test_the_home_page_names_contexts_as_contexts(viewer: Client) -> None:
    html = viewer.get("/").content.decode()

    assert "<h1>Your contexts</h1>" in html and "Your memories" not in html
