"""A live Memory Desk (pytest-django's live server: a real HTTP server in a thread) and
the SDK's own MCP client over streamable HTTP, as an agent would connect."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import httpx2
import pytest
from django.contrib.auth import get_user_model
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from memory.domain.access import system_access
from memory.models import Context, ContextMembership, Entity, Role
from memory.services.contexts import context_create
from memory.services.entities.writes import IdentifierInput, entity_upsert
from memory.services.facts.write import fact_write
from memory.services.ingest.documents import document_create, document_embed_now
from memory.services.tokens import token_issue

T = TypeVar("T")
_users = itertools.count(1)


@dataclass
class World:
    context: Context
    alex: Entity
    acme: Entity
    secret: Entity  # only in org/secret
    title_fact: int
    works_fact: int
    secret_fact: int
    secret_document: int


@pytest.fixture
def world(transactional_db: None) -> World:
    """Two scopes: org/acme (Alex, Acme, a document) and org/secret (a hidden project)."""
    context = context_create(slug="mcp-test", name="MCP test")
    access = system_access(context)
    acme = entity_upsert(
        access=access,
        name="Acme Corp",
        type="organisation",
        scope="org/acme",
        aliases=["Roadrunner Supplies"],
        identifiers=[IdentifierInput("domain", "acme.example")],
    ).entity
    alex = entity_upsert(
        access=access,
        name="Alex Rivera",
        type="person",
        scope="org/acme",
        identifiers=[IdentifierInput("email", "alex@acme.example")],
    ).entity
    secret = entity_upsert(
        access=access, name="Project Nightjar", type="project", scope="org/secret"
    ).entity
    works = fact_write(access=access, subject=alex, predicate="worksAt", object=acme)
    title = fact_write(
        access=access, subject=alex, predicate="current_title", value="Staff Engineer"
    )
    hidden = fact_write(
        access=access, subject=alex, predicate="committed_to", object=secret, scope="org/secret"
    )
    public_doc = document_create(
        access=access,
        title="Onboarding",
        text="Alex Rivera works at Acme Corp in Berlin and mentors new engineers.",
        scope="org/acme",
        embed_later=True,
    )
    secret_doc = document_create(
        access=access,
        title="Nightjar plan",
        text="Project Nightjar is the confidential acquisition Alex Rivera is preparing.",
        scope="org/secret",
        embed_later=True,
    )
    for document in (public_doc, secret_doc):
        document_embed_now(document=document)
    return World(
        context=context,
        alex=alex,
        acme=acme,
        secret=secret,
        title_fact=title.fact.pk,
        works_fact=works.fact.pk,
        secret_fact=hidden.fact.pk,
        secret_document=secret_doc.pk,
    )


@pytest.fixture
def token_for(world: World) -> Callable[..., str]:
    """A raw API token in the world's context with ``grants`` (role: viewer by default)."""

    def make(grants: list[str], role: Role = Role.VIEWER, trust: str = "trusted") -> str:
        user = get_user_model().objects.create_user(username=f"agent{next(_users)}")
        ContextMembership.objects.create(user=user, context=world.context, role=role)
        return token_issue(user=user, context=world.context, grants=grants, trust=trust).raw

    return make


@pytest.fixture
def mcp_url(live_server: Any) -> str:
    return f"{live_server.url}/mcp"


def with_mcp(url: str, token: str | None, work: Callable[[Client], Awaitable[T]]) -> T:
    """Connect the SDK's client to ``url`` with ``token`` and run ``work`` in the session."""

    async def main() -> T:
        headers = {"Authorization": f"Token {token}"} if token else {}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=120) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            return await work(client)

    # In a thread of its own: when the browser tests ran first, Playwright's sync API
    # keeps an event loop running in this (the main) thread for the rest of the session.
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, main).result()


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> tuple[bool, Any]:
    """(is_error, structured content) of one tool call."""
    result = await client.call_tool(tool, arguments)
    return bool(result.is_error), result.structured_content


def text_of(result: CallToolResult) -> str:
    """The text a tool call answered with (its first content, always text)."""
    content = result.content[0]
    assert isinstance(content, TextContent), content
    return content.text
