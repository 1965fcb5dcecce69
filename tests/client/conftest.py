"""The client against the live test server: real HTTP to pytest-django's ``live_server``
(a server thread of this process on the test database)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from django.contrib.auth import get_user_model
from django.db import connections

from memory.models import Context, ContextMembership, Role
from memory.services.contexts import context_create
from memory.services.tokens import token_issue

T = TypeVar("T")

# An item as the items API answers it: what the fake servers of the client tests send.
ITEM = {
    "namespace": ["a"],
    "key": "k",
    "value": {"v": 1},
    "created_at": "2026-01-01T00:00:00+00:00",
    "updated_at": "2026-01-01T00:00:00+00:00",
    "expires_at": None,
}


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


def off_the_main_loop(work: Callable[[], T]) -> T:
    """``work`` in a thread of its own. The browser tests' Playwright keeps an event loop
    running in the main thread for the whole session, and ``asyncio.run`` (ours, LangGraph's,
    LlamaIndex's) refuses to start inside a running loop."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as error:  # re-raised in the test's own thread
            outcome["error"] = error
        finally:
            connections.close_all()  # the thread's own database connection

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]  # type: ignore[no-any-return]
