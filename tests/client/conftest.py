"""The client against the live test server: real HTTP to pytest-django's ``live_server``
(a server thread of this process on the test database)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from memory.models import Context, ContextMembership, Role
from memory.services.contexts import context_create
from memory.services.tokens import token_issue


@dataclass(frozen=True)
class Desk:
    """Where the live server is and a token for one context on it."""

    url: str
    token: str
    context: str

    def kwargs(self) -> dict[str, str]:
        return {"url": self.url, "token": self.token, "context": self.context}


@pytest.fixture
def make_desk(live_server: Any, transactional_db: None) -> Callable[..., Desk]:
    made: dict[str, Context] = {}

    def make(
        *,
        slug: str = "client-test",
        role: Role = Role.ADMIN,
        grants: list[str] | None = None,
        trust: str = "trusted",
        **settings: Any,
    ) -> Desk:
        context = made.get(slug) or context_create(slug=slug, name="Client test", **settings)
        made[slug] = context
        user = get_user_model().objects.create_user(
            username=f"agent{get_user_model().objects.count() + 1}", password="pw-for-tests-only"
        )
        ContextMembership.objects.create(
            user=user, context=context, role=role, grants=grants or ["read,write:*"]
        )
        raw = token_issue(
            user=user, context=context, grants=grants or ["read,write:*"], trust=trust
        ).raw
        return Desk(url=live_server.url, token=raw, context=context.slug)

    return make


@pytest.fixture
def desk(make_desk: Callable[..., Desk]) -> Desk:
    return make_desk()
