"""Shared fixtures. The database is real PostgreSQL (DATABASE_URL or the embedded server)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from memory.domain.access import ContextAccess, system_access
from memory.models import Context, Role
from memory.services.contexts import context_create
from memory.services.tokens import token_issue

_counter = itertools.count(1)


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings: Any) -> None:
    # PBKDF2's deliberate slowness costs ~0.5 s per test user; tests don't need it.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def make_context(db: None) -> Callable[..., Context]:
    def make(slug: str | None = None, **settings: Any) -> Context:
        return context_create(slug=slug or f"ctx-{next(_counter)}", name="Test", **settings)

    return make


@pytest.fixture
def context(make_context: Callable[..., Context]) -> Context:
    return make_context("acme-test")


@pytest.fixture
def access(context: Context) -> ContextAccess:
    return system_access(context)


@pytest.fixture
def make_user(db: None) -> Callable[..., Any]:
    def make(
        username: str | None = None,
        *,
        context: Context | None = None,
        role: Role = Role.VIEWER,
        grants: list[str] | None = None,
    ) -> Any:
        from memory.models import ContextMembership

        user = get_user_model().objects.create_user(
            username=username or f"user{next(_counter)}", password="pw-for-tests-only"
        )
        if context is not None:
            ContextMembership.objects.create(
                user=user, context=context, role=role, grants=grants or ["read,write:*"]
            )
        return user

    return make


@pytest.fixture
def api_client_for(make_user: Callable[..., Any]) -> Callable[..., APIClient]:
    """An API client authenticated with a fresh token: role in the context, token grants."""

    def make(
        context: Context,
        *,
        role: Role = Role.ADMIN,
        grants: list[str] | None = None,
        trust: str = "trusted",
    ) -> APIClient:
        user = make_user(context=context, role=role)
        raw = token_issue(
            user=user, context=context, grants=grants or ["read,write:*"], trust=trust
        ).raw
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
        return client

    return make
