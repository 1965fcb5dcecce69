"""LangGraph stores over Memory Desk's items: ``MemoryDeskStore`` and
``AsyncMemoryDeskStore``.

Items are kept exactly as put — ``get`` by key returns what was put, ``delete`` deletes,
``list_namespaces`` lists every namespace the token may read — and one ``batch`` /
``abatch`` is one HTTP request (``POST items/batch``). The async store gathers the
operations scheduled in the same tick into one batch, as LangGraph's PostgresStore does.

Search: with a ``query``, the server ranks the indexed items by its hybrid search (BM25
and vector, fused) and embeds the text itself; ``index`` chooses which text is indexed:

- ``index=None`` (the default): items are not indexed unless a put names fields;
- ``index={"fields": ["text"]}`` (LangGraph's ``IndexConfig``; ``dims`` and ``embed`` are
  not needed and are ignored) or simply ``index=["text"]``: those JSON paths, ``["$"]`` for
  the whole value.

``ttl``: LangGraph's ``TTLConfig`` (``default_ttl`` minutes, ``refresh_on_read``); the
server never returns an expired item and its task worker sweeps them, so
``sweep_interval_minutes`` needs no thread here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from datetime import datetime
from typing import Any

import httpx
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)
from langgraph.store.base.batch import AsyncBatchedBaseStore

from memorydesk._transport import AsyncTransport, Call, Config, SyncTransport

__all__ = ["AsyncMemoryDeskStore", "MemoryDeskStore"]


def _index_fields(index: Mapping[str, Any] | Sequence[str] | None) -> list[str] | None:
    if index is None:
        return None
    if isinstance(index, Mapping):
        fields = index.get("fields")
        return list(fields) if fields else ["$"]
    return list(index)


class _Ops:
    """Turning LangGraph's ops into the batch body and the answer into its results."""

    def __init__(self, fields: list[str] | None) -> None:
        self.fields = fields

    def body(self, ops: Sequence[Op]) -> dict[str, Any]:
        return {"ops": [self._op(op) for op in ops]}

    def _op(self, op: Op) -> dict[str, Any]:
        if isinstance(op, GetOp):
            return {
                "op": "get",
                "namespace": list(op.namespace),
                "key": op.key,
                "refresh_ttl": op.refresh_ttl,
            }
        if isinstance(op, PutOp):
            body: dict[str, Any] = {
                "op": "put",
                "namespace": list(op.namespace),
                "key": op.key,
                "value": op.value,
                "index": self._index(op.index),
            }
            if op.value is not None and op.ttl is not None:
                body["ttl"] = op.ttl
            return body
        if isinstance(op, SearchOp):
            return {
                "op": "search",
                "namespace_prefix": list(op.namespace_prefix),
                "query": op.query,
                "filter": op.filter,
                "limit": op.limit,
                "offset": op.offset,
                "refresh_ttl": op.refresh_ttl,
            }
        if isinstance(op, ListNamespacesOp):
            return {
                "op": "list_namespaces",
                "match_conditions": [
                    {"match_type": c.match_type, "path": list(c.path)}
                    for c in op.match_conditions or ()
                ],
                "max_depth": op.max_depth,
                "limit": op.limit,
                "offset": op.offset,
            }
        raise TypeError(f"unknown store operation: {type(op).__name__}")

    def _index(self, index: Any) -> list[str] | bool:
        if index is False:
            return False
        if index is None:
            return self.fields if self.fields else False
        return list(index)

    def results(self, ops: Sequence[Op], data: dict[str, Any]) -> list[Result]:
        answers = data["results"]
        return [_result(op, answer) for op, answer in zip(ops, answers, strict=True)]


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _item(data: dict[str, Any]) -> Item:
    return Item(
        value=data["value"],
        key=data["key"],
        namespace=tuple(data["namespace"]),
        created_at=_time(data["created_at"]),
        updated_at=_time(data["updated_at"]),
    )


def _result(op: Op, answer: Any) -> Result:
    if isinstance(op, GetOp):
        return _item(answer) if answer else None
    if isinstance(op, SearchOp):
        return [
            SearchItem(
                namespace=tuple(hit["namespace"]),
                key=hit["key"],
                value=hit["value"],
                created_at=_time(hit["created_at"]),
                updated_at=_time(hit["updated_at"]),
                score=hit.get("score"),
            )
            for hit in answer
        ]
    if isinstance(op, ListNamespacesOp):
        return [tuple(ns) for ns in answer]
    return None


def _call(body: dict[str, Any]) -> Call[dict[str, Any]]:
    return Call("POST", "items/batch", dict, json=body)


class MemoryDeskStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items live in a Memory Desk context.

    ``url``, ``token`` and ``context`` default to ``MEMORY_DESK_URL``,
    ``MEMORY_DESK_TOKEN`` and ``MEMORY_DESK_CONTEXT``. The token's scope grants apply:
    namespaces are scopes, label by label.
    """

    supports_ttl = True

    def __init__(
        self,
        *,
        url: str | None = None,
        token: str | None = None,
        context: str | None = None,
        index: Mapping[str, Any] | Sequence[str] | None = None,
        ttl: TTLConfig | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        super().__init__()
        config = Config.resolve(
            url=url, token=token, context=context, timeout=timeout, max_retries=max_retries
        )
        self._transport = SyncTransport(config, http_client)
        self._ops = _Ops(_index_fields(index))
        self.index_config = index
        self.ttl_config = ttl

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        if not ops:
            return []
        return self._ops.results(ops, self._transport.run(_call(self._ops.body(ops))))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.get_running_loop().run_in_executor(None, self.batch, list(ops))

    def sweep_ttl(self) -> int:
        """The server's task worker sweeps expired items; nothing to do here (0)."""
        return 0

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> Future[None]:
        """For code written for PostgresStore: the server sweeps, so this returns a done
        future."""
        done: Future[None] = Future()
        done.set_result(None)
        return done

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        return True

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> MemoryDeskStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncMemoryDeskStore(AsyncBatchedBaseStore):
    """The asyncio twin of ``MemoryDeskStore`` (build it inside a running event loop).

    Operations awaited together go to the server as one batch; the sync methods work
    from other threads, as LangGraph's async stores do.
    """

    supports_ttl = True

    def __init__(
        self,
        *,
        url: str | None = None,
        token: str | None = None,
        context: str | None = None,
        index: Mapping[str, Any] | Sequence[str] | None = None,
        ttl: TTLConfig | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__()
        config = Config.resolve(
            url=url, token=token, context=context, timeout=timeout, max_retries=max_retries
        )
        self._transport = AsyncTransport(config, http_client)
        self._ops = _Ops(_index_fields(index))
        self.index_config = index
        self.ttl_config = ttl

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        if not ops:
            return []
        data = await self._transport.run(_call(self._ops.body(ops)))
        return self._ops.results(ops, data)

    async def sweep_ttl(self) -> int:
        """The server's task worker sweeps expired items; nothing to do here (0)."""
        return 0

    async def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> asyncio.Task[None]:
        """For code written for AsyncPostgresStore: the server sweeps, so this returns a
        finished task."""
        return asyncio.create_task(asyncio.sleep(0))

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        return True

    async def aclose(self) -> None:
        await self._transport.close()

    async def __aenter__(self) -> AsyncMemoryDeskStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
