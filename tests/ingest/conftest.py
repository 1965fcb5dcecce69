"""Fixtures for ingest: the scripted OpenAI-compatible server, and API helpers."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from memory.domain.access import ContextAccess
from memory.models import Entity
from memory.services.entities.writes import entity_upsert
from memory.services.vectors import vectors_compute
from tests.api.conftest import api, base  # noqa: F401  (fixtures shared with the API tests)
from tests.fake_llm import FakeLLM

_models = itertools.count(1)


@pytest.fixture(scope="session")
def fake_llm_server() -> Iterator[FakeLLM]:
    server = FakeLLM().start()
    yield server
    server.stop()


@pytest.fixture
def fake_llm(fake_llm_server: FakeLLM, settings: Any) -> FakeLLM:
    """The chat model and the embedder both answer from the scripted server."""
    fake_llm_server.reset()
    settings.OPENAI_BASE_URL = fake_llm_server.base_url
    settings.OPENAI_API_KEY = "test-key"
    # A model name per test: the client remembers per (server, model) whether JSON schemas
    # were refused, and one test's refusal must not leak into the next.
    settings.MEMORY_CHAT_MODEL = f"fake-chat-{next(_models)}"
    settings.MEMORY_EMBED_MODEL = "openai:fake-embed"
    settings.MEMORY_LLM_TIMEOUT_SECONDS = 5.0
    settings.MEMORY_LLM_MAX_RETRIES = 2
    return fake_llm_server


@pytest.fixture
def no_chat_model(settings: Any) -> None:
    settings.MEMORY_CHAT_MODEL = ""


@pytest.fixture
def make_entity(access: ContextAccess) -> Callable[..., Entity]:
    """An entity through the service, embedded now (with the fake server's embedder)."""

    def make(
        name: str, type: str, scope: str = "org/acme", *, embed: bool = False, **kw: Any
    ) -> Entity:
        entity = entity_upsert(access=access, name=name, type=type, scope=scope, **kw).entity
        if embed:
            vectors_compute("entities", [entity.pk])
            entity.refresh_from_db()
        return entity

    return make


def extraction(**lists: Any) -> dict[str, Any]:
    """A model answer: {entities, relations, attributes, actions}, empty lists by default."""
    return {
        "entities": lists.get("entities", []),
        "relations": lists.get("relations", []),
        "attributes": lists.get("attributes", []),
        "actions": lists.get("actions", []),
    }
