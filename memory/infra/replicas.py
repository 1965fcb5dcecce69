"""Read replicas: which database a piece of work reads from (docs/decisions/0080).

With ``DATABASE_REPLICA_URLS`` set, ``memory.settings`` adds one database alias per
replica (``replica_1``, ``replica_2``…), :class:`ReplicaRouter` and
:class:`ReplicaReadMiddleware`. Without it neither is installed and every query goes to
``default``, the primary, as before.

The rules:

- A request that only reads — ``GET``/``HEAD``, the search and context-block ``POST``s,
  an MCP call of a read-only tool — runs in a *read scope* on one replica. Everything
  else (every write, every transaction, migrations, management commands, tasks) runs on
  the primary.
- Inside a read scope, work inside ``transaction.atomic()`` on the primary still reads
  from the primary: a read made inside a write's transaction decides that write.
- Identity and permission (users, sessions, tokens, memberships, contexts) and the
  task queue are always read from the primary: a token or a member added a millisecond
  ago must work at once, on every web process.
- **Read your own writes**: after a client (an ``Authorization`` header or a session
  cookie) sends a write, the primary's WAL position is kept for it (in ``CACHES``) for at
  most ``MEMORY_READ_YOUR_WRITES_SECONDS``; its reads go to a replica only once that
  replica has replayed the position, else to the primary. ``X-Memory-Read: primary``
  forces the primary for one request.
- **Lag and failure**: a replica more than ``MEMORY_REPLICA_MAX_LAG_SECONDS`` behind, or
  unreachable, is skipped (another replica, else the primary) and looked at again after
  ``MEMORY_REPLICA_RETRY_SECONDS``. A read that fails on a replica mid-request is run
  again on the primary, so the client sees no error.

- **Where it was served**: every response says so in ``X-Memory-Served-By``:
  ``replica:<alias>`` when statements of the request ran on that replica, else
  ``primary`` (writes, forced or pinned reads, no usable replica, a replica that failed).

Raw SQL that only reads takes its connection from :func:`read_connection`.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.http import HttpRequest, HttpResponse
from django.urls import Resolver404, resolve

logger = logging.getLogger(__name__)

PRIMARY = "default"
READ_HEADER = "X-Memory-Read"
# Where a response's reads ran: "replica:<alias>" when a statement ran on that replica,
# else "primary" (docs/decisions/0123).
SERVED_BY_HEADER = "X-Memory-Served-By"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# POST endpoints that only read: their bodies are queries, not data.
READ_ONLY_POSTS = frozenset({"api-search", "api-context-block", "api-keywords-search"})
# MCP messages that read nothing or only read.
MCP_READ_METHODS = frozenset(
    {"initialize", "notifications/initialized", "ping", "tools/list", "prompts/list"}
)
# Read from the primary whatever the scope: who may do what, and the task queue.
PRIMARY_ONLY_APPS = frozenset(
    {"auth", "sessions", "contenttypes", "admin", "django_cache", "django_tasks_db"}
)
PRIMARY_ONLY_MODELS = frozenset({"apitoken", "contextmembership", "context"})

_read_alias: ContextVar[str | None] = ContextVar("memory_read_alias", default=None)

LAG_SQL = """
SELECT pg_is_in_recovery(),
       CASE WHEN NOT pg_is_in_recovery()
                 OR pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0.0
            ELSE COALESCE(EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp()), 0.0)
       END
"""


def replica_aliases() -> list[str]:
    return list(getattr(settings, "MEMORY_REPLICA_DATABASES", ()))


def current_read_alias() -> str | None:
    """The replica this request reads from, or None (the primary)."""
    return _read_alias.get()


def read_connection() -> BaseDatabaseWrapper:
    """The connection for raw SQL that only reads: the scope's replica, or the primary
    (outside a read scope, or inside a transaction on the primary)."""
    alias = _read_alias.get()
    if alias is None or connections[PRIMARY].in_atomic_block:
        return connections[PRIMARY]
    return connections[alias]


@contextlib.contextmanager
def read_scope(alias: str | None) -> Iterator[None]:
    """Read from ``alias`` (None: the primary) inside the block."""
    token = _read_alias.set(alias)
    try:
        yield
    finally:
        _read_alias.reset(token)


class ReplicaRouter:
    """Django's database router for the rules above."""

    def db_for_read(self, model: type[Any], **hints: Any) -> str | None:
        alias = _read_alias.get()
        if alias is None:
            return PRIMARY
        if _primary_only(model) or connections[PRIMARY].in_atomic_block:
            return PRIMARY
        return alias

    def db_for_write(self, model: type[Any], **hints: Any) -> str:
        return PRIMARY  # also for rows that were read from a replica

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True  # every alias holds the same data

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return db == PRIMARY


