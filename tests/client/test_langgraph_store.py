"""``MemoryDeskStore`` and ``AsyncMemoryDeskStore``: LangGraph's ``BaseStore`` contract
over real HTTP to the live test server."""

from __future__ import annotations

import asyncio
import datetime as dt
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from django.utils import timezone
from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, PutOp, SearchOp
from memorydesk.errors import ScopeForbiddenError
from memorydesk.langgraph import AsyncMemoryDeskStore, MemoryDeskStore

from memory.models import Item as StoredItem
from memory.models import Role
from tests.client.conftest import Desk, off_the_main_loop


class Counting:
    """An httpx client that counts the requests it sends."""

    def __init__(self) -> None:
        self.requests = 0

    def hook(self, request: httpx.Request) -> None:
        self.requests += 1

    async def ahook(self, request: httpx.Request) -> None:
        self.requests += 1


def test_get_returns_exactly_what_was_put_and_delete_deletes(desk: Desk) -> None:
    with MemoryDeskStore(**desk.kwargs()) as store:
        value = {"title": "Doc", "tags": ["a", "b"], "n": {"deep": [1, 2.5, None]}}
        store.put(("docs", "user_1"), "d1", value)
        item = store.get(("docs", "user_1"), "d1")
        assert item is not None and item.value == value
        assert item.namespace == ("docs", "user_1") and item.key == "d1"
        store.put(("docs", "user_1"), "d1", {"title": "Doc 2"})
        updated = store.get(("docs", "user_1"), "d1")
        assert updated is not None and updated.value == {"title": "Doc 2"}
        assert updated.updated_at > item.updated_at and updated.created_at == item.created_at
        store.delete(("docs", "user_1"), "d1")
        assert store.get(("docs", "user_1"), "d1") is None


def test_one_batch_is_one_request_with_results_in_order(desk: Desk) -> None:
    counting = Counting()
    http = httpx.Client(event_hooks={"request": [counting.hook]})
    with MemoryDeskStore(**desk.kwargs(), http_client=http) as store:
        store.put(("test", "foo"), "key1", {"data": "value1"})
        counting.requests = 0
        results = store.batch(
            [
                GetOp(("test", "foo"), "key1"),
                PutOp(("test", "bar"), "key2", {"data": "value2"}),
                SearchOp(("test",), filter={"data": "value1"}, limit=10),
                ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("test",)),)),
                GetOp(("test",), "missing"),
            ]
        )
        assert counting.requests == 1
        assert results[0] is not None and results[0].value == {"data": "value1"}
        assert results[1] is None
        assert [hit.key for hit in results[2]] == ["key1"]
        assert results[3] == [("test", "foo")]
        assert results[4] is None
        assert store.batch([]) == []


def test_namespaces_match_by_label_and_list_all_the_token_may_read(desk: Desk) -> None:
    with MemoryDeskStore(**desk.kwargs()) as store:
        for namespace in [("foo",), ("foo", "child"), ("foobar",), ("a%b",), ("users", "alice\n")]:
            store.put(namespace, "k", {"v": 1})
        assert {i.namespace for i in store.search(("foo",), limit=50)} == {
            ("foo",),
            ("foo", "child"),
        }
        assert store.list_namespaces(prefix=("a%b",)) == [("a%b",)]
        assert store.list_namespaces(suffix=("alice",)) == []
        assert len(store.list_namespaces()) == 5
        assert store.list_namespaces(max_depth=1) == [("a%b",), ("foo",), ("foobar",), ("users",)]


def test_search_ranks_indexed_text_and_filters(desk: Desk) -> None:
    with MemoryDeskStore(**desk.kwargs(), index={"fields": ["text"]}) as store:
        store.put(("m",), "apple", {"text": "red apple", "color": "red", "score": 4.5})
        store.put(("m",), "car", {"text": "red car", "color": "red", "score": 3.0})
        store.put(("m",), "green", {"text": "green apple", "color": "green", "score": 4.0})
        hits = store.search(("m",), query="apple", filter={"color": "red"})
        assert [h.key for h in hits] == ["apple", "car"]
        assert hits[0].score is not None and hits[0].score > hits[1].score  # type: ignore[operator]
        assert {h.key for h in store.search(("m",), filter={"score": {"$gte": 4.0}})} == {
            "apple",
            "green",
        }
        store.put(("m",), "hidden", {"text": "apple pie"}, index=False)
        ranked = store.search(("m",), query="apple pie", limit=10)
        assert ranked[-1].key == "hidden" and ranked[-1].score is None


