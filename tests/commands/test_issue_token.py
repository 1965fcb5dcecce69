from __future__ import annotations

from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from memory.models import ApiToken, Context, ContextMembership, Role

pytestmark = pytest.mark.django_db


def _issue(*args: str) -> str:
    out = StringIO()
    call_command("issue_token", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_prints_only_a_token_whose_digest_is_stored(
    context: Context, make_user: Callable[..., Any]
) -> None:
    user = make_user("agent-1")

    out = _issue("agent-1", "--context", context.slug, "--grant", "read,write:org/acme/*")

    raw = out.strip()
    assert out == raw + "\n" and raw.startswith("md_")
    token = ApiToken.objects.get(digest=ApiToken.digest_of(raw))
    assert (token.user, token.context, token.grants) == (
        user,
        context,
        ["read:org/acme/*", "write:org/acme/*"],
    )
    assert raw not in (token.digest, token.prefix)


def test_printed_token_authenticates_against_the_api(
    context: Context, make_user: Callable[..., Any]
) -> None:
    make_user("agent-2")
    raw = _issue("agent-2", "--context", context.slug, "--grant", "read:*").strip()
    client = APIClient()

    client.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
    response = client.get(f"/api/v1/contexts/{context.slug}/entities")
    client.credentials(HTTP_AUTHORIZATION="Token md_wrong")
    refused = client.get(f"/api/v1/contexts/{context.slug}/entities")

    assert response.status_code == 200
    assert refused.status_code == 401


def test_creates_a_viewer_membership_by_default(
    context: Context, make_user: Callable[..., Any]
) -> None:
    user = make_user("reader")

    _issue("reader", "--context", context.slug, "--grant", "read:*")

    assert ContextMembership.objects.get(user=user, context=context).role == Role.VIEWER


def test_keeps_an_existing_membership_unless_a_role_is_given(
    context: Context, make_user: Callable[..., Any]
) -> None:
    user = make_user("boss", context=context, role=Role.ADMIN)

    _issue("boss", "--context", context.slug, "--grant", "read:*")
    kept = ContextMembership.objects.get(user=user, context=context).role
    _issue("boss", "--context", context.slug, "--grant", "read:*", "--role", "curator")

    assert kept == Role.ADMIN
    assert ContextMembership.objects.get(user=user, context=context).role == Role.CURATOR


def test_create_user_makes_a_token_only_principal(context: Context) -> None:
    with pytest.raises(CommandError, match="--create-user"):
        _issue("bot", "--context", context.slug, "--grant", "read:*")

    raw = _issue(
        "bot",
        "--context",
        context.slug,
        "--grant",
        "read:*",
        "--grant",
        "write:org/acme",
        "--role",
        "curator",
        "--create-user",
    ).strip()

    bot = get_user_model().objects.get(username="bot")
    assert not bot.has_usable_password()
    assert ContextMembership.objects.get(user=bot).role == Role.CURATOR
    assert ApiToken.objects.get(digest=ApiToken.digest_of(raw)).grants == [
        "read:*",
        "write:org/acme",
    ]


def test_bad_grant_or_context_is_refused_without_writing(
    context: Context, make_user: Callable[..., Any]
) -> None:
    user = make_user("careful")

    with pytest.raises(CommandError, match="grant"):
        _issue("careful", "--context", context.slug, "--grant", "admin:*")
    with pytest.raises(CommandError, match="no context"):
        _issue("careful", "--context", "nope", "--grant", "read:*")

    assert not ApiToken.objects.filter(user=user).exists()
    assert not ContextMembership.objects.filter(user=user).exists()
