"""The items API: the batch endpoint (LangGraph's store ops) and the REST forms."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from memory.models import Context, Item, Role
from memory.search.models import SearchDoc
from memory.services.items.ttl import items_sweep
from tests.api.conftest import assert_error

pytestmark = pytest.mark.django_db


def batch(api: APIClient, base: str, *ops: dict[str, Any]) -> list[Any]:
    response = api.post(f"{base}/items/batch", {"ops": list(ops)}, format="json")
    assert response.status_code == 200, response.content
    results: list[Any] = response.json()["results"]
    return results


def put(namespace: list[str], key: str, value: Any, **extra: Any) -> dict[str, Any]:
    return {"op": "put", "namespace": namespace, "key": key, "value": value, **extra}


def get(namespace: list[str], key: str, **extra: Any) -> dict[str, Any]:
    return {"op": "get", "namespace": namespace, "key": key, **extra}


def search(prefix: list[str], **extra: Any) -> dict[str, Any]:
    return {"op": "search", "namespace_prefix": prefix, **extra}


def test_put_then_get_keeps_the_value_exactly(api: APIClient, base: str) -> None:
    value = {"text": "Alex likes tea", "n": 1.5, "nested": {"a": [1, None, True]}, "": "x"}
    assert batch(api, base, put(["users", "alex"], "k1", value)) == [None]
    (item,) = batch(api, base, get(["users", "alex"], "k1"))
    assert item["value"] == value
    assert item["namespace"] == ["users", "alex"] and item["key"] == "k1"
    assert item["created_at"] == item["updated_at"]


def test_results_come_back_in_the_order_of_the_ops(api: APIClient, base: str) -> None:
    batch(api, base, put(["test", "foo"], "key1", {"data": "value1"}))
    results = batch(
        api,
        base,
        get(["test", "foo"], "key1"),
        put(["test", "bar"], "key2", {"data": "value2"}),
        search(["test"], filter={"data": "value1"}),
        {"op": "list_namespaces"},
        get(["test"], "key3"),
    )
    assert results[0]["value"] == {"data": "value1"}
    assert results[1] is None
    assert [hit["key"] for hit in results[2]] == ["key1"]
    assert results[3] == [["test", "foo"]]  # the put comes after the batch's reads
    assert results[4] is None
    assert batch(api, base, {"op": "list_namespaces"})[0] == [["test", "bar"], ["test", "foo"]]


def test_a_null_value_deletes_and_the_last_put_wins(api: APIClient, base: str) -> None:
    batch(api, base, put(["a"], "k", {"v": 1}), put(["a"], "k", {"v": 2}))
    assert batch(api, base, get(["a"], "k"))[0]["value"] == {"v": 2}
    batch(api, base, put(["a"], "k", None))
    assert batch(api, base, get(["a"], "k")) == [None]
    assert not Item.objects.exists()


def test_labels_may_hold_any_character_and_prefixes_stop_at_labels(
    api: APIClient, base: str
) -> None:
    namespaces = [
        ["foo"],
        ["foo", "child"],
        ["foobar"],
        ["a%b"],
        ["user_1"],
        ["userX1"],
        ["users", "alice\n"],
        ["users", "alice"],
        ["x.y", "a/b"],
    ]
    batch(api, base, *(put(ns, "k", {"v": 1}) for ns in namespaces))

    def found(prefix: list[str]) -> list[list[str]]:
        return sorted(hit["namespace"] for hit in batch(api, base, search(prefix, limit=100))[0])

    assert found(["foo"]) == [["foo"], ["foo", "child"]]
    assert found(["a%b"]) == [["a%b"]]
    assert found(["user_1"]) == [["user_1"]]
    assert found(["users", "alice"]) == [["users", "alice"]]
    assert found(["x.y"]) == [["x.y", "a/b"]]
    assert len(found([])) == len(namespaces)


def test_list_namespaces_matches_labels_with_wildcards(api: APIClient, base: str) -> None:
    for ns in (
        ["uid", "users", "alice"],
        ["uid", "users", "malice"],
        ["uid", "a", "b", "alice"],
        ["users", "alice\n"],
    ):
        batch(api, base, put(ns, "k", {"v": 1}))

    def listed(**op: Any) -> list[list[str]]:
        return batch(api, base, {"op": "list_namespaces", **op})[0]

    suffix = {"match_type": "suffix", "path": ["alice"]}
    assert listed(match_conditions=[suffix]) == [
        ["uid", "a", "b", "alice"],
        ["uid", "users", "alice"],
    ]
    wild = {"match_type": "prefix", "path": ["uid", "*", "alice"]}
    assert listed(match_conditions=[wild]) == [["uid", "users", "alice"]]
    assert listed(max_depth=1) == [["uid"], ["users"]]
    assert listed(limit=1, offset=1) == [["uid", "users", "alice"]]


def test_filters_compare_value_fields(api: APIClient, base: str) -> None:
    docs = {
        "d1": {"color": "red", "score": 4.5},
        "d2": {"color": "red", "score": 3.0},
        "d3": {"color": "green", "score": 4.0},
        "d4": {"color": "blue", "score": 3.5},
    }
    batch(api, base, *(put(["t"], k, v) for k, v in docs.items()))

    def keys(flt: dict[str, Any]) -> list[str]:
        return sorted(hit["key"] for hit in batch(api, base, search(["t"], filter=flt))[0])

    assert keys({"color": "red"}) == ["d1", "d2"]
    assert keys({"score": {"$gt": 3.2}}) == ["d1", "d3", "d4"]
    assert keys({"score": {"$gte": 4.0}, "color": "green"}) == ["d3"]
    assert keys({"color": {"$ne": "red"}}) == ["d3", "d4"]
    assert keys({"score": {"$lt": 3.5}}) == ["d2"]
    assert keys({"score": {"$lte": 3.5, "$eq": 3.5}}) == ["d4"]
    assert keys({"score": {"$gt": "a"}}) == []  # text and numbers do not compare


def test_search_without_a_query_is_newest_first_with_pages(api: APIClient, base: str) -> None:
    for i in range(5):
        batch(api, base, put(["p"], f"k{i}", {"i": i}))
    page = batch(api, base, search(["p"], limit=2, offset=1))[0]
    assert [hit["key"] for hit in page] == ["k3", "k2"]
    assert all(hit["score"] is None for hit in page)


def test_search_with_a_query_ranks_indexed_text_then_the_rest(api: APIClient, base: str) -> None:
    batch(
        api,
        base,
        put(
            ["m"],
            "tea",
            {"text": "Alex drinks green tea every morning", "other": "coffee"},
            index=["text"],
        ),
        put(["m"], "car", {"text": "The red car is parked outside"}, index=["text"]),
        put(["m"], "plain", {"text": "green tea"}, index=False),
    )
    hits = batch(api, base, search(["m"], query="green tea"))[0]
    assert hits[0]["key"] == "tea"
    assert hits[-1]["key"] == "plain" and hits[-1]["score"] is None
    assert hits[0]["score"] > hits[1]["score"] > 0
    # "coffee" is in the value but not under the index path: BM25 does not find it
    coffee = batch(api, base, search(["m"], query="coffee", limit=1))[0]
    assert len(coffee) == 1


def test_overwrites_and_deletes_keep_the_search_index_true(api: APIClient, base: str) -> None:
    def found(query: str) -> list[tuple[str, bool]]:
        hits = batch(api, base, search(["n"], query=query))[0]
        return [(hit["key"], hit["score"] is not None) for hit in hits]

    def documents() -> int:
        return SearchDoc.objects.filter(item__isnull=False).count()

    batch(api, base, put(["n"], "k", {"text": "harbor lights"}, index=["text"]))
    assert found("harbor") == [("k", True)] and documents() == 1
    batch(api, base, put(["n"], "k", {"text": "meadow flowers"}, index=["text"]))
    assert found("harbor") == [("k", True)]  # the vector still ranks it, BM25 no more
    assert batch(api, base, search(["n"], query="harbor"))[0][0]["value"]["text"] == (
        "meadow flowers"
    )
    assert documents() == 1
    batch(api, base, put(["n"], "k", {"text": "meadow flowers"}, index=False))
    assert found("meadow") == [("k", False)] and documents() == 0  # listed, unranked
    batch(api, base, put(["n"], "k", {"text": "river stones"}, index=["text"]))
    assert documents() == 1
    batch(api, base, put(["n"], "k", None))
    assert found("river") == [] and documents() == 0


def test_plain_puts_and_gets_are_one_statement_each(
    api: APIClient, base: str, django_assert_num_queries: Any
) -> None:
    batch(api, base, put(["p"], "k", {"v": 1}, index=False))  # and the token's use stamped
    with django_assert_num_queries(2):  # the token with the caller's access; the puts
        batch(api, base, put(["p"], "k", {"v": 2}, index=False), put(["p"], "j", {}, index=False))
    with django_assert_num_queries(2):  # the token; the items, both in one statement
        found = batch(api, base, get(["p"], "k"), get(["p"], "j"))
    assert [item["value"] for item in found] == [{"v": 2}, {}]


def test_index_paths_reach_into_lists(api: APIClient, base: str) -> None:
    value = {
        "messages": [
            {"role": "user", "content": "my zebra is named Xerxes"},
            {"role": "ai", "content": "noted"},
        ]
    }
    batch(api, base, put(["c"], "k", value, index=["messages[*].content"]))
    assert Item.objects.get().text == "my zebra is named Xerxes\nnoted"


def test_ttl_expired_items_are_never_returned_and_the_sweep_deletes_them(
    api: APIClient, base: str
) -> None:
    batch(api, base, put(["t"], "old", {"v": 1}, ttl=1), put(["t"], "keep", {"v": 2}))
    Item.objects.filter(key="old").update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    assert batch(api, base, get(["t"], "old")) == [None]
    assert [h["key"] for h in batch(api, base, search(["t"]))[0]] == ["keep"]
    assert items_sweep()["deleted"] == 1
    assert list(Item.objects.values_list("key", flat=True)) == ["keep"]


def test_a_read_refreshes_the_ttl_unless_asked_not_to(api: APIClient, base: str) -> None:
    batch(api, base, put(["t"], "k", {"v": 1}, ttl=10))
    soon = timezone.now() + dt.timedelta(minutes=1)
    Item.objects.update(expires_at=soon)
    batch(api, base, get(["t"], "k", refresh_ttl=False))
    assert Item.objects.get().expires_at == soon
    batch(api, base, get(["t"], "k"))
    refreshed = Item.objects.get().expires_at
    assert refreshed is not None and refreshed > soon + dt.timedelta(minutes=8)


def test_grants_decide_which_namespaces_a_token_reads_and_writes(
    context: Context, api: APIClient, base: str, api_client_for: Callable[..., APIClient]
) -> None:
    batch(api, base, put(["org", "other"], "k", {"v": 1}), put(["org", "acme", "x"], "k", {"v": 2}))
    narrow = api_client_for(context, role=Role.VIEWER, grants=["read,write:org/acme/*"])
    assert batch(narrow, base, get(["org", "other"], "k")) == [None]
    assert batch(narrow, base, get(["org", "acme", "x"], "k"))[0]["value"] == {"v": 2}
    assert [h["namespace"] for h in batch(narrow, base, search(["org"]))[0]] == [
        ["org", "acme", "x"]
    ]
    assert batch(narrow, base, {"op": "list_namespaces"})[0] == [["org", "acme", "x"]]
    refused = narrow.post(
        f"{base}/items/batch",
        {"ops": [put(["org", "acme", "y"], "k", {"v": 3}), put(["org", "other"], "k", None)]},
        format="json",
    )
    assert_error(refused, 403, "scope_forbidden")
    assert Item.objects.filter(key="k").count() == 2  # nothing of the batch was written
    reader = api_client_for(context, role=Role.VIEWER, grants=["read:*"])
    assert_error(
        reader.put(f"{base}/items/item?namespace=a&key=k", {"value": {"v": 1}}, format="json"),
        403,
        "scope_forbidden",
    )
    assert_error(reader.delete(f"{base}/items/item?namespace=org&namespace=other&key=k"), 403)


def test_another_context_token_cannot_reach_items(
    make_context: Callable[..., Context], api_client_for: Callable[..., APIClient], base: str
) -> None:
    other = api_client_for(make_context("elsewhere"))
    assert_error(other.post(f"{base}/items/batch", {"ops": []}, format="json"), 404)


@pytest.mark.parametrize(
    ("ops", "code"),
    [
        ("nope", "invalid"),
        ([{"op": "frobnicate"}], "invalid_op"),
        ([put([], "k", {"v": 1})], "invalid_namespace"),
        ([put(["a", ""], "k", {"v": 1})], "invalid_namespace"),
        ([put(["a\x00"], "k", {"v": 1})], "invalid_namespace"),
        ([put(["a"] * 21, "k", {"v": 1})], "invalid_namespace"),
        ([put(["a"], "", {"v": 1})], "invalid_key"),
        ([put(["a"], "k", [1, 2])], "invalid_value"),
        ([put(["a"], "k", {"t": "nul\x00"})], "invalid_value"),
        ([put(["a"], "k", {"v": 1}, ttl=0)], "invalid_ttl"),
        ([put(["a"], "k", {"v": 1}, ttl=True)], "invalid_ttl"),
        ([put(["a"], "k", {"v": 1}, index="text")], "invalid_index"),
        ([put(["a"], "k", {"v": 1}, index=["a..b"])], "invalid_index"),
        ([put(["a"], "k", {"v": 1}, colour="red")], "invalid_op"),
        ([{"op": "put", "namespace": ["a"], "key": "k"}], "invalid_value"),
        ([search(["a"], filter={"x": {"$regex": "a"}})], "invalid_filter"),
        ([search(["a"], limit=0)], "invalid_limit"),
        ([search(["a"], query=5)], "invalid_query"),
        (
            [
                {
                    "op": "list_namespaces",
                    "match_conditions": [{"match_type": "infix", "path": ["a"]}],
                }
            ],
            "invalid_match_conditions",
        ),
        ([{"op": "list_namespaces", "max_depth": 0}], "invalid_max_depth"),
    ],
)
def test_bad_ops_are_refused_and_write_nothing(
    api: APIClient, base: str, ops: Any, code: str
) -> None:
    body = {"ops": [put(["ok"], "k", {"v": 1}), *ops]} if isinstance(ops, list) else {"ops": ops}
    response = api.post(f"{base}/items/batch", body, format="json")
    assert_error(response, 400, code)
    assert not Item.objects.exists()


def test_rest_forms_put_get_list_search_and_delete(api: APIClient, base: str) -> None:
    url = f"{base}/items/item?namespace=users&namespace=a%25b&key=note%2F1"
    response = api.put(url, {"value": {"text": "hello tea"}, "ttl": 5}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["namespace"] == ["users", "a%b"]
    assert response.json()["expires_at"] is not None
    assert api.get(url).json()["value"] == {"text": "hello tea"}
    listed = api.get(f"{base}/items?namespace=users").json()["results"]
    assert [h["key"] for h in listed] == ["note/1"]
    found = api.post(
        f"{base}/items/search", {"namespace_prefix": ["users"], "query": "tea"}, format="json"
    ).json()["results"]
    assert [h["key"] for h in found] == ["note/1"] and found[0]["score"] > 0
    namespaces = api.get(f"{base}/items/namespaces?prefix=users").json()["results"]
    assert namespaces == [["users", "a%b"]]
    assert api.delete(url).status_code == 204
    assert_error(api.get(url), 404, "item_not_found")


@pytest.mark.parametrize(
    ("method", "query", "body", "code"),
    [
        ("put", "key=k", {"value": {"v": 1}}, "invalid_namespace"),
        ("put", "namespace=a", {"value": {"v": 1}}, "invalid_key"),
        ("put", "namespace=a&key=k", {"value": None}, "invalid_value"),
        ("put", "namespace=a&key=k", {"value": {"v": 1}, "extra": 1}, "invalid"),
        ("put", "namespace=a&key=k&key=j", {"value": {"v": 1}}, "invalid_key"),
        ("delete", "namespace=&key=k", None, "invalid_namespace"),
        ("get", "namespace=a&key=k&refresh_ttl=maybe", None, "invalid"),
    ],
)
def test_rest_forms_refuse_bad_input(
    api: APIClient, base: str, method: str, query: str, body: Any, code: str
) -> None:
    call = getattr(api, method)
    response = call(f"{base}/items/item?{query}", body, format="json")
    assert_error(response, 400, code)
    assert not Item.objects.exists()


def test_the_items_api_is_in_the_openapi_schema(openapi: dict[str, Any]) -> None:
    paths = openapi["paths"]
    for path in ("items", "items/batch", "items/item", "items/search", "items/namespaces"):
        assert f"/api/v1/contexts/{{ctx}}/{path}" in paths
    assert "ItemOpRequest" in openapi["components"]["schemas"]


def test_a_store_spends_its_rate_then_waits_for_the_window_to_close(
    api: APIClient, base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.core.cache import cache

    from memory.api.items_api import ItemsRateThrottle

    clock = [1_000_000.0]
    monkeypatch.setitem(ItemsRateThrottle.THROTTLE_RATES, "items", "3/min")
    monkeypatch.setattr(ItemsRateThrottle, "timer", lambda self: clock[0])
    cache.clear()
    ops = {"ops": [get(["a"], "k")]}

    def call() -> Any:
        return api.post(f"{base}/items/batch", ops, format="json")

    for _ in range(3):  # the whole rate at once, as DRF's throttle allowed
        assert call().status_code == 200
        clock[0] += 10
    refused = call()
    assert_error(refused, 429, "throttled")
    assert refused["Retry-After"] == "30"  # the window opened 30 s ago
    clock[0] += 29
    assert_error(call(), 429, "throttled")
    clock[0] += 1
    for _ in range(3):  # a new window, the whole rate again
        assert call().status_code == 200
    assert_error(call(), 429, "throttled")
    cache.clear()
