"""The database backend's health check (memory/infra/postgres): a connection the server
closed is replaced before a request uses it, and a live one is checked without sending
anything."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from django.db import DEFAULT_DB_ALIAS, connection, connections

from memory.infra.postgres.base import DatabaseWrapper


@pytest.fixture
def own_connection(transactional_db: None) -> Iterator[DatabaseWrapper]:
    """A second connection to the test database, apart from the one tests run in."""
    wrapper = connections.create_connection(DEFAULT_DB_ALIAS)
    assert isinstance(wrapper, DatabaseWrapper)
    wrapper.ensure_connection()
    yield wrapper
    wrapper.close()


def _last_statement(pid: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid])
        return str(cursor.fetchone()[0])


def _as_a_request_starts(wrapper: DatabaseWrapper) -> None:
    wrapper.close_if_unusable_or_obsolete()  # what Django does as each request starts
    wrapper.close_if_health_check_failed()  # what the request's first statement does


def test_a_live_connection_passes_without_a_statement(own_connection: DatabaseWrapper) -> None:
    assert own_connection.health_check_enabled
    with own_connection.cursor() as cursor:
        cursor.execute("SELECT 'the last statement'")
    pid = own_connection.connection.info.backend_pid
    _as_a_request_starts(own_connection)
    assert own_connection.connection is not None and own_connection.health_check_done
    assert _last_statement(pid) == "SELECT 'the last statement'"  # no SELECT 1 was sent


def test_a_connection_the_server_closed_is_replaced(own_connection: DatabaseWrapper) -> None:
    pid = own_connection.connection.info.backend_pid
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _backend_alive(pid):
        time.sleep(0.05)
    _as_a_request_starts(own_connection)
    assert own_connection.connection is None  # closed: the next statement reconnects
    with own_connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] != pid


def _backend_alive(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid])
        return cursor.fetchone() is not None
