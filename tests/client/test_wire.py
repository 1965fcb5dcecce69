"""The sync client's own HTTP (``memorydesk._wire``): requests written as httpx writes
them, kept-alive connections shared by threads and replaced when the server closed them,
httpx kept for https and proxies."""

from __future__ import annotations

import json
import os
import resource
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import httpx
import pytest
from memorydesk import MemoryDesk, TransportError
from memorydesk._wire import query_string, wire_usable
from memorydesk.langgraph import MemoryDeskStore

from tests.client.conftest import ITEM, Desk


@pytest.mark.parametrize(
    "params",
    [
        [("namespace", "users"), ("namespace", "a b/ü"), ("key", "k&=?")],
        {"limit": 10, "exact": True, "deep": False, "none": None, "x": 1.5},
        {"subject": ["Alex", "Sam"], "scope": "a/*"},
        None,
    ],
)
def test_the_query_is_written_as_httpx_writes_it(params: Any) -> None:
    assert query_string(params) == str(httpx.QueryParams(params))


def test_plain_http_without_a_proxy_takes_the_wire(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert wire_usable("http://127.0.0.1:8000")
    assert not wire_usable("https://desk.example.com")  # certificates: httpx's
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example.com:3128")
    assert not wire_usable("http://desk.example.com")
    monkeypatch.setenv("NO_PROXY", "desk.example.com")
    assert wire_usable("http://desk.example.com")


class _ClosesWhenIdle(BaseHTTPRequestHandler):
    """HTTP/1.1 answers that promise a kept-alive connection, each connection closed
    right after its answer, as a server closes one at its keep-alive timeout."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        data = json.dumps(ITEM).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def log_message(self, *args: Any) -> None:
        pass


class _ClosingServer(HTTPServer):
    """Counts the connections it closed, and says when it closed one."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _ClosesWhenIdle)
        self.closed = 0
        self.closed_one = threading.Event()

    def shutdown_request(self, request: Any) -> None:
        super().shutdown_request(request)
        self.closed += 1
        self.closed_one.set()


@pytest.fixture
def closing_server() -> Iterator[_ClosingServer]:
    server = _ClosingServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()


def test_a_connection_the_server_closed_is_replaced_not_failed(
    closing_server: _ClosingServer,
) -> None:
    url = f"http://127.0.0.1:{closing_server.server_port}"
    with MemoryDesk(url=url, token="t", context="c", max_retries=0) as client:
        for _ in range(3):
            closing_server.closed_one.clear()
            assert client.items.get(["a"], "k").value == {"v": 1}
            assert closing_server.closed_one.wait(5)  # closed while the client kept it
            time.sleep(0.01)  # the close reaches the client's idle socket
    assert closing_server.closed == 3


def test_a_kept_connection_above_descriptor_1023_is_reused(desk: Desk) -> None:
    """A process holding many files: the client's sockets get descriptors that POSIX
    select() refuses; checking a kept connection must not fail on them."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1100:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 2048), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        with MemoryDeskStore(**desk.kwargs()) as store:
            store.put(("many",), "k", {"v": 1})
            for _ in range(3):  # each call checks the kept connection first
                item = store.get(("many",), "k")
                assert item is not None and item.value == {"v": 1}
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_nothing_listening_is_a_transport_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with (
        MemoryDesk(url=url, token="t", context="c", max_retries=0) as client,
        pytest.raises(TransportError, match="ConnectionRefusedError"),
    ):
        client.items.get(["a"], "k")


def test_threads_share_a_store_over_the_live_server(desk: Desk) -> None:
    with MemoryDeskStore(**desk.kwargs()) as store:
        store.put(("shared",), "k", {"v": 1})

        def reads(n: int) -> int:
            return sum(store.get(("shared",), "k") is not None for _ in range(n))

        with ThreadPoolExecutor(max_workers=6) as pool:
            assert sum(pool.map(reads, [15] * 6)) == 90
