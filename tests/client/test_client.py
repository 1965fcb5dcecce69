"""``MemoryDesk`` and ``AsyncMemoryDesk`` over real HTTP: verbs, typed results, errors by
code, pagination, configuration from the environment, retries."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import memorydesk
import pytest
from memorydesk import AsyncMemoryDesk, MemoryDesk
from memorydesk.errors import (
    BadRequestError,
    ContextNotFoundError,
    InvalidNamespaceError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    ScopeForbiddenError,
)

from memory.models import Role
from tests.client.conftest import ITEM, Desk, off_the_main_loop


def test_the_client_reads_its_settings_from_the_environment(
    desk: Desk, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORY_DESK_URL", desk.url)
    monkeypatch.setenv("MEMORY_DESK_TOKEN", desk.token)
    monkeypatch.setenv("MEMORY_DESK_CONTEXT", desk.context)
    with MemoryDesk() as client:
        assert client.items.put(["env"], "k", {"v": 1}).value == {"v": 1}


def test_missing_settings_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MEMORY_DESK_URL", "MEMORY_DESK_TOKEN", "MEMORY_DESK_CONTEXT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="MEMORY_DESK_TOKEN"):
        MemoryDesk(url="http://localhost")


def test_items_put_get_search_list_and_delete(desk: Desk) -> None:
    with MemoryDesk(**desk.kwargs()) as client:
        item = client.items.put(["users", "alex"], "tea", {"text": "Alex drinks green tea"})
        assert isinstance(item, memorydesk.Item)
        assert item.namespace == ("users", "alex") and item.created_at == item.updated_at
        client.items.put(["users", "alex"], "car", {"text": "Alex drives a red car"})
        assert client.items.get(["users", "alex"], "tea").value == {"text": "Alex drinks green tea"}
        hits = client.items.search(["users"], query="green tea")
        assert hits[0].key == "tea" and hits[0].score is not None
        assert client.items.list_namespaces(prefix=["users"]) == [("users", "alex")]
        client.items.delete(["users", "alex"], "tea")
        assert client.items.get(["users", "alex"], "tea") is None
        results = client.items.batch([{"op": "get", "namespace": ["users", "alex"], "key": "car"}])
        assert results[0]["value"] == {"text": "Alex drives a red car"}


def test_turns_facts_search_and_the_context_block(desk: Desk) -> None:
    with MemoryDesk(**desk.kwargs(), scope="org/acme") as client:
        (run,) = client.add("Alex joined Acme in May.", infer="none", wait=True)
        assert isinstance(run, memorydesk.Run) and run.outcome == "succeeded"
        written = client.facts.add(subject="Alex", predicate="works_at", object="Acme")
        assert written.outcome == "created"
        fact = client.get(written.fact.id)
        assert fact.text == "Alex works_at Acme" and fact.subject.name == "Alex"
        assert [f.id for f in client.get_all(predicate="worksAt")] == [fact.id]
        found = client.search("Alex Acme", target="facts", mode="bm25")
        assert found.results and found.results[0].type == "fact"
        block = client.context("Where does Alex work?")
        assert "Acme" in block.text


def test_fact_correction_history_retract_and_restore(desk: Desk) -> None:
    with MemoryDesk(**desk.kwargs(), scope="org/acme") as client:
        first = client.facts.add(subject="Alex", predicate="lives_in", value="Paris").fact
        corrected = client.facts.correct(first.id, value="Lyon", reason="moved")
        assert corrected.fact is not None and corrected.fact.value == "Lyon"
        newest = corrected.fact.id
        history = client.history(newest)
        assert history[0].id == newest
        retracted = client.delete(newest, reason="wrong")
        assert retracted.raw["retracted"]
        assert client.get(newest).status == "retracted"
        client.facts.restore(newest)
        assert client.get(newest).status != "retracted"


def test_review_lists_and_accepts_pending_facts(make_desk: Callable[..., Desk]) -> None:
    writer = make_desk(trust="untrusted")
    curator = make_desk()
    with MemoryDesk(**writer.kwargs(), scope="org") as agent:
        pending = agent.facts.add(subject="Alex", predicate="likes", value="tea").fact
    assert pending.trust == "pending"
    with MemoryDesk(**curator.kwargs()) as client:
        assert [f.id for f in client.review.pending()] == [pending.id]
        client.review.accept(pending.id)
        assert client.get(pending.id).trust == "trusted"
        assert list(client.review.pending()) == []


def test_lists_are_iterators_over_pages(desk: Desk) -> None:
    with MemoryDesk(**desk.kwargs(), scope="org") as client:
        for i in range(7):
            client.entities.add(name=f"Person {i}", type="person")
        names = [e.name for e in client.entities.list(type="person", page_size=3)]
        assert sorted(names) == [f"Person {i}" for i in range(7)]


def test_each_error_code_raises_its_class(make_desk: Callable[..., Desk], desk: Desk) -> None:
    narrow = make_desk(role=Role.VIEWER, grants=["read,write:org/acme/*"])
    with MemoryDesk(**narrow.kwargs()) as client:
        with pytest.raises(ScopeForbiddenError) as refused:
            client.items.put(["org", "other"], "k", {"v": 1})
        assert isinstance(refused.value, PermissionDeniedError)
        assert refused.value.status == 403 and refused.value.code == "scope_forbidden"
        with pytest.raises(InvalidNamespaceError) as bad:
            client.items.put(["org", ""], "k", {"v": 1})
        assert isinstance(bad.value, BadRequestError)
    with MemoryDesk(url=desk.url, token=desk.token, context="nowhere") as client:
        with pytest.raises(ContextNotFoundError) as missing:
            client.items.get(["a"], "k")
        assert isinstance(missing.value, NotFoundError)


def test_the_export_is_json_lines(desk: Desk) -> None:
    with MemoryDesk(**desk.kwargs(), scope="org") as client:
        client.facts.add(subject="Alex", predicate="likes", value="tea")
        lines = [json.loads(line) for line in client.export().splitlines() if line]
        assert lines and lines[0]


def test_the_async_client_is_the_twin(desk: Desk) -> None:
    async def main() -> None:
        async with AsyncMemoryDesk(**desk.kwargs(), scope="org") as client:
            await client.items.put(["a"], "k", {"text": "hello"})
            assert (await client.items.get(["a"], "k")).value == {"text": "hello"}
            assert await client.items.get(["a"], "missing") is None
            written = await client.facts.add(subject="Alex", predicate="likes", value="tea")
            assert [f.id async for f in client.get_all(subject="Alex")] == [written.fact.id]
            assert (await client.get(written.fact.id)).value == "tea"
            with pytest.raises(InvalidNamespaceError):
                await client.items.put([""], "k", {"v": 1})

    off_the_main_loop(lambda: asyncio.run(main()))


class _Flaky(BaseHTTPRequestHandler):
    """Answers 429 with Retry-After, then 503, then the item."""

    calls: list[str] = []

    def do_GET(self) -> None:
        self.calls.append(self.path)
        if len(self.calls) == 1:
            self._send(
                429,
                {"error": {"code": "throttled", "message": "slow", "details": None}},
                {"Retry-After": "0"},
            )
        elif len(self.calls) == 2:
            self._send(503, {"error": {"code": "unavailable", "message": "x", "details": None}})
        else:
            self._send(200, ITEM)

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def flaky() -> Iterator[str]:
    _Flaky.calls = []
    server = HTTPServer(("127.0.0.1", 0), _Flaky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_429_and_503_are_retried_honouring_retry_after(flaky: str) -> None:
    with MemoryDesk(url=flaky, token="t", context="c") as client:
        assert client.items.get(["a"], "k").value == {"v": 1}
    assert len(_Flaky.calls) == 3
    _Flaky.calls = []
    with MemoryDesk(url=flaky, token="t", context="c", max_retries=0) as client:
        with pytest.raises(RateLimitError) as throttled:
            client.items.get(["a"], "k")
        assert throttled.value.retry_after == 0.0
