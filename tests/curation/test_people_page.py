"""Contexts and people: staff create contexts and manage members; nobody else may."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from memory.models import AuditEvent, Context, ContextMembership, Role

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(make_user: Callable[..., Any]) -> Client:
    user = make_user("staff-person")
    user.is_staff = True
    user.save()
    browser = Client()
    browser.force_login(user)
    return browser


def test_staff_create_a_context_and_add_a_login_and_an_agent(staff: Client) -> None:
    response = staff.post("/people/contexts", {"slug": "research", "name": "Research"})
    assert response.status_code == 302
    context = Context.objects.get(slug="research")

    added = staff.post(
        "/people/research/members", {"username": "rosa", "role": "curator", "kind": "login"},
        follow=True,
    )  # fmt: skip
    text = added.content.decode()
    assert "Added rosa as curator in research" in text and "shown this once" in text
    password = text.split("shown this once: ")[1].split("<")[0].strip()
    assert Client().login(username="rosa", password=password)

    staff.post("/people/research/members", {"username": "bot", "role": "viewer", "kind": "agent"})
    assert not get_user_model().objects.get(username="bot").has_usable_password()

    page = staff.get("/people/").content.decode()
    assert "rosa" in page and "agent" in page and "Research" in page
    roles = dict(
        ContextMembership.objects.filter(context=context).values_list("user__username", "role")
    )
    assert roles == {"staff-person": Role.ADMIN, "rosa": Role.CURATOR, "bot": Role.VIEWER}


def test_the_creator_of_a_context_is_its_admin_and_can_open_it(staff: Client) -> None:
    created = staff.post("/people/contexts", {"slug": "research", "name": "Research"}, follow=True)

    assert "you are its admin" in created.content.decode()
    membership = ContextMembership.objects.get(context__slug="research")
    assert (membership.user.username, membership.role) == ("staff-person", Role.ADMIN)
    assert staff.get("/c/research/").status_code == 200


def test_staff_change_a_role_and_remove_a_member(
    staff: Client, context: Context, make_user: Callable[..., Any]
) -> None:
    viewer = make_user("val", context=context, role=Role.VIEWER)
    staff.post(f"/people/{context.slug}/members/{viewer.pk}/role", {"role": "curator"})
    assert ContextMembership.objects.get(user=viewer).role == Role.CURATOR
    staff.post(f"/people/{context.slug}/members/{viewer.pk}/remove")
    assert not ContextMembership.objects.filter(user=viewer).exists()
    assert AuditEvent.objects.filter(context=context, action="membership_remove").count() == 1


def test_the_last_admin_who_can_log_in_stays(
    staff: Client, context: Context, make_user: Callable[..., Any]
) -> None:
    admin = make_user("only-admin", context=context, role=Role.ADMIN)
    page = staff.post(f"/people/{context.slug}/members/{admin.pk}/remove", follow=True)
    assert "last admin" in page.content.decode()
    assert ContextMembership.objects.filter(user=admin, role=Role.ADMIN).exists()


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("/people/contexts", {"slug": "Bad Slug!"}, "Context not created"),
        ("/people/acme-test/members", {"username": "x y", "role": "viewer"}, "Not added"),
        ("/people/acme-test/members", {"username": "newbie", "role": "owner"}, "Not added"),
    ],
)
def test_bad_input_writes_nothing_and_says_why(
    staff: Client, context: Context, path: str, body: dict[str, str], message: str
) -> None:
    users, contexts = get_user_model().objects.count(), Context.objects.count()
    page = staff.post(path, body, follow=True)
    assert page.status_code == 200 and message in page.content.decode()
    assert (get_user_model().objects.count(), Context.objects.count()) == (users, contexts)


def test_not_for_members_who_are_not_staff(context: Context, make_user: Callable[..., Any]) -> None:
    browser = Client()
    browser.force_login(make_user(context=context, role=Role.ADMIN))
    refused = browser.get("/people/")
    assert refused.status_code == 403
    html = refused.content.decode()
    assert '<link rel="stylesheet"' in html  # the dashboard's own look, not a bare page
    assert "<h1>Not allowed" in html and "Contexts and people is for staff" in html
    assert 'href="/"' in html
    assert browser.post("/people/contexts", {"slug": "sneaky"}).status_code == 403
    assert not Context.objects.filter(slug="sneaky").exists()
    assert Client().get("/people/").status_code == 302  # to the login page
