"""HTTP/1.1 over the standard library's ``http.client``, on kept-alive connections: the
sync client's way to a plain-HTTP server when it was given no ``httpx.Client``.

httpx spends about 0.3 ms of CPU on each call (URL and header models, h11's state
machine, the cookie jar), as long as the server's read of an item on the same machine.
A LangGraph store makes many small calls, so where that share is large — a server on the
same machine or network, reached over plain HTTP — the client sends them through this,
which writes a request as one ``send`` and reads the answer with ``http.client``'s
parser. Anything else keeps httpx: https (its certificate handling), a proxy from the
environment, a caller's own ``httpx.Client`` (its hooks, auth, transport).

Requests are built as httpx builds them: the query from ``params`` (``true``/``false``
for booleans, an empty value for None, a list repeating its name), a ``json`` body
written by the standard library with the same options, answers read by ``json.loads``.
"""

from __future__ import annotations

import http.client
import json
import selectors
import socket
import threading
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

USER_AGENT = "python-memorydesk"

# What the transport turns into a TransportError (then retried as httpx's errors are):
# refused and reset connections, timeouts, a server closing before it answered.
WIRE_ERRORS: tuple[type[BaseException], ...] = (OSError, http.client.HTTPException)


@dataclass(frozen=True)
class Answer:
    """A response as the client reads it: status, headers (``get`` ignores the names'
    case, as httpx's does) and body."""

    status_code: int
    headers: http.client.HTTPMessage
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.content)


def wire_usable(url: str) -> bool:
    """Whether requests to ``url`` may go through this transport: plain HTTP to a host
    no proxy in the environment (``HTTP_PROXY``, ``ALL_PROXY``, …) stands before."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        return False
    proxies = urllib.request.getproxies()
    if not (proxies.get("http") or proxies.get("all")):
        return True
    return bool(urllib.request.proxy_bypass(parts.hostname))


def query_string(params: Any) -> str:
    """``params`` (a mapping, or pairs) as httpx writes them into a URL's query."""
    if not params:
        return ""
    pairs: Iterable[tuple[str, Any]] = params.items() if isinstance(params, Mapping) else params
    flat: list[tuple[str, str]] = []
    for name, value in pairs:
        values = value if isinstance(value, list | tuple) else [value]
        flat.extend((str(name), _primitive(v)) for v in values)
    return urlencode(flat)


def _primitive(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return ""
    return str(value)


def json_body(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


class Wire:
    """Kept-alive connections to one server, shared by threads: each request takes an
    idle connection (or opens one) and gives it back once its answer is read whole."""

    def __init__(self, url: str, *, headers: Mapping[str, str], timeout: float) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or ""
        self.port = parts.port or 80
        self.timeout = timeout
        self.headers = {"User-Agent": USER_AGENT, **headers}
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def request(
        self,
        method: str,
        url: str,
        *,
        params: Any = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        target = _target(url, query_string(params))
        sent = dict(self.headers)
        if headers:
            sent.update(headers)
        if content is not None:
            sent["Content-Length"] = str(len(content))
        connection = self._connection()
        try:
            connection.request(method, target, body=content, headers=sent)
            response = connection.getresponse()
            body = response.read()
        except BaseException:
            connection.close()
            raise
        answer = Answer(response.status, response.msg, body)
        if response.will_close:
            connection.close()
        else:
            with self._lock:
                self._idle.append(connection)
        return answer

    def _connection(self) -> http.client.HTTPConnection:
        while True:
            with self._lock:
                connection = self._idle.pop() if self._idle else None
            if connection is None:
                made = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
                made.connect()
                made.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return made
            if _still_open(connection):
                return connection
            connection.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()


def _target(url: str, query: str) -> str:
    parts = urlsplit(url)
    target = parts.path or "/"
    joined = "&".join(q for q in (parts.query, query) if q)
    return f"{target}?{joined}" if joined else target


def _still_open(connection: http.client.HTTPConnection) -> bool:
    """An idle kept-alive connection the server has not closed: nothing to read on it
    (a server closing an idle connection — its keep-alive timeout, a restart — makes
    the socket readable), as httpx checks before reusing one."""
    sock = connection.sock
    if sock is None:
        return False
    # The platform's selector (epoll, kqueue; select on Windows): POSIX select() refuses a
    # descriptor above 1023, which a long-running agent process holding many files reaches.
    with selectors.DefaultSelector() as selector:
        selector.register(sock, selectors.EVENT_READ)
        return not selector.select(0)
