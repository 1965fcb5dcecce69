"""``AsyncMemoryDesk``: the asynchronous twin of ``MemoryDesk`` (same calls, awaited)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

import httpx

from memorydesk import _calls as calls
from memorydesk._transport import AsyncTransport, Config
from memorydesk.types import (
    Action,
    ContextBlock,
    Entity,
    Fact,
    FactWrite,
    ImportJob,
    Item,
    Run,
    SearchResults,
)

PAGE_SIZE = 100
T = TypeVar("T")
R = TypeVar("R")


async def _mapped(
    convert: Callable[[R], T],
    rows: AsyncIterator[R],
    *,
    keep: Callable[[T], bool] | None = None,
) -> AsyncIterator[T]:
    async for row in rows:
        value = convert(row)
        if keep is None or keep(value):
            yield value


class _Resource:
    def __init__(self, transport: AsyncTransport, default_scope: str | None) -> None:
        self._t = transport
        self._scope = default_scope

    def _scope_or(self, scope: str | None) -> str:
        chosen = scope or self._scope
        if not chosen:
            raise ValueError("give a scope (or build the client with scope=...)")
        return chosen

    async def _pages(self, first: calls.Call[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
        page = await self._t.run(first)
        while True:
            for row in page["results"]:
                yield row
            if not page.get("next"):
                return
            page = await self._t.run(calls.next_page(page["next"]))


class AsyncMemories(_Resource):
    """Turns: what agents and people said, extracted into facts by the server."""

    async def add(
        self,
        messages: str | Sequence[Mapping[str, Any]],
        *,
        scope: str | None = None,
        infer: str = "llm",
        wait: bool = False,
        thread: str | None = None,
        speaker: str | None = None,
        said_at: datetime | str | None = None,
        ref: str | None = None,
        source: str | None = None,
    ) -> list[Run]:
        """Remember a text, or chat messages (one turn each, spoken by their role)."""
        return [
            await self._t.run(
                calls.remember(
                    text,
                    scope=self._scope_or(scope),
                    infer=infer,
                    wait=wait,
                    speaker=speaker or role,
                    said_at=said_at,
                    thread=thread,
                    ref=ref,
                    source=source,
                )
            )
            for text, role in calls.turns_of(messages)
        ]

    async def run(self, run_id: int) -> Run:
        return await self._t.run(calls.run_get(run_id))


class AsyncFacts(_Resource):
    async def add(
        self,
        *,
        subject: str | int | Mapping[str, Any],
        predicate: str,
        object: str | int | Mapping[str, Any] | None = None,
        value: Any = None,
        scope: str | None = None,
        confidence: float | None = None,
        importance: float | None = None,
        valid_from: datetime | str | None = None,
        valid_until: datetime | str | None = None,
        kind: str | None = None,
    ) -> FactWrite:
        return await self._t.run(
            calls.fact_add(
                subject=subject,
                predicate=predicate,
                object=object,
                value=value,
                scope=self._scope_or(scope),
                confidence=confidence,
                importance=importance,
                valid_from=calls._when(valid_from),
                valid_until=calls._when(valid_until),
                kind=kind,
            )
        )

    async def get(self, fact_id: int) -> Fact:
        return await self._t.run(calls.fact_get(fact_id))

    def list(
        self,
        *,
        subject: str | int | None = None,
        predicate: str | None = None,
        object: str | int | None = None,
        kind: str | None = None,
        scope: str | None = None,
        as_of: datetime | str | None = None,
        include_superseded: bool = False,
        include_pending: bool = False,
        page_size: int = PAGE_SIZE,
    ) -> AsyncIterator[Fact]:
        """Every matching fact, page by page as the iterator advances."""
        first = calls.facts_page(
            subject=subject,
            predicate=predicate,
            object=object,
            kind=kind,
            scope=scope,
            as_of=as_of,
            include_superseded=include_superseded,
            include_pending=include_pending,
            page_size=page_size,
        )
        return _mapped(Fact.from_api, self._pages(first))

    async def update(self, fact_id: int, **fields: Any) -> Action:
        """Edit a fact in place (predicate, swap, valid_from, valid_until, confidence,
        importance, reason)."""
        return await self._t.run(calls.fact_update(fact_id, **fields))

    async def correct(
        self,
        fact_id: int,
        *,
        value: Any = None,
        object: str | int | None = None,
        reason: str | None = None,
    ) -> Action:
        return await self._t.run(
            calls.fact_correct(fact_id, value=value, object=object, reason=reason)
        )

    async def retract(self, fact_ids: int | Sequence[int], *, reason: str | None = None) -> Action:
        ids = [fact_ids] if isinstance(fact_ids, int) else list(fact_ids)
        return await self._t.run(calls.facts_retract(ids, reason=reason))

    async def restore(self, fact_id: int, *, reason: str | None = None) -> Action:
        return await self._t.run(calls.fact_restore(fact_id, reason=reason))

    async def history(self, fact_id: int) -> list[Fact]:
        """The fact and the facts it superseded, newest first."""
        chain = [await self.get(fact_id)]
        while chain[-1].supersedes and len(chain) < 1000:
            chain.append(await self.get(chain[-1].supersedes))
        return chain


class AsyncReview(_Resource):
    """Facts waiting for review (an untrusted writer, a suspicious turn)."""

    def pending(self, *, page_size: int = PAGE_SIZE) -> AsyncIterator[Fact]:
        first = calls.facts_page(
            subject=None,
            predicate=None,
            object=None,
            kind=None,
            scope=None,
            as_of=None,
            include_superseded=False,
            include_pending=True,
            page_size=page_size,
        )
        return _mapped(Fact.from_api, self._pages(first), keep=lambda f: f.trust == "pending")

    async def accept(self, fact_ids: int | Sequence[int], *, note: str | None = None) -> Action:
        return await self._decide(fact_ids, "accept", note)

    async def reject(self, fact_ids: int | Sequence[int], *, note: str | None = None) -> Action:
        return await self._decide(fact_ids, "reject", note)

    async def _decide(self, fact_ids: int | Sequence[int], action: str, note: str | None) -> Action:
        if isinstance(fact_ids, int):
            return await self._t.run(calls.fact_review(fact_ids, action=action, note=note))
        return await self._t.run(calls.facts_review(list(fact_ids), action=action, note=note))


class AsyncEntities(_Resource):
    async def add(
        self,
        *,
        name: str,
        type: str | None = None,
        scope: str | None = None,
        aliases: Sequence[str] | None = None,
        identifiers: Sequence[Mapping[str, str]] | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> Entity:
        """Create an entity, or match the existing one (by identifier or name)."""
        return await self._t.run(
            calls.entity_add(
                name=name,
                type=type,
                scope=self._scope_or(scope),
                aliases=list(aliases) if aliases else None,
                identifiers=[dict(i) for i in identifiers] if identifiers else None,
                attributes=dict(attributes) if attributes else None,
            )
        )

    async def get(self, entity_id: int) -> Entity:
        return await self._t.run(calls.entity_get(entity_id))

    def list(
        self,
        *,
        q: str | None = None,
        type: str | None = None,
        scope: str | None = None,
        page_size: int = PAGE_SIZE,
    ) -> AsyncIterator[Entity]:
        first = calls.entities_page(q=q, type=type, scope=scope, page_size=page_size)
        return _mapped(Entity.from_api, self._pages(first))


class AsyncItems(_Resource):
    """Items: JSON objects under a namespace (a tuple of labels) and a key."""

    async def get(
        self, namespace: Sequence[str], key: str, *, refresh_ttl: bool = True
    ) -> Item | None:
        from memorydesk.errors import ItemNotFoundError

        try:
            return await self._t.run(calls.item_get(namespace, key, refresh_ttl=refresh_ttl))
        except ItemNotFoundError:
            return None

    async def put(
        self,
        namespace: Sequence[str],
        key: str,
        value: Mapping[str, Any],
        *,
        index: Sequence[str] | bool | None = None,
        ttl: float | None = None,
    ) -> Item:
        return await self._t.run(calls.item_put(namespace, key, value, index=index, ttl=ttl))

    async def delete(self, namespace: Sequence[str], key: str) -> None:
        await self._t.run(calls.item_delete(namespace, key))

    async def search(
        self,
        namespace_prefix: Sequence[str] = (),
        *,
        query: str | None = None,
        filter: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool = True,
    ) -> list[Item]:
        return await self._t.run(
            calls.items_search(
                namespace_prefix,
                query=query,
                filter=filter,
                limit=limit,
                offset=offset,
                refresh_ttl=refresh_ttl,
            )
        )

    async def list_namespaces(
        self,
        *,
        prefix: Sequence[str] | None = None,
        suffix: Sequence[str] | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        return await self._t.run(
            calls.items_list_namespaces(
                prefix=prefix, suffix=suffix, max_depth=max_depth, limit=limit, offset=offset
            )
        )

    async def batch(self, ops: Sequence[Mapping[str, Any]]) -> list[Any]:
        """Raw batch ops in, raw results out, in order (one request)."""
        return await self._t.run(calls.items_batch(ops))


class AsyncMemoryDesk:
    """The Memory Desk client, asynchronous. Arguments, else ``MEMORY_DESK_URL``,
    ``MEMORY_DESK_TOKEN`` and ``MEMORY_DESK_CONTEXT``. ``scope``: the default scope of writes.

    The mem0 names are here with the same meanings: ``add``, ``search``, ``get``,
    ``get_all``, ``update``, ``delete``, ``history``. Resource groups: ``memories``,
    ``facts``, ``review``, ``entities``, ``items``.
    """

    def __init__(
        self,
        *,
        url: str | None = None,
        token: str | None = None,
        context: str | None = None,
        scope: str | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.config = Config.resolve(
            url=url, token=token, context=context, timeout=timeout, max_retries=max_retries
        )
        self._t = AsyncTransport(self.config, http_client)
        self.memories = AsyncMemories(self._t, scope)
        self.facts = AsyncFacts(self._t, scope)
        self.review = AsyncReview(self._t, scope)
        self.entities = AsyncEntities(self._t, scope)
        self.items = AsyncItems(self._t, scope)

    async def __aenter__(self) -> AsyncMemoryDesk:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._t.close()

    # mem0's verbs

    async def add(self, messages: str | Sequence[Mapping[str, Any]], **kwargs: Any) -> list[Run]:
        """Remember a text or chat messages (``memories.add``)."""
        return await self.memories.add(messages, **kwargs)

    async def search(
        self,
        query: str,
        *,
        mode: str | None = None,
        k: int | None = None,
        scope: Sequence[str] | None = None,
        target: str | None = None,
        thread: str | None = None,
        include_pending: bool | None = None,
    ) -> SearchResults:
        return await self._t.run(
            calls.search(
                query,
                mode=mode,
                k=k,
                scope=scope,
                target=target,
                thread=thread,
                include_pending=include_pending,
            )
        )

    async def get(self, fact_id: int) -> Fact:
        return await self.facts.get(fact_id)

    def get_all(self, **filters: Any) -> AsyncIterator[Fact]:
        return self.facts.list(**filters)

    async def update(self, fact_id: int, **fields: Any) -> Action:
        return await self.facts.update(fact_id, **fields)

    async def delete(self, fact_id: int, *, reason: str | None = None) -> Action:
        """Retract a fact (it stays in history and can be restored)."""
        return await self.facts.retract(fact_id, reason=reason)

    async def history(self, fact_id: int) -> list[Fact]:
        return await self.facts.history(fact_id)

    # the rest

    async def context(
        self,
        query: str | None = None,
        *,
        entity: str | int | None = None,
        budget_tokens: int | None = None,
        scope: Sequence[str] | None = None,
        include_pending: bool | None = None,
    ) -> ContextBlock:
        """The prompt-ready memory block for a query or an entity."""
        return await self._t.run(
            calls.context_block(
                query,
                entity=entity,
                budget_tokens=budget_tokens,
                scope=scope,
                include_pending=include_pending,
            )
        )

    async def export(self) -> str:
        """The whole context as JSON lines (admins)."""
        return await self._t.run(calls.export_text())

    async def import_(self, data: bytes | str, *, format: str | None = None) -> ImportJob:
        """Import an export (or a mem0/Graphiti one) into an empty context (admins)."""
        return await self._t.run(calls.import_data(data, format=format))

    async def import_job(self, job_id: int) -> ImportJob:
        return await self._t.run(calls.import_get(job_id))
