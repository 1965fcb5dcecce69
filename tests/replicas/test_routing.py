"""The replica router against a real primary and two hot standbys."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest
from django.db import connections, router, transaction
from django.test import Client, RequestFactory
from rest_framework.test import APIClient

from memory.infra.embedded_replicas import replica_start, replica_stop
from memory.infra.replicas import ReplicaRouter, forget_replica_health, read_scope, reads_only
from memory.models import Context, Fact, Role
from tests.replicas.conftest import (
    caught_up,
    primary_folder,
    set_replay,
    standby_folder,
    wait_for,
)

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


@contextlib.contextmanager
def fact_reads() -> Iterator[list[str]]:
    """The aliases that read the fact table, in order, while the block runs."""
    seen: list[str] = []

    def recorder(alias: str) -> Callable[..., Any]:
        def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            if "memory_fact" in sql and sql.lstrip().upper().startswith("SELECT"):
                seen.append(alias)
            return execute(sql, params, many, context)

        return record

    with contextlib.ExitStack() as stack:
        for alias in connections:
            stack.enter_context(connections[alias].execute_wrapper(recorder(alias)))
        yield seen


def _write_fact(api: APIClient, base: str, name: str) -> None:
    body = {
        "subject": {"name": name, "type": "person"},
        "predicate": "works_at",
        "object": {"name": "Acme", "type": "company"},
        "scope": "org/acme",
    }
    response = api.post(f"{base}/facts", body, format="json")
    assert response.status_code in (200, 201), response.content


def _subjects(api: APIClient, base: str, **headers: Any) -> set[str]:
    response = api.get(f"{base}/facts", **headers)
    assert response.status_code == 200, response.content
    return {row["subject"]["name"] for row in response.json()["results"]}


@pytest.fixture
def base(make_context: Callable[..., Context]) -> str:
    return f"/api/v1/contexts/{make_context('replicated').slug}"


@pytest.fixture
def two_clients(
    replicated: tuple[str, ...], base: str, api_client_for: Callable[..., APIClient]
) -> tuple[APIClient, APIClient]:
    context = Context.objects.get(slug="replicated")
    writer = api_client_for(context, role=Role.ADMIN)
    reader = api_client_for(context, role=Role.ADMIN)
    for alias in replicated:
        wait_for(partial(caught_up, alias), f"{alias} to replay the test's setup")
    return writer, reader


def test_reads_go_to_a_replica_and_writes_to_the_primary(
    replicated: tuple[str, ...], two_clients: tuple[APIClient, APIClient], base: str
) -> None:
    writer, reader = two_clients
    for alias in replicated:
        set_replay(alias, paused=True)
    with fact_reads() as seen:
        _write_fact(writer, base, "Ada")  # a write: on the primary, whatever replay does
    assert set(seen) <= {"default"}
    assert Fact.objects.filter(context__slug="replicated").count() == 1

    with fact_reads() as seen:
        assert _subjects(reader, base) == set()  # the replicas have not replayed it
    assert seen and set(seen) <= set(replicated)
    assert _subjects(reader, base, HTTP_X_MEMORY_READ="primary") == {"Ada"}

    for alias in replicated:
        set_replay(alias, paused=False)
        wait_for(partial(caught_up, alias), f"{alias} to resume")
    assert _subjects(reader, base) == {"Ada"}


def test_a_writer_reads_its_own_write_until_a_replica_has_replayed_it(
    replicated: tuple[str, ...], two_clients: tuple[APIClient, APIClient], base: str
) -> None:
    writer, reader = two_clients
    for alias in replicated:
        set_replay(alias, paused=True)
    _write_fact(writer, base, "Grace")
    with fact_reads() as seen:
        assert _subjects(writer, base) == {"Grace"}  # its own write, from the primary
    assert set(seen) == {"default"}
    assert _subjects(reader, base) == set()  # anyone else: a replica, which is behind

    set_replay(replicated[0], paused=False)
    wait_for(lambda: caught_up(replicated[0]), "the first replica to catch up")
    with fact_reads() as seen:
        for _ in range(4):  # in turn over both replicas: only the caught-up one qualifies
            assert _subjects(writer, base) == {"Grace"}
    assert set(seen) == {replicated[0]}


def test_the_search_post_reads_on_a_replica(
    replicated: tuple[str, ...], two_clients: tuple[APIClient, APIClient], base: str
) -> None:
    writer, reader = two_clients
    _write_fact(writer, base, "Acme's Ada")
    for alias in replicated:
        wait_for(partial(caught_up, alias), f"{alias} to replay the fact")
    with fact_reads() as seen:
        response = reader.post(
            f"{base}/search",
            {"query": "who works at acme", "target": "facts", "mode": "hybrid"},
            format="json",
        )
    assert response.status_code == 200, response.content
    assert seen and set(seen) <= set(replicated)


def test_a_lagging_replica_is_skipped_and_health_says_so(
    settings: Any, replicated: tuple[str, ...], two_clients: tuple[APIClient, APIClient], base: str
) -> None:
    writer, reader = two_clients
    settings.MEMORY_REPLICA_MAX_LAG_SECONDS = 0.2
    for alias in replicated:
        set_replay(alias, paused=True)
    _write_fact(writer, base, "Linus")

    def lagging() -> bool:
        body = Client().get("/api/v1/health").json()
        return all(r["status"] == "lagging" for r in body["replicas"])

    wait_for(lagging, "both replicas to count as lagging")
    health = Client().get("/api/v1/health").json()
    assert health["status"] == "degraded"
    assert all(r["lag_seconds"] > 0.2 for r in health["replicas"])
    with fact_reads() as seen:
        assert _subjects(reader, base) == {"Linus"}  # the primary answered
    assert set(seen) == {"default"}


def test_a_stopped_replica_is_skipped_and_a_dying_one_costs_no_error(
    settings: Any, replicated: tuple[str, ...], two_clients: tuple[APIClient, APIClient], base: str
) -> None:
    _, reader = two_clients
    first, second = replicated
    try:
        replica_stop(standby_folder("standby-2"))
        health = Client().get("/api/v1/health").json()
        states = {r["name"]: r["status"] for r in health["replicas"]}
        assert states == {first: "ok", second: "down"}
        with fact_reads() as seen:
            for _ in range(4):
                assert _subjects(reader, base) == set()
        assert set(seen) == {first}

        # The first one dies while this thread holds a connection to it and still
        # believes it healthy: the read fails there and runs again on the primary.
        settings.MEMORY_REPLICA_CHECK_SECONDS = 3600.0
        settings.MEMORY_REPLICA_RETRY_SECONDS = 3600.0
        replica_stop(standby_folder("standby-1"))
        client = APIClient(raise_request_exception=False)
        # APIClient keeps what credentials() set in _credentials, which its stubs leave out.
        token = reader._credentials["HTTP_AUTHORIZATION"]  # type: ignore[attr-defined]
        client.credentials(HTTP_AUTHORIZATION=token)
        with fact_reads() as seen:
            assert _subjects(client, base) == set()
        assert seen[-1] == "default"
        with fact_reads() as seen:
            assert _subjects(client, base) == set()
        assert set(seen) == {"default"}  # both skipped now, without trying them
    finally:
        for name, alias in (("standby-1", first), ("standby-2", second)):
            connections[alias].close()
            replica_start(primary_folder(), standby_folder(name))
            wait_for(partial(caught_up, alias), f"{alias} to come back")
        forget_replica_health()


def test_transactions_and_migrations_stay_on_the_primary(replicated: tuple[str, ...]) -> None:
    replica = replicated[0]
    routing = ReplicaRouter()
    assert routing.allow_migrate("default", "memory") is True
    assert routing.allow_migrate(replica, "memory") is False
    with read_scope(replica):
        assert router.db_for_read(Fact) == replica
        assert router.db_for_read(Context) == "default"  # who may do what: the primary
        assert router.db_for_write(Fact) == "default"
        with transaction.atomic():
            assert router.db_for_read(Fact) == "default"  # a read deciding a write
    assert router.db_for_read(Fact) == "default"


@pytest.fixture
def outside_any_event_loop() -> Iterator[None]:
    """The MCP view runs its own event loop, as in a WSGI worker thread. Playwright's sync
    API (the browser tests) keeps a loop marked running on this thread for the whole
    session; set it aside while the view runs."""
    running = asyncio._get_running_loop()
    asyncio._set_running_loop(None)
    try:
        yield
    finally:
        asyncio._set_running_loop(running)


def _mcp(api: APIClient, tool: str, arguments: dict[str, Any]) -> Any:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    response = api.post(
        "/mcp", body, format="json", HTTP_ACCEPT="application/json, text/event-stream"
    )
    assert response.status_code == 200, response.content
    return response.json()["result"]


@pytest.mark.usefixtures("outside_any_event_loop")
def test_mcp_read_tools_read_on_a_replica_and_write_tools_pin_the_writer(
    replicated: tuple[str, ...], two_clients: tuple[APIClient, APIClient], base: str
) -> None:
    writer, reader = two_clients
    for alias in replicated:
        set_replay(alias, paused=True)
    added = _mcp(
        writer,
        "add_facts",
        {
            "scope": "org/acme",
            "relations": [{"subject": "Hedy", "predicate": "works_at", "object": "Acme"}],
        },
    )
    assert not added.get("isError"), added
    with fact_reads() as seen:
        found = _mcp(writer, "find_facts", {"subject": "Hedy"})  # its own write: the primary
    assert "Hedy" in json.dumps(found) and set(seen) == {"default"}
    with fact_reads() as seen:
        _mcp(reader, "find_facts", {"predicate": "works_at"})  # anyone else: a replica
    assert seen and set(seen) <= set(replicated)


@pytest.mark.parametrize(
    ("body", "reads"),
    [
        ({"method": "tools/call", "params": {"name": "search"}}, True),
        ({"method": "tools/list"}, True),
        ({"method": "tools/call", "params": {"name": "remember"}}, False),
        ([{"method": "tools/call", "params": {"name": "get_entity"}}, {"method": "ping"}], True),
        ([{"method": "ping"}, {"method": "tools/call", "params": {"name": "add_facts"}}], False),
        ({"method": "tools/call", "params": "nonsense"}, False),
        ("not an object", False),
    ],
)
def test_which_mcp_messages_count_as_reads(body: Any, reads: bool) -> None:
    request = RequestFactory().post("/mcp", json.dumps(body), content_type="application/json")
    assert reads_only(request) is reads
