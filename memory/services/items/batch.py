"""One batch of item operations — get, put, search, list_namespaces — as LangGraph's
``BaseStore.batch`` defines them, answered in the order of the ops.

Like LangGraph's PostgresStore, the reads of a batch see the items as they were when it
arrived and its puts are applied after them, in one transaction; every put is checked
(and the whole batch refused) before anything is written. Reads that refresh lifetimes
refresh them with the puts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memory.domain.access import ContextAccess
from memory.domain.namespaces import Namespace, namespace_scope
from memory.models import Item
from memory.selectors.items import (
    ItemHit,
    MatchCondition,
    items_get,
    items_search,
    namespaces_list,
)
from memory.services.items.ttl import items_touch
from memory.services.items.writes import ItemPut, items_write


@dataclass(frozen=True)
class GetOp:
    namespace: Namespace
    key: str
    refresh_ttl: bool = True


@dataclass(frozen=True)
class SearchOp:
    namespace_prefix: Namespace
    query: str | None = None
    filter: dict[str, Any] | None = None
    limit: int = 10
    offset: int = 0
    refresh_ttl: bool = True


@dataclass(frozen=True)
class ListNamespacesOp:
    match_conditions: tuple[MatchCondition, ...] = ()
    max_depth: int | None = None
    limit: int = 100
    offset: int = 0


Op = GetOp | ItemPut | SearchOp | ListNamespacesOp
Result = Item | None | list[ItemHit] | list[Namespace]


def items_batch(*, access: ContextAccess, ops: Sequence[Op]) -> list[Result]:
    """The result of each op, in order: an item or None for a get, None for a put, a
    list of hits for a search, a list of namespaces for a list_namespaces."""
    results: list[Result] = [None] * len(ops)
    puts = [op for op in ops if isinstance(op, ItemPut)]
    for scope in {namespace_scope(put.namespace) for put in puts}:
        access.require_write(scope)  # refuse the batch before reading anything
    gets = [(i, op) for i, op in enumerate(ops) if isinstance(op, GetOp)]
    found = items_get(access=access, refs=[(op.namespace, op.key) for _, op in gets])
    touched: set[int] = set()
    for i, get in gets:
        item = found.get((get.namespace, get.key))
        results[i] = item
        if item is not None and get.refresh_ttl and item.expires_at is not None:
            touched.add(item.pk)
    for i, op in enumerate(ops):
        if isinstance(op, SearchOp):
            hits = items_search(
                access=access,
                namespace_prefix=op.namespace_prefix,
                query=op.query,
                filter=op.filter,
                limit=op.limit,
                offset=op.offset,
            )
            results[i] = hits
            if op.refresh_ttl:
                touched.update(h.item.pk for h in hits if h.item.expires_at is not None)
        elif isinstance(op, ListNamespacesOp):
            results[i] = namespaces_list(
                access=access,
                conditions=op.match_conditions,
                max_depth=op.max_depth,
                limit=op.limit,
                offset=op.offset,
            )
    items_touch(item_ids=sorted(touched))
    if puts:
        items_write(access=access, puts=puts)
    return results
