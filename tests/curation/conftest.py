"""Fixtures for the dashboard: members of each role, logged-in clients, a small memory."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client

from memory.domain.access import ContextAccess
from memory.models import Conflict, Context, Entity, Role
from memory.services.entities.writes import entity_upsert
from memory.services.facts.write import fact_write


@pytest.fixture
def client_for(make_user: Callable[..., Any], context: Context) -> Callable[..., Client]:
    """A browser session of a fresh member of ``context`` with ``role`` (and grants)."""

    def make(role: Role = Role.VIEWER, *, grants: list[str] | None = None) -> Client:
        client = Client()
        client.force_login(make_user(context=context, role=role, grants=grants))
        return client

    return make


@pytest.fixture
def viewer(client_for: Callable[..., Client]) -> Client:
    return client_for(Role.VIEWER)


@pytest.fixture
def curator(client_for: Callable[..., Client]) -> Client:
    return client_for(Role.CURATOR)


@pytest.fixture
def admin(client_for: Callable[..., Client]) -> Client:
    return client_for(Role.ADMIN)


@pytest.fixture
def base(context: Context) -> str:
    return f"/c/{context.slug}"


@dataclass
class Memory:
    """What ``memory`` wrote: people, an organisation, and the facts between them."""

    alex: Entity
    sam: Entity
    acme: Entity
    conflict: Conflict


def person(access: ContextAccess, name: str, scope: str = "org/acme") -> Entity:
    return entity_upsert(access=access, name=name, type="person", scope=scope).entity


@pytest.fixture
def memory(access: ContextAccess) -> Memory:
    """Alex and Sam ``works_for`` Acme (drift: ``works_at`` is registered), Alex's
    ``current_title`` in conflict, and one registered fact."""
    alex, sam = person(access, "Alex"), person(access, "Sam")
    acme = entity_upsert(access=access, name="Acme", type="organisation", scope="org/acme").entity
    fact_write(access=access, subject=alex, predicate="works_for", object=acme)
    fact_write(access=access, subject=sam, predicate="worksFor", object=acme)
    fact_write(access=access, subject=alex, predicate="knows", object=sam)
    fact_write(access=access, subject=alex, predicate="current_title", value="Engineer")
    contested = fact_write(
        access=access, subject=alex, predicate="current_title", value="CTO", confidence=0.4
    )
    assert contested.conflict is not None
    return Memory(alex=alex, sam=sam, acme=acme, conflict=contested.conflict)


def page(response: Any) -> str:
    return str(response.content.decode())
