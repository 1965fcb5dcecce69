"""An unknown dashboard address gets the dashboard's own 404 page, with the way back."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.curation.conftest import page

pytestmark = pytest.mark.django_db


def test_an_unknown_dashboard_url_gets_a_page_with_links_back(viewer: Client) -> None:
    response = viewer.get("/no/such/page")

    html = page(response)
    assert response.status_code == 404
    assert "<h1>Page not found" in html and "<code>/no/such/page</code>" in html
    assert 'href="/"' in html and 'href="/api/docs/"' in html
    assert '<link rel="stylesheet"' in html  # the dashboard's own look, not a bare page


def test_the_404_page_does_not_need_a_login(client: Client) -> None:
    response = client.get("/no/such/page")

    assert response.status_code == 404 and "Page not found" in page(response)