def _primary_only(model: type[Any]) -> bool:
    meta = model._meta
    return meta.app_label in PRIMARY_ONLY_APPS or (
        meta.app_label == "memory" and meta.model_name in PRIMARY_ONLY_MODELS
    )


# --- replica health -----------------------------------------------------------------


@dataclass(frozen=True)
class ReplicaHealth:
    alias: str
    state: str  # "ok", "lagging" or "down"
    lag_seconds: float | None
    checked_at: float  # time.monotonic()
    error: str = ""

    def as_dict(self) -> dict[str, object]:
        lag = None if self.lag_seconds is None else round(self.lag_seconds, 3)
        body: dict[str, object] = {"name": self.alias, "status": self.state, "lag_seconds": lag}
        if self.error:
            body["error"] = self.error
        return body


_health: dict[str, ReplicaHealth] = {}
_health_lock = threading.Lock()
_rotation = itertools.count()


def replica_health(alias: str, *, fresh: bool = False) -> ReplicaHealth:
    """The replica's state, measured again when older than MEMORY_REPLICA_CHECK_SECONDS
    (a replica found down: MEMORY_REPLICA_RETRY_SECONDS) or when ``fresh``."""
    known = _health.get(alias)
    now = time.monotonic()
    if known is not None and not fresh:
        ttl = (
            settings.MEMORY_REPLICA_RETRY_SECONDS
            if known.state == "down"
            else settings.MEMORY_REPLICA_CHECK_SECONDS
        )
        if now - known.checked_at < ttl:
            return known
    return _remember(_measure(alias))


def replica_failed(alias: str, error: BaseException) -> None:
    """A query on the replica failed: skip it until it is looked at again."""
    logger.warning("replica %s failed, reading from elsewhere: %s", alias, error)
    with contextlib.suppress(Exception):
        connections[alias].close()
    _remember(ReplicaHealth(alias, "down", None, time.monotonic(), str(error)[:200]))


def _remember(health: ReplicaHealth) -> ReplicaHealth:
    with _health_lock:
        _health[health.alias] = health
    return health


def _measure(alias: str) -> ReplicaHealth:
    connection = connections[alias]
    try:
        with connection.cursor() as cursor:
            cursor.execute(LAG_SQL)
            _in_recovery, lag = cursor.fetchone()
    except DatabaseError as exc:
        with contextlib.suppress(Exception):
            connection.close()
        return ReplicaHealth(alias, "down", None, time.monotonic(), str(exc).strip()[:200])
    lag = float(lag)
    state = "lagging" if lag > settings.MEMORY_REPLICA_MAX_LAG_SECONDS else "ok"
    return ReplicaHealth(alias, state, lag, time.monotonic())


def _has_replayed(alias: str, lsn: str) -> bool:
    """Whether the replica has replayed the primary's WAL up to ``lsn``."""
    try:
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [lsn])
            row = cursor.fetchone()
    except DatabaseError as exc:
        replica_failed(alias, exc)
        return False
    return bool(row and row[0])


def choose_replica(*, replayed: str | None = None) -> str | None:
    """A usable replica (in turn, so the load spreads), or None for the primary.
    ``replayed``: only one that has replayed this WAL position."""
    aliases = replica_aliases()
    if not aliases:
        return None
    start = next(_rotation)
    for offset in range(len(aliases)):
        alias = aliases[(start + offset) % len(aliases)]
        if replica_health(alias).state != "ok":
            continue
        if replayed is not None and not _has_replayed(alias, replayed):
            continue
        return alias
    return None


# --- read your own writes -----------------------------------------------------------

PIN_PREFIX = "memory-read-pin:"