def test_a_hit_scores_its_similarity_to_the_query_not_its_place(desk: Desk) -> None:
    # One item is first in both rankings whatever the query: a fused score would be the
    # same for every query. The score is the cosine similarity of the vectors.
    with MemoryDeskStore(**desk.kwargs(), index={"fields": ["text"]}) as store:
        store.put(("docs",), "orchard", {"text": "green apples ripen in the orchard"})

        def score(query: str) -> float:
            (hit,) = store.search(("docs",), query=query)
            assert hit.key == "orchard" and hit.score is not None
            return hit.score

        near, far = score("apples in an orchard"), score("quarterly tax invoice")
        assert -1.0 <= far < near <= 1.0
        assert score("green apples ripen in the orchard") == pytest.approx(1.0, abs=1e-3)
        # sharing a word puts it first in the BM25 ranking too, not at the top of the scale
        assert score("orchard !@#$%^&*()") < score("green apples ripen in the orchard")
        assert store.search(("docs",), query="")[0].score is None


def test_ttl_expired_items_are_gone_and_reads_refresh(desk: Desk) -> None:
    ttl = {"default_ttl": 10.0, "refresh_on_read": True}
    with MemoryDeskStore(**desk.kwargs(), ttl=ttl) as store:  # type: ignore[arg-type]
        assert store.supports_ttl
        store.put(("t",), "short", {"v": 1})
        store.put(("t",), "forever", {"v": 2}, ttl=None)
        stored = StoredItem.objects.get(key="short")
        assert stored.ttl_minutes == 10.0
        soon = timezone.now() + dt.timedelta(minutes=1)
        StoredItem.objects.filter(key="short").update(expires_at=soon)
        assert store.get(("t",), "short", refresh_ttl=False) is not None
        assert StoredItem.objects.get(key="short").expires_at == soon
        store.get(("t",), "short")
        assert StoredItem.objects.get(key="short").expires_at > soon  # type: ignore[operator]
        StoredItem.objects.filter(key="short").update(
            expires_at=timezone.now() - dt.timedelta(seconds=1)
        )
        assert store.get(("t",), "short") is None
        assert [i.key for i in store.search(("t",))] == ["forever"]


def test_grants_bound_what_the_store_reads_and_writes(make_desk: Any) -> None:
    admin = make_desk()
    with MemoryDeskStore(**admin.kwargs()) as store:
        store.put(("org", "other"), "k", {"v": 1})
    narrow = make_desk(role=Role.VIEWER, grants=["read,write:org/acme/*"])
    with MemoryDeskStore(**narrow.kwargs()) as store:
        store.put(("org", "acme", "alex"), "k", {"v": 2})
        assert store.get(("org", "other"), "k") is None
        assert store.list_namespaces() == [("org", "acme", "alex")]
        with pytest.raises(ScopeForbiddenError):
            store.put(("org", "other"), "k", {"v": 3})


def test_the_async_store_batches_what_is_awaited_together(desk: Desk) -> None:
    counting = Counting()

    async def main() -> None:
        http = httpx.AsyncClient(event_hooks={"request": [counting.ahook]})
        async with AsyncMemoryDeskStore(**desk.kwargs(), http_client=http) as store:
            await asyncio.gather(
                *(store.aput(("bulk", str(i % 3)), f"k{i}", {"i": i}) for i in range(300))
            )
            assert counting.requests <= 3
            items = await asyncio.gather(
                *(store.aget(("bulk", str(i % 3)), f"k{i}") for i in range(300))
            )
            assert [item.value["i"] for item in items if item] == list(range(300))
            assert await store.alist_namespaces(prefix=("bulk",)) == [
                ("bulk", "0"),
                ("bulk", "1"),
                ("bulk", "2"),
            ]
            await store.adelete(("bulk", "0"), "k0")
            assert await store.aget(("bulk", "0"), "k0") is None
            hits = await store.asearch(("bulk", "1"), filter={"i": {"$lt": 10}})
            assert sorted(h.value["i"] for h in hits) == [1, 4, 7]
            # the sync methods work from other threads, not on the loop's own
            with ThreadPoolExecutor(max_workers=2) as pool:
                got = await asyncio.wrap_future(pool.submit(store.get, ("bulk", "2"), "k2"))
            assert got is not None and got.value == {"i": 2}
            with pytest.raises(asyncio.InvalidStateError):
                store.get(("bulk", "2"), "k2")

    off_the_main_loop(lambda: asyncio.run(main()))
