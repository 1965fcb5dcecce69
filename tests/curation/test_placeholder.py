from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from memory.models import Context, ContextMembership, Role

pytestmark = pytest.mark.django_db


def test_anonymous_is_redirected_to_login(client: Client) -> None:
    response = client.get("/")

    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/"


def test_member_sees_their_contexts_only(
    client: Client, make_context: Callable[..., Context], make_user: Callable[..., Any]
) -> None:
    mine = make_context("mine-ctx")
    also_mine = make_context("also-mine")
    make_context("someone-elses")
    user = make_user("member", context=mine, role=Role.VIEWER)
    make_user("other", context=also_mine)
    ContextMembership.objects.create(user=user, context=also_mine, role=Role.ADMIN)
    client.force_login(user)

    response = client.get("/")

    assert response.status_code == 200
    assert [c.slug for c in response.context["contexts"]] == ["also-mine", "mine-ctx"]
    page = response.content.decode()
    assert "mine-ctx" in page and "also-mine" in page
    assert "someone-elses" not in page
    assert 'href="/api/docs/"' in page


def test_user_without_memberships_is_told_so(
    client: Client, make_context: Callable[..., Context], make_user: Callable[..., Any]
) -> None:
    make_context("secret-ctx")
    client.force_login(make_user("lonely"))

    page = client.get("/").content.decode()

    assert "not a member of any context" in page
    assert "secret-ctx" not in page


def test_superuser_sees_every_context(client: Client, make_context: Callable[..., Context]) -> None:
    make_context("first")
    make_context("second")
    admin = get_user_model().objects.create_superuser("root", password="pw-for-tests-only")
    client.force_login(admin)

    response = client.get("/")

    assert [c.slug for c in response.context["contexts"]] == ["first", "second"]


def test_login_page_loads_htmx_and_puts_csrf_in_hx_headers(client: Client) -> None:
    page = client.get("/accounts/login/").content.decode()

    assert "htmx" in page and ".js" in page  # django-htmx's bundled htmx, no CDN
    assert "https://" not in page
    assert 'hx-headers=\'{"X-CSRFToken": "' in page
    assert 'href="/static/css/app.css"' in page


def test_login_then_logout(client: Client, make_user: Callable[..., Any]) -> None:
    make_user("alice")

    bad = client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    good = client.post(
        "/accounts/login/", {"username": "alice", "password": "pw-for-tests-only", "next": "/"}
    )
    logout = client.post("/accounts/logout/")
    after = client.get("/")

    assert bad.status_code == 200 and "correct username and password" in bad.content.decode()
    assert (good.status_code, good["Location"]) == (302, "/")
    assert (logout.status_code, logout["Location"]) == (302, "/accounts/login/")
    assert after.status_code == 302


def test_home_refuses_post(client: Client, make_user: Callable[..., Any]) -> None:
    client.force_login(make_user())

    assert client.post("/").status_code == 405
