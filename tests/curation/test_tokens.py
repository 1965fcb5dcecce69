"""The admin's tokens page: list, create (shown once), revoke; admins only."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from memory.models import ApiToken, AuditEvent, Context, Role
from memory.services.tokens import token_issue
from tests.curation.conftest import page

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(make_user: Callable[..., Any], context: Context) -> Any:
    return make_user("agent", context=context, role=Role.CURATOR)


def _raw(response: Any) -> str:
    return re.search(r'id="new-token">(md_[^<]+)<', page(response))[1]  # type: ignore[index]


def test_the_list_shows_prefix_user_grants_and_last_use(
    admin: Client, base: str, agent: Any, context: Context
) -> None:
    issued = token_issue(user=agent, context=context, grants=["read:org/*"], name="support bot")
    APIClient().get(f"/api/v1/contexts/{context.slug}", HTTP_AUTHORIZATION=f"Token {issued.raw}")

    html = page(admin.get(f"{base}/tokens/"))

    assert f"<code>{issued.token.prefix}…</code>" in html
    assert "support bot" in html and "agent" in html and "read:org/*" in html
    assert '<span class="muted">never</span>' not in html  # it was just used
    assert issued.raw not in html


def test_an_admin_creates_a_token_shown_once_that_works(
    admin: Client, base: str, agent: Any, context: Context
) -> None:
    response = admin.post(
        f"{base}/tokens/create",
        {"user": agent.pk, "name": "ingest", "grants": "read:*\nwrite:org/acme/*"},
    )

    assert response.status_code == 201
    assert response["Cache-Control"] == "no-store"
    raw = _raw(response)
    token = ApiToken.objects.get(digest=ApiToken.digest_of(raw))
    assert (token.user, token.grants, token.name) == (
        agent,
        ["read:*", "write:org/acme/*"],
        "ingest",
    )
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
    assert api.get(f"/api/v1/contexts/{context.slug}").status_code == 200
    assert raw not in page(admin.get(f"{base}/tokens/"))  # shown once
    event = AuditEvent.objects.get(action="token_issue")
    assert raw not in str(event.after) and event.summary.startswith("created token md_")


@pytest.mark.parametrize(
    ("grants", "message"),
    [
        ("", "This field is required"),
        ("read:bad scope!", "invalid scope"),
        ("delete:*", "grant access must be"),
    ],
)
def test_bad_grants_are_refused_and_nothing_is_written(
    admin: Client, base: str, agent: Any, grants: str, message: str
) -> None:
    response = admin.post(f"{base}/tokens/create", {"user": agent.pk, "grants": grants})

    assert response.status_code == 400
    assert message in page(response)
    assert not ApiToken.objects.exists()
    assert not AuditEvent.objects.filter(action="token_issue").exists()


def test_a_token_for_someone_outside_the_context_is_refused(
    admin: Client, base: str, make_user: Callable[..., Any]
) -> None:
    stranger = make_user("stranger")

    response = admin.post(f"{base}/tokens/create", {"user": stranger.pk, "grants": "read:*"})

    assert response.status_code == 400
    assert not ApiToken.objects.exists()


def test_an_admin_revokes_a_token_and_it_stops_working(
    admin: Client, base: str, agent: Any, context: Context
) -> None:
    issued = token_issue(user=agent, context=context, grants=["read:*"])

    response = admin.post(f"{base}/tokens/{issued.token.pk}/revoke")

    assert response.status_code == 302
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {issued.raw}")
    assert api.get(f"/api/v1/contexts/{context.slug}").status_code == 401
    assert AuditEvent.objects.filter(action="token_revoke").count() == 1
    again = admin.post(f"{base}/tokens/{issued.token.pk}/revoke")
    assert again.status_code == 409
    assert admin.post(f"{base}/tokens/999999/revoke").status_code == 404


@pytest.mark.parametrize("role", [Role.VIEWER, Role.CURATOR])
def test_only_admins_see_create_or_revoke_tokens(
    client_for: Callable[..., Client], base: str, agent: Any, context: Context, role: Role
) -> None:
    issued = token_issue(user=agent, context=context, grants=["read:*"])
    member = client_for(role)

    assert member.get(f"{base}/tokens/").status_code == 403
    assert (
        member.post(f"{base}/tokens/create", {"user": agent.pk, "grants": "read:*"}).status_code
        == 403
    )
    assert member.post(f"{base}/tokens/{issued.token.pk}/revoke").status_code == 403
    assert ApiToken.objects.filter(revoked_at__isnull=True).count() == 1
    assert "Tokens</a>" not in page(member.get(f"{base}/"))


def test_a_token_of_another_context_cannot_be_revoked_here(
    admin: Client, base: str, agent: Any, make_context: Callable[..., Context]
) -> None:
    other = make_context("other")
    issued = token_issue(user=agent, context=other, grants=["read:*"])

    assert admin.post(f"{base}/tokens/{issued.token.pk}/revoke").status_code == 404
    assert ApiToken.objects.get(pk=issued.token.pk).revoked_at is None


def test_a_bearer_header_gets_a_hint_to_use_token(context: Context, agent: Any) -> None:
    issued = token_issue(user=agent, context=context, grants=["read:*"])

    response = APIClient().get(
        f"/api/v1/contexts/{context.slug}", HTTP_AUTHORIZATION=f"Bearer {issued.raw}"
    )

    assert response.status_code == 401
    assert (
        "'Authorization: Token <token>', not 'Bearer <token>'"
        in response.json()["error"]["message"]
    )


def test_an_admin_creates_an_untrusted_token_the_list_says_so(
    admin: Client, base: str, agent: Any, context: Context
) -> None:
    response = admin.post(
        f"{base}/tokens/create",
        {"user": agent.pk, "name": "scraper", "grants": "read,write:*", "trust": "untrusted"},
    )
    assert response.status_code == 201
    token = ApiToken.objects.get(digest=ApiToken.digest_of(_raw(response)))
    assert token.trust == "untrusted"
    html = page(admin.get(f"{base}/tokens/"))
    assert 'data-testid="token-trust">untrusted<' in html
    refused = admin.post(
        f"{base}/tokens/create", {"user": agent.pk, "grants": "read:*", "trust": "sometimes"}
    )
    assert refused.status_code == 400 and ApiToken.objects.count() == 1
