"""Fixtures for fault and race tests: a second database session that can hold locks, watch
other sessions and terminate them; threads with their own connections; the scripted LLM
server (from the ingest tests) and an endpoint that can be taken down or made to hang."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import urlparse

import psycopg
import pytest
from django.db import connection, connections, transaction

from tests.api.conftest import api, base  # noqa: F401  (fixtures shared with the API tests)
from tests.fake_llm import FakeLLM
from tests.ingest.conftest import fake_llm, fake_llm_server  # noqa: F401
from tests.reliability.endpoint import FlakyEndpoint

T = TypeVar("T")
# The model clients' timeout against the flaky endpoint (one retry): a hang fails fast.
ENDPOINT_TIMEOUT = 0.3


def wait_until(predicate: Callable[[], T], what: str, timeout: float = 20.0) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


class SideSession:
    """A database session outside Django's connection handling: it holds table and row
    locks while another session runs into them, sees which session waits, and kills it."""

    def __init__(self) -> None:
        params = connection.get_connection_params()
        params.pop("cursor_factory", None)
        params.pop("context", None)
        self.conn = psycopg.connect(**params, autocommit=True)

    def execute(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        with self.conn.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall() if cursor.description else []

    def waiting_on_lock(self, statement: str = "") -> list[int]:
        """The pids of the sessions of this database blocked on a lock in ``statement``."""
        # Activity is a snapshot per transaction, and this session may be in one.
        self.execute("SELECT pg_stat_clear_snapshot()")
        rows = self.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND wait_event_type = 'Lock' AND query ILIKE %s "
            "ORDER BY pid",
            [f"%{statement}%"],
        )
        return [int(r[0]) for r in rows]

    def wait_for_lock_wait(self, statement: str = "", *, sessions: int = 1) -> int:
        """Block until ``sessions`` sessions wait on a lock in ``statement``; one's pid."""

        def blocked() -> list[int]:  # empty until enough sessions wait
            found = self.waiting_on_lock(statement)
            return found if len(found) >= sessions else []

        pids = wait_until(blocked, f"{sessions} session(s) blocked in {statement!r}")
        return pids[0]

    def alive(self, pid: int) -> bool:
        return bool(self.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]))

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def side(transactional_db: None) -> Iterator[SideSession]:
    session = SideSession()
    yield session
    session.close()


@pytest.fixture
def flaky(fake_llm: FakeLLM, settings: Any) -> Iterator[FlakyEndpoint]:  # noqa: F811
    """The scripted model server behind an endpoint a test takes down (``down``: connections
    refused) or makes hang (``hang``: accepted, never answered); it starts ``down``."""
    endpoint = FlakyEndpoint(target_port=int(urlparse(fake_llm.base_url).port or 0))
    settings.OPENAI_BASE_URL = endpoint.base_url
    # The process keeps one embedder per model name, bound to the URL it was built with:
    # a name of its own, so this endpoint's outage stays in this test.
    settings.MEMORY_EMBED_MODEL = f"openai:flaky-embed-{endpoint.port}"
    settings.MEMORY_LLM_TIMEOUT_SECONDS = ENDPOINT_TIMEOUT
    settings.MEMORY_LLM_MAX_RETRIES = 1
    yield endpoint
    endpoint.stop()


@dataclass
class Worker(Generic[T]):
    """A thread running ``fn`` on its own database connection; ``join`` re-raises."""

    fn: Callable[[], T]
    returned: tuple[T] | None = None  # (fn's result,) once it returned: fn may return None
    error: BaseException | None = None
    thread: threading.Thread = field(init=False)

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.returned = (self.fn(),)
        except BaseException as exc:  # surfaced by join
            self.error = exc
        finally:
            connections.close_all()

    def join(self, timeout: float = 30.0) -> T:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the thread did not finish"
        if self.error is not None:
            raise self.error
        assert self.returned is not None
        return self.returned[0]


def in_thread(fn: Callable[[], T]) -> Worker[T]:
    return Worker(fn)


class HeldOpen:
    """``fn`` run inside a transaction on another thread, left uncommitted (its locks held)
    until ``commit``: the deterministic way to let a second writer run into it."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self._done = threading.Event()
        self._release = threading.Event()
        self._error: BaseException | None = None
        self.worker = in_thread(lambda: self._run(fn))
        self._done.wait(30)
        if self._error is not None:
            self.worker.join()

    def _run(self, fn: Callable[[], Any]) -> Any:
        with transaction.atomic():
            try:
                result = fn()
            except BaseException as exc:
                self._error = exc
                raise
            finally:
                self._done.set()
            self._release.wait(30)
            return result

    def commit(self) -> Any:
        self._release.set()
        return self.worker.join()


def graph_footprint() -> dict[str, int]:
    """Row counts of everything an ingest can write besides its own Run: equal before and
    after a failed run means nothing of it was stored."""
    from memory.models import (
        Chunk,
        Conflict,
        Document,
        DuplicateCandidate,
        Entity,
        EntityIdentifier,
        Fact,
        Predicate,
    )
    from memory.search.models import SearchDoc, SearchPosting, SearchTerm

    tables: dict[str, Any] = {
        "entities": Entity,
        "identifiers": EntityIdentifier,
        "facts": Fact,
        "conflicts": Conflict,
        "predicates": Predicate,
        "duplicate candidates": DuplicateCandidate,
        "documents": Document,
        "chunks": Chunk,
        "search docs": SearchDoc,
        "search terms": SearchTerm,
        "search postings": SearchPosting,
    }
    # The turn is the run's input, kept from the moment the memory is accepted.
    counts = {
        name: model.objects.exclude(**_not_turns(model)).count() for name, model in tables.items()
    }
    return counts


def _not_turns(model: Any) -> dict[str, Any]:
    from memory.search.models import SearchDoc, SearchPosting, SearchTerm

    if model in (SearchDoc, SearchTerm):
        return {"target": "turn"}
    if model is SearchPosting:
        return {"doc_id__in": SearchDoc.objects.filter(target="turn").values("pk")}
    return {}
