"""Reads served by the standbys, as the standbys themselves report them: their
transaction counts (``pg_stat_database.xact_commit``) and their sessions' last statements
(``pg_stat_activity``), not a flag inside this process (docs/decisions/0123). Every
response names where its reads ran: ``X-Memory-Served-By``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest
from django.db import connections
from rest_framework.test import APIClient

from memory.infra.replicas import forget_replica_health
from memory.models import Context, Role
from tests.replicas.conftest import caught_up, set_replay, standby_session, wait_for

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

SERVED_BY = "X-Memory-Served-By"


def end_sessions(alias: str) -> None:
    """Close this test's session on the standby and end any other left on it.

    A Django connection belongs to the context that opened it (``asgiref.local``), and a
    session opened where the test cannot reach it (Playwright's greenlets run the browser
    tests' loop in the same thread) would stay open to the end of the run: it is ended
    here, so what follows counts and reads only this test's sessions."""
    connections[alias].close()
    with standby_session(alias) as probe:
        probe.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND backend_type = 'client backend' "
            "AND pid <> pg_backend_pid()"
        )


def standby_commits(aliases: tuple[str, ...]) -> int:
    """The transactions the standbys have committed in the test database, summed.

    This process's sessions on them are closed first: a session hands its counts to the
    statistics when it ends, so once it has left ``pg_stat_activity`` they are in. The
    probe asks in one transaction of its own (a constant the callers measure)."""
    total = 0
    for alias in aliases:
        end_sessions(alias)
        with standby_session(alias) as probe, probe.cursor() as cursor:
            deadline = time.monotonic() + 30
            while True:
                cursor.execute("SELECT pg_stat_clear_snapshot()")
                cursor.execute(
                    "SELECT application_name, client_port, backend_start, state, query "
                    "FROM pg_stat_activity WHERE datname = current_database() "
                    "AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
                )
                left = cursor.fetchall()
                if not left:
                    break
                assert time.monotonic() < deadline, f"sessions left on {alias}: {left}"
                time.sleep(0.02)
            cursor.execute(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
            )
            total += int(cursor.fetchone()[0])  # type: ignore[index]
    return total


def standby_last_statements(alias: str) -> list[str]:
    """What each of this process's sessions on the standby ran last."""
    with standby_session(alias) as probe, probe.cursor() as cursor:
        cursor.execute(
            "SELECT query FROM pg_stat_activity WHERE datname = current_database() "
            "AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
        )
        return [str(row[0]) for row in cursor.fetchall()]


class StandbyCount:
    """Transactions the standbys committed during a block, the probes' own left out."""

    def __init__(self, aliases: tuple[str, ...]) -> None:
        self.aliases = aliases
        first = standby_commits(aliases)
        self.probes = standby_commits(aliases) - first  # what one reading adds by itself
        self.start = first + self.probes

    def since(self) -> int:
        return standby_commits(self.aliases) - self.start - self.probes


@pytest.fixture
def steady(settings: Any, replicated: tuple[str, ...]) -> tuple[str, ...]:
    """Each standby's health measured once and then trusted: the health checks' own
    statements stay out of the counts."""
    settings.MEMORY_REPLICA_CHECK_SECONDS = 3600.0
    settings.MEMORY_REPLICA_RETRY_SECONDS = 3600.0
    forget_replica_health()
    for alias in replicated:
        end_sessions(alias)
    return replicated


@pytest.fixture
def clients(
    steady: tuple[str, ...], make_context: Callable[..., Context], api_client_for: Any
) -> tuple[APIClient, APIClient, str]:
    """A writer that stored a conversation with a fact, a reader, and the context's base."""
    context = make_context("standby-reads")
    writer = api_client_for(context, role=Role.ADMIN)
    reader = api_client_for(context, role=Role.ADMIN)
    base = f"/api/v1/contexts/{context.slug}"
    triples = {
        "entities": [{"name": "Ada", "type": "person"}, {"name": "Acme", "type": "organisation"}],
        "relations": [{"subject": "Ada", "predicate": "works_at", "object": "Acme"}],
    }
    body: dict[str, Any] = {"text": "Ada joined Acme.", "scope": "org/acme", "infer": "triples"}
    body |= {"triples": triples, "thread": "conv-1", "wait": True}
    response = writer.post(f"{base}/memories", body, format="json")
    assert response.status_code == 200, response.content
    assert response[SERVED_BY] == "primary"
    for alias in steady:
        wait_for(partial(caught_up, alias), f"{alias} to replay the setup")
    assert reader.get(f"{base}/facts")[SERVED_BY].startswith("replica:")  # health measured
    return writer, reader, base