def client_keys(request: HttpRequest, response: HttpResponse | None = None) -> list[str]:
    """Who sent the request: its Authorization header, else its session cookie (and the
    new one a login sets). Digests only: the cache never holds a credential."""
    found = []
    authorization = request.META.get("HTTP_AUTHORIZATION", "")
    if authorization:
        found.append("t:" + authorization)
    else:
        cookie_name = settings.SESSION_COOKIE_NAME
        if cookie_name in request.COOKIES:
            found.append("s:" + request.COOKIES[cookie_name])
        if response is not None and cookie_name in response.cookies:
            found.append("s:" + response.cookies[cookie_name].value)
    return [PIN_PREFIX + hashlib.sha256(key.encode()).hexdigest()[:40] for key in found]


def primary_wal_position() -> str:
    with connections[PRIMARY].cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_lsn()::text")
        return str(cursor.fetchone()[0])


def pin_to_primary(request: HttpRequest, response: HttpResponse) -> None:
    """Remember the primary's WAL position after this client's write."""
    keys = client_keys(request, response)
    if not keys:
        return
    try:
        position = primary_wal_position()
    except DatabaseError:
        return  # the write failed with the primary; nothing to wait for
    cache.set_many(dict.fromkeys(keys, position), timeout=settings.MEMORY_READ_YOUR_WRITES_SECONDS)


def pinned_position(request: HttpRequest) -> str | None:
    for key in client_keys(request):
        position = cache.get(key)
        if position:
            return str(position)
    return None


# --- the middleware -----------------------------------------------------------------


def reads_only(request: HttpRequest) -> bool:
    if request.method in SAFE_METHODS:
        return True
    if request.method != "POST":
        return False
    try:
        name = resolve(request.path_info).url_name
    except Resolver404:
        return False
    if name in READ_ONLY_POSTS:
        return True
    return name == "mcp" and _mcp_reads_only(request)


# The MCP tools that only read, as the MCP server declares them (memory.mcp.tools): the
# engine below the faces cannot import them, so the face registers its own.
MCP_READ_TOOLS: set[str] = set()


def mcp_read_tools_register(names: set[str]) -> None:
    MCP_READ_TOOLS.update(names)


def _mcp_reads_only(request: HttpRequest) -> bool:
    read_tools = MCP_READ_TOOLS
    try:
        body = json.loads(request.body or b"null")
    except (ValueError, UnicodeDecodeError):
        return False
    messages = body if isinstance(body, list) else [body]
    for message in messages:
        if not isinstance(message, dict):
            return False
        method = message.get("method")
        if method == "tools/call":
            params = message.get("params")
            if not isinstance(params, dict) or params.get("name") not in read_tools:
                return False
        elif method not in MCP_READ_METHODS:
            return False
    return True


class ReplicaReadMiddleware:
    """Runs read-only requests on a replica, keeps each writer's WAL position, and says
    where each response's reads ran (``X-Memory-Served-By``)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not replica_aliases():
            return self.get_response(request)
        served_by = "primary"
        if not reads_only(request):
            response = self.get_response(request)
            pin_to_primary(request, response)
        elif request.headers.get(READ_HEADER, "").strip().lower() == "primary":
            response = self.get_response(request)
        elif (alias := choose_replica(replayed=pinned_position(request))) is None:
            response = self.get_response(request)  # none usable, or none has the caller's write
        else:
            response, served_by = self._on_replica(request, alias)
        response[SERVED_BY_HEADER] = served_by
        return response

    def _on_replica(self, request: HttpRequest, alias: str) -> tuple[HttpResponse, str]:
        statements = _StatementCount()
        with read_scope(alias), connections[alias].execute_wrapper(statements):
            response = self.get_response(request)
        if response.status_code >= 500 and _failed(alias):
            # The replica went away mid-request: a read is safe to run again.
            replica_failed(alias, DatabaseError("the replica failed during a request"))
            return self.get_response(request), "primary"
        return response, f"replica:{alias}" if statements.count else "primary"


class _StatementCount:
    """An execute wrapper counting the statements a connection ran (the header's proof
    that the replica answered, not merely that it was chosen)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.count += 1
        return execute(sql, params, many, context)


def _failed(alias: str) -> bool:
    connection = connections[alias]
    return bool(connection.errors_occurred) or (
        connection.connection is not None and not connection.is_usable()
    )


def forget_replica_health() -> None:
    """Drop what this process knows about its replicas: each is measured again on use
    (after an operator restarted one, and between tests)."""
    with _health_lock:
        _health.clear()
