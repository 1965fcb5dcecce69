"""Fixtures for the scope-isolation properties."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import transaction
from hypothesis import HealthCheck, settings

from memory.infra.embeddings import embed_texts

# One profile for every property here: a bounded run (each example writes and reads a
# whole small memory), no example database in the repository, no deadline (the first
# example of a process pays for the embedder).
PROPERTY_SETTINGS = settings(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="session")
def embedder() -> None:
    """Load the embedding model before the first example, outside any timing."""
    embed_texts(["warm up"])


@contextmanager
def rolled_back() -> Iterator[None]:
    """One Hypothesis example's writes, undone when it ends (examples share a test's
    database transaction, so each gets a savepoint of its own)."""
    with transaction.atomic():
        yield
        transaction.set_rollback(True)