def test_forty_searches_run_on_the_standbys_and_none_when_the_primary_is_asked(
    steady: tuple[str, ...], clients: tuple[APIClient, APIClient, str]
) -> None:
    _, reader, base = clients
    search = {"query": "where does Ada work", "target": "facts", "mode": "hybrid"}

    count = StandbyCount(steady)
    served = set()
    for _ in range(40):
        response = reader.post(f"{base}/search", search, format="json")
        assert response.status_code == 200, response.content
        served.add(response[SERVED_BY])
    on_standbys = count.since()
    assert served == {f"replica:{alias}" for alias in steady}  # in turn over both
    assert on_standbys >= 40  # each search committed its statements on a standby

    count = StandbyCount(steady)
    for _ in range(40):
        response = reader.post(
            f"{base}/search", search, format="json", HTTP_X_MEMORY_READ="primary"
        )
        assert response[SERVED_BY] == "primary"
    assert count.since() == 0


@pytest.fixture
def outside_any_event_loop() -> Iterator[None]:
    """The MCP view runs its own event loop (see tests/replicas/test_routing.py)."""
    running = asyncio._get_running_loop()
    asyncio._set_running_loop(None)
    try:
        yield
    finally:
        asyncio._set_running_loop(running)


def _mcp(tool: str, arguments: dict[str, Any]) -> Callable[[APIClient, str], Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    return lambda api, base: api.post(
        "/mcp", body, format="json", HTTP_ACCEPT="application/json, text/event-stream"
    )


READS: dict[str, Callable[[APIClient, str], Any]] = {
    "POST search": lambda api, base: api.post(
        f"{base}/search", {"query": "Acme", "target": "facts"}, format="json"
    ),
    "POST context": lambda api, base: api.post(
        f"{base}/context", {"query": "where does Ada work"}, format="json"
    ),
    "GET facts": lambda api, base: api.get(f"{base}/facts"),
    "GET entities": lambda api, base: api.get(f"{base}/entities"),
    "GET threads/{thread} (turns)": lambda api, base: api.get(f"{base}/threads/conv-1"),
    "MCP find_facts": _mcp("find_facts", {"subject": "Ada"}),
    "MCP search": _mcp("search", {"query": "Acme"}),
    "MCP get_context": _mcp("get_context", {"query": "where does Ada work"}),
}


@pytest.mark.usefixtures("outside_any_event_loop")
@pytest.mark.parametrize("read", list(READS))
def test_each_read_is_served_by_a_standby(
    read: str, steady: tuple[str, ...], clients: tuple[APIClient, APIClient, str]
) -> None:
    _, reader, base = clients
    count = StandbyCount(steady)
    for _ in range(3):
        response = READS[read](reader, base)
        assert response.status_code == 200, response.content
        assert response[SERVED_BY] in {f"replica:{alias}" for alias in steady}
    assert count.since() >= 3


def test_a_writer_reads_its_own_write_on_the_primary_and_says_so(
    steady: tuple[str, ...], clients: tuple[APIClient, APIClient, str]
) -> None:
    """Read your own writes (docs/decisions/0080): until a standby has replayed a
    client's write, that client's reads go to the primary."""
    writer, reader, base = clients
    for alias in steady:
        set_replay(alias, paused=True)
    fact = {"subject": {"name": "Grace", "type": "person"}, "predicate": "works_at"}
    fact |= {"object": {"name": "Acme", "type": "organisation"}, "scope": "org/acme"}
    written = writer.post(f"{base}/facts", fact, format="json")
    assert written.status_code == 201 and written[SERVED_BY] == "primary"

    own = writer.get(f"{base}/facts")
    assert own[SERVED_BY] == "primary" and "Grace" in _subjects(own)
    for alias in steady:  # each standby was only asked whether it had replayed the write
        [last] = standby_last_statements(alias)
        assert "pg_last_wal_replay_lsn" in last

    other = reader.get(f"{base}/facts")
    replica = other[SERVED_BY].removeprefix("replica:")
    assert replica in steady and "Grace" not in _subjects(other)  # not replayed there yet
    assert any("memory_fact" in q for q in standby_last_statements(replica))

    for alias in steady:
        set_replay(alias, paused=False)
        wait_for(partial(caught_up, alias), f"{alias} to replay the write")
    again = writer.get(f"{base}/facts")
    assert again[SERVED_BY].startswith("replica:") and "Grace" in _subjects(again)


def _subjects(response: Any) -> set[str]:
    assert response.status_code == 200, response.content
    return {row["subject"]["name"] for row in response.json()["results"]}
