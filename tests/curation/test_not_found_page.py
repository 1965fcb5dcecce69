"""An unknown dashboard address gets the dashboard's own 404 page, with the way back."""

from __future__ import annotations

import pytest
from django.test import Client, RequestFactory

from memory.urls import handler500
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


def test_a_server_error_gets_the_dashboard_s_own_page(rf: RequestFactory) -> None:
    response = handler500(rf.get("/c/acme/"))

    html = response.content.decode()
    assert response.status_code == 500
    assert '<link rel="stylesheet"' in html and "<h1>Something went wrong" in html
    assert 'href="/"' in html


def test_a_server_error_under_the_api_stays_json(rf: RequestFactory) -> None:
    response = handler500(rf.get("/api/v1/contexts/"))

    assert response.status_code == 500 and response["Content-Type"] == "application/json"
