"""Two real hot standbys of the test run's embedded primary (``pg_basebackup -R``).

Physical replication copies the whole cluster, so the test database pytest-django made on
the primary is on the standbys too; their aliases mirror ``default`` (no flush of their
own, which a read-only server would refuse). The standbys live for the session and are
removed at its end, and also at the start of the next one if a run was killed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings as django_settings
from django.db import connections

from memory.infra.embedded_replicas import replica_start, replica_stop
from memory.infra.replicas import forget_replica_health
from memory.settings import replica_database

STANDBYS = ("standby-1", "standby-2")
ALIASES = ("replica_1", "replica_2")
WAIT_S = 120.0  # a loaded 2-core machine copies and starts a cluster in seconds, not minutes


def wait_for(condition: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


def standby_folder(name: str) -> Path:
    return Path(django_settings.VAR_DIR) / "test-replicas" / name


def primary_folder() -> Path:
    return Path(django_settings.VAR_DIR) / "pgdata"


def register_alias(alias: str, url: str) -> None:
    """Add a connection alias for a standby, pointed at the test database."""
    config = replica_database(url)
    config["NAME"] = connections["default"].settings_dict["NAME"]
    configured = connections.configure_settings(
        {"default": connections.settings["default"], alias: config}
    )
    connections.settings[alias] = configured[alias]
    django_settings.DATABASES[alias] = configured[alias]


@pytest.fixture(scope="session", autouse=True)
def standbys(django_db_setup: None, django_db_blocker: Any) -> Iterator[tuple[str, ...]]:
    """Session-wide and autouse, so the aliases exist before any test's database access
    is set up (pytest-django checks a test's ``databases`` against them)."""
    if os.environ.get("DATABASE_URL"):
        pytest.skip("standbys are made from the embedded server; DATABASE_URL is set")
    for name in STANDBYS:
        replica_stop(standby_folder(name), remove=True)  # left by a killed run
    try:
        for alias, name in zip(ALIASES, STANDBYS, strict=True):
            register_alias(alias, replica_start(primary_folder(), standby_folder(name)))
        with django_db_blocker.unblock():
            for alias in ALIASES:
                wait_for(partial(caught_up, alias), f"{alias} to replay the primary")
        yield ALIASES
    finally:
        for alias in ALIASES:
            if alias in connections.settings:
                connections[alias].close()
        for name in STANDBYS:
            replica_stop(standby_folder(name), remove=True)


def primary_position() -> str:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_lsn()::text")
        return str(cursor.fetchone()[0])


def caught_up(alias: str) -> bool:
    """Whether the standby has replayed everything the primary has written so far."""
    position = primary_position()
    try:
        with standby_session(alias) as session:
            row = session.execute(
                "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [position]
            ).fetchone()
            return bool(row and row[0])
    except psycopg.OperationalError:  # a standby still starting refuses sessions
        return False


def standby_session(alias: str) -> psycopg.Connection[Any]:
    """A session on the standby outside Django's connections, closed by its ``with``.

    Tests that count the standby's sessions and transactions need their own controls to
    leave none behind; a Django connection lives as long as the context that opened it."""
    params = connections[alias].get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    return psycopg.connect(**params)


def set_replay(alias: str, *, paused: bool) -> None:
    with standby_session(alias) as session:
        session.execute(f"SELECT pg_wal_replay_{'pause' if paused else 'resume'}()")


@pytest.fixture
def replicated(settings: Any, standbys: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    """The router and middleware on, as DATABASE_REPLICA_URLS would install them; a
    replica counts as lagging only when far behind (tests that want lag set it lower)."""
    settings.MEMORY_REPLICA_DATABASES = list(standbys)
    settings.DATABASE_ROUTERS = ["memory.infra.replicas.ReplicaRouter"]
    middleware = list(settings.MIDDLEWARE)
    middleware.insert(
        middleware.index("django.contrib.sessions.middleware.SessionMiddleware"),
        "memory.infra.replicas.ReplicaReadMiddleware",
    )
    settings.MIDDLEWARE = middleware
    settings.MEMORY_REPLICA_MAX_LAG_SECONDS = 3600.0
    settings.MEMORY_REPLICA_CHECK_SECONDS = 0.0
    settings.MEMORY_REPLICA_RETRY_SECONDS = 0.0
    forget_replica_health()
    yield standbys
    for alias in standbys:
        try:
            set_replay(alias, paused=False)
        except Exception:
            connections[alias].close()
    forget_replica_health()
