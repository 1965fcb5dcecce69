"""``MemoryDesk``: the synchronous client (``AsyncMemoryDesk`` is its twin)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import httpx

from memorydesk import _calls as calls
from memorydesk._transport import Config, SyncTransport
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


class _Resource:
    def __init__(self, transport: SyncTransport, default_scope: str | None) -> None:
        self._t = transport
        self._scope = default_scope

    def _scope_or(self, scope: str | None) -> str:
        chosen = scope or self._scope
        if not chosen:
            raise ValueError("give a scope (or build the client with scope=...)")
        return chosen

    def _pages(self, first: calls.Call[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        page = self._t.run(first)
        while True:
            yield from page["results"]
            if not page.get("next"):
                return
            page = self._t.run(calls.next_page(page["next"]))


class Memories(_Resource):
    """Turns: what agents and people said, extracted into facts by the server."""

    def add(
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
            self._t.run(
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

    def run(self, run_id: int) -> Run:
        return self._t.run(calls.run_get(run_id))


class Facts(_Resource):
    def add(
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
        return self._t.run(
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

    def get(self, fact_id: int) -> Fact:
        return self._t.run(calls.fact_get(fact_id))

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
    ) -> Iterator[Fact]:
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
        return (Fact.from_api(row) for row in self._pages(first))

    def update(self, fact_id: int, **fields: Any) -> Action:
        """Edit a fact in place (predicate, swap, valid_from, valid_until, confidence,
        importance, reason)."""
        return self._t.run(calls.fact_update(fact_id, **fields))

    def correct(
        self,
        fact_id: int,
        *,
        value: Any = None,
        object: str | int | None = None,
        reason: str | None = None,
    ) -> Action:
        return self._t.run(calls.fact_correct(fact_id, value=value, object=object, reason=reason))

    def retract(self, fact_ids: int | Sequence[int], *, reason: str | None = None) -> Action:
        ids = [fact_ids] if isinstance(fact_ids, int) else list(fact_ids)
        return self._t.run(calls.facts_retract(ids, reason=reason))

    def restore(self, fact_id: int, *, reason: str | None = None) -> Action:
        return self._t.run(calls.fact_restore(fact_id, reason=reason))

    def history(self, fact_id: int) -> list[Fact]:
        """The fact and the facts it superseded, newest first."""
        chain = [self.get(fact_id)]
        while chain[-1].supersedes and len(chain) < 1000:
            chain.append(self.get(chain[-1].supersedes))
        return chain


class Review(_Resource):
    """Facts waiting for review (an untrusted writer, a suspicious turn)."""

    def pending(self, *, page_size: int = PAGE_SIZE) -> Iterator[Fact]:
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
        return (f for f in map(Fact.from_api, self._pages(first)) if f.trust == "pending")

    def accept(self, fact_ids: int | Sequence[int], *, note: str | None = None) -> Action:
        return self._decide(fact_ids, "accept", note)

    def reject(self, fact_ids: int | Sequence[int], *, note: str | None = None) -> Action:
        return self._decide(fact_ids, "reject", note)

    def _decide(self, fact_ids: int | Sequence[int], action: str, note: str | None) -> Action:
        if isinstance(fact_ids, int):
            return self._t.run(calls.fact_review(fact_ids, action=action, note=note))
        return self._t.run(calls.facts_review(list(fact_ids), action=action, note=note))


class Entities(_Resource):
    def add(
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
        return self._t.run(
            calls.entity_add(
                name=name,
                type=type,
                scope=self._scope_or(scope),
                aliases=list(aliases) if aliases else None,
                identifiers=[dict(i) for i in identifiers] if identifiers else None,
                attributes=dict(attributes) if attributes else None,
            )
        )

    def get(self, entity_id: int) -> Entity:
        return self._t.run(calls.entity_get(entity_id))

    def list(
        self,
        *,
        q: str | None = None,
        type: str | None = None,
        scope: str | None = None,
        page_size: int = PAGE_SIZE,
    ) -> Iterator[Entity]:
        first = calls.entities_page(q=q, type=type, scope=scope, page_size=page_size)
        return (Entity.from_api(row) for row in self._pages(first))


class Items(_Resource):
    """Items: JSON objects under a namespace (a tuple of labels) and a key."""

    def get(self, namespace: Sequence[str], key: str, *, refresh_ttl: bool = True) -> Item | None:
        from memorydesk.errors import ItemNotFoundError

        try:
            return self._t.run(calls.item_get(namespace, key, refresh_ttl=refresh_ttl))
        except ItemNotFoundError:
            return None

    def put(
        self,
        namespace: Sequence[str],
        key: str,
        value: Mapping[str, Any],
        *,
        index: Sequence[str] | bool | None = None,
        ttl: float | None = None,
    ) -> Item:
        return self._t.run(calls.item_put(namespace, key, value, index=index, ttl=ttl))

    def delete(self, namespace: Sequence[str], key: str) -> None:
        self._t.run(calls.item_delete(namespace, key))

    def search(
        self,
        namespace_prefix: Sequence[str] = (),
        *,
        query: str | None = None,
        filter: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool = True,
    ) -> list[Item]:
        return self._t.run(
            calls.items_search(
                namespace_prefix,
                query=query,
                filter=filter,
                limit=limit,
                offset=offset,
                refresh_ttl=refresh_ttl,
            )
        )

    def list_namespaces(
        self,
        *,
        prefix: Sequence[str] | None = None,
        suffix: Sequence[str] | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        return self._t.run(
            calls.items_list_namespaces(
                prefix=prefix, suffix=suffix, max_depth=max_depth, limit=limit, offset=offset
            )
        )

    def batch(self, ops: Sequence[Mapping[str, Any]]) -> list[Any]:
        """Raw batch ops in, raw results out, in order (one request)."""
        return self._t.run(calls.items_batch(ops))


class MemoryDesk:
    """The Memory Desk client. Arguments, else ``MEMORY_DESK_URL``, ``MEMORY_DESK_TOKEN``
    and ``MEMORY_DESK_CONTEXT``. ``scope``: the default scope of writes.

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
        http_client: httpx.Client | None = None,
    ) -> None:
        self.config = Config.resolve(
            url=url, token=token, context=context, timeout=timeout, max_retries=max_retries
        )
        self._t = SyncTransport(self.config, http_client)
        self.memories = Memories(self._t, scope)
        self.facts = Facts(self._t, scope)
        self.review = Review(self._t, scope)
        self.entities = Entities(self._t, scope)
        self.items = Items(self._t, scope)

    def __enter__(self) -> MemoryDesk:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._t.close()

    # mem0's verbs

    def add(self, messages: str | Sequence[Mapping[str, Any]], **kwargs: Any) -> list[Run]:
        """Remember a text or chat messages (``memories.add``)."""
        return self.memories.add(messages, **kwargs)

    def search(
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
        return self._t.run(
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

    def get(self, fact_id: int) -> Fact:
        return self.facts.get(fact_id)

    def get_all(self, **filters: Any) -> Iterator[Fact]:
        return self.facts.list(**filters)

    def update(self, fact_id: int, **fields: Any) -> Action:
        return self.facts.update(fact_id, **fields)

    def delete(self, fact_id: int, *, reason: str | None = None) -> Action:
        """Retract a fact (it stays in history and can be restored)."""
        return self.facts.retract(fact_id, reason=reason)

    def history(self, fact_id: int) -> list[Fact]:
        return self.facts.history(fact_id)

    # the rest

    def context(
        self,
        query: str | None = None,
        *,
        entity: str | int | None = None,
        budget_tokens: int | None = None,
        scope: Sequence[str] | None = None,
        include_pending: bool | None = None,
    ) -> ContextBlock:
        """The prompt-ready memory block for a query or an entity."""
        return self._t.run(
            calls.context_block(
                query,
                entity=entity,
                budget_tokens=budget_tokens,
                scope=scope,
                include_pending=include_pending,
            )
        )

    def export(self) -> str:
        """The whole context as JSON lines (admins)."""
        return self._t.run(calls.export_text())

    def import_(self, data: bytes | str, *, format: str | None = None) -> ImportJob:
        """Import an export (or a mem0/Graphiti one) into an empty context (admins)."""
        return self._t.run(calls.import_data(data, format=format))

    def import_job(self, job_id: int) -> ImportJob:
        return self._t.run(calls.import_get(job_id))
