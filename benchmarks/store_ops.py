"""Store operations: MemoryDeskStore (HTTP to the items API) beside LangGraph's own
PostgresStore, on the same PostgreSQL server, in one run.

    .venv/bin/python -m benchmarks.store_ops                  # 10,000 indexed items, 300 calls
    .venv/bin/python -m benchmarks.store_ops --items 100000   # the goal's scale
    .venv/bin/python -m benchmarks.store_ops --tiny           # seconds: a smoke test
    .venv/bin/python -m benchmarks.store_ops --items 100000 --keep    # keep the database ...
    .venv/bin/python -m benchmarks.store_ops --items 100000 --reuse   # ... measure it again

The indexed items are short memories (8–24 words) cut from ``search_scale``'s topic
corpus (SciFact's vocabulary; without SciFact, six words of a 24-word list), written
through the items service with their embeddings, 1,000 a batch (100k: about 25 minutes
on 2 shared cores, hence ``--keep``); the queries are two words of an item's text.

The app runs under gunicorn (one worker, ``memory/gunicorn_conf.py``); PostgresStore
connects to the same server and database (its own tables beside the app's). Twenty
untimed rounds come first (the server loads its embedder). Calls alternate between
the two stores, so a slow moment of the shared machine hits both. Measured:

- ``get`` and ``put`` of one item, wall time per call (HTTP included for Memory Desk);
  goal p50 ≤ 3× PostgresStore's;
- 1,000 puts in batches of 100 (``batch``): items/s, the median of three rounds; goal
  ≥ 0.5× PostgresStore's;
- ``search`` with a query over the indexed items (Memory Desk's hybrid search; the query
  embedded by the server), p95; goal ≤ 50 ms at 100k items. PostgresStore has no
  embedder here, so its column is its search without a query (a filter).

Puts without an index on both sides (LangGraph's default store has none).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.datasets import dataset_present
from benchmarks.load_mixed import _free_port, _wait_for
from benchmarks.search_common import (
    ROOT,
    bench_database,
    latency_summary,
    machine_line,
    markdown_table,
)
from benchmarks.search_scale_data import _texts, vocabulary

DATABASE = "md_bench_store"
SLUG = "bench-store"
WORDS = [
    "alpha",
    "atlas",
    "berlin",
    "budget",
    "cloud",
    "contract",
    "database",
    "engine",
    "forest",
    "garden",
    "harbor",
    "island",
    "journey",
    "kernel",
    "ledger",
    "meadow",
    "network",
    "orbit",
    "planet",
    "quarry",
    "river",
    "signal",
    "tower",
    "valley",
]


def seed_token() -> str:
    """A token for the benchmark's context and agent (made on first use; a ``--reuse``
    run issues a new token to the agent it finds)."""
    from django.contrib.auth import get_user_model

    from memory.models import Context, ContextMembership, Role
    from memory.services.contexts import context_create
    from memory.services.tokens import token_issue

    context = Context.objects.filter(slug=SLUG).first()
    if context is None:
        context = context_create(slug=SLUG, name="Store benchmark")
    user, made = get_user_model().objects.get_or_create(username="bench-store-agent")
    if made:
        ContextMembership.objects.create(user=user, context=context, role=Role.VIEWER)
    return token_issue(user=user, context=context, grants=["read,write:*"]).raw


def start_gunicorn(database_url: str, logs: Path) -> tuple[subprocess.Popen[bytes], int]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "memory.settings",
        "DATABASE_URL": database_url,
        "DEBUG": "0",
        "MEMORY_HTTPS": "0",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1",
        "MEMORY_API_RATE_ITEMS": "10000000/min",
    }
    port = _free_port()
    command = [sys.executable, "-m", "gunicorn", "-c", "python:memory.gunicorn_conf"]
    command += ["--bind", f"127.0.0.1:{port}", "--workers", "1"]
    log = logs / "gunicorn.log"
    with log.open("wb") as out:
        web = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    _wait_for(web, log, " ready", 1)
    return web, port


def _text(rng: random.Random) -> str:
    return " ".join(rng.sample(WORDS, 6))


MEMORY_WORDS = (8, 24)


def corpus_texts(items: int, seed: int) -> list[str]:
    """The indexed items' texts, the same for a seed: short memories (8–24 words) cut
    from the topic corpus of ``search_scale_data`` (SciFact's vocabulary, words clustered
    by topic the way they are in real collections). Without SciFact (a smoke run), six
    words of ``WORDS``: every posting list then holds a quarter of the items."""
    rng = random.Random(seed)
    if not dataset_present("scifact"):
        return [_text(rng) for _ in range(items)]
    words, p = vocabulary()
    texts = _texts(np.random.default_rng(seed), words, p, items, "topics")
    return [" ".join(text.split()[: rng.randint(*MEMORY_WORDS)]) for text in texts]


def queries_from(texts: list[str], n: int, rng: random.Random) -> list[str]:
    """Two words of an item's text (no stop words), as ``search_scale`` asks."""
    from memory.search.analyzer import STOPWORDS

    found: list[str] = []
    while len(found) < n:
        words = [w.strip(".") for w in rng.choice(texts).split()]
        content = [w for w in words if w and w not in STOPWORDS]
        if len(content) >= 2:
            found.append(" ".join(rng.sample(content, 2)))
    return found


def _timed(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


LOAD_BATCH = 1000
WARM_UP = 20
BULK_ROUNDS = 3


def load_indexed(texts: list[str]) -> float:
    """An indexed item under ``corpus`` per text, written through the items service in
    batches of 1,000 (as the batch endpoint writes them, embeddings included, without
    HTTP); returns seconds. Items already there (a ``--reuse`` run) are kept."""
    from django.db import connection

    from memory.domain.access import system_access
    from memory.models import Context, Item
    from memory.services.items.writes import ItemPut, items_write

    context = Context.objects.get(slug=SLUG)
    access = system_access(context)
    have = Item.objects.filter(context=context, scope__startswith="corpus/").count()
    started = time.perf_counter()
    for start in range(have, len(texts), LOAD_BATCH):
        puts = [
            ItemPut(("corpus", str(i % 50)), f"doc{i}", {"text": texts[i]}, index=["text"])
            for i in range(start, min(start + LOAD_BATCH, len(texts)))
        ]
        items_write(access=access, puts=puts)
        if (start // LOAD_BATCH) % 10 == 9:
            print(f"loaded {start + len(puts):,} items", file=sys.stderr)
    with connection.cursor() as cursor:  # statistics for the planner, as autovacuum would
        cursor.execute("ANALYZE memory_item")
        cursor.execute("ANALYZE search_searchdoc")
        cursor.execute("ANALYZE search_searchposting")
    return time.perf_counter() - started


def measure(
    desk: Any, pg: Any, *, calls: int, queries: list[str], rng: random.Random
) -> dict[str, Any]:
    from langgraph.store.base import PutOp

    stores = {"memorydesk": desk, "postgres": pg}
    timings: dict[str, dict[str, list[float]]] = {
        name: {"get": [], "put": [], "search": []} for name in stores
    }
    for store in stores.values():  # the keys the gets read
        store.batch([PutOp(("bench", "get"), f"k{i}", {"v": i}, index=False) for i in range(100)])
    for i in range(WARM_UP):  # untimed: the server's embedder loads, connections open
        desk.search(("corpus",), query=queries[i % len(queries)], limit=10)
        for store in stores.values():
            store.get(("bench", "get"), f"k{i}")
            store.put(("bench", "put"), f"w{i}", {"n": i}, index=False)
    for i in range(calls):
        order = list(stores.items())
        if i % 2:
            order.reverse()
        for name, store in order:
            key = f"k{rng.randrange(100)}"
            timings[name]["get"].append(_timed(partial(store.get, ("bench", "get"), key)))
            value = {"text": _text(rng), "n": i}
            timings[name]["put"].append(
                _timed(partial(store.put, ("bench", "put"), f"p{i}", value, index=False))
            )
            query = queries[i]
            if name == "memorydesk":
                search = partial(store.search, ("corpus",), query=query, limit=10)
            else:
                search = partial(store.search, ("bench", "get"), filter={"v": 5}, limit=10)
            timings[name]["search"].append(_timed(search))
    rates: dict[str, list[float]] = {name: [] for name in stores}
    for round_ in range(BULK_ROUNDS):  # alternating, each store's median kept
        for name, store in stores.items() if round_ % 2 == 0 else reversed(stores.items()):
            ops = [
                PutOp(("bench", "bulk"), f"b{round_}-{i}", {"text": _text(rng)}, index=False)
                for i in range(1000)
            ]
            started = time.perf_counter()
            for start in range(0, 1000, 100):
                store.batch(ops[start : start + 100])
            rates[name].append(1000 / (time.perf_counter() - started))
    throughput = {name: statistics.median(found) for name, found in rates.items()}
    return {
        "latency_ms": {
            name: {op: latency_summary(ms) for op, ms in ops.items()}
            for name, ops in timings.items()
        },
        "batched_puts_per_s": throughput,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a smoke test in seconds")
    parser.add_argument("--items", type=int, default=10_000, help="indexed items searched")
    parser.add_argument("--calls", type=int, default=300, help="timed calls per operation")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    parser.add_argument(
        "--reuse", action="store_true", help="measure again on a database kept with --keep"
    )
    args = parser.parse_args()
    if args.tiny:
        args.items, args.calls = 200, 10
    rng = random.Random(args.seed)
    from django.db import connection
    from langgraph.store.postgres import PostgresStore
    from memorydesk.langgraph import MemoryDeskStore

    database = DATABASE if not args.tiny else DATABASE + "_tiny"
    with (
        bench_database(database, keep=args.keep or args.reuse, reuse=args.reuse) as url,
        tempfile.TemporaryDirectory() as logs,
    ):
        token = seed_token()
        texts = corpus_texts(args.items, args.seed)
        load_seconds = load_indexed(texts)
        queries = queries_from(texts, args.calls, rng)
        connection.close()  # the server's processes take it from here
        web, port = start_gunicorn(url, Path(logs))
        try:
            with (
                PostgresStore.from_conn_string(url) as pg,
                MemoryDeskStore(url=f"http://127.0.0.1:{port}", token=token, context=SLUG) as desk,
            ):
                pg.setup()
                results = measure(desk, pg, calls=args.calls, queries=queries, rng=rng)
        finally:
            web.send_signal(signal.SIGTERM)
            web.wait(timeout=60)
    lat = results["latency_ms"]
    md, pgs = lat["memorydesk"], lat["postgres"]
    thr = results["batched_puts_per_s"]
    ratios = {
        "get_p50_ratio": md["get"]["p50"] / pgs["get"]["p50"],
        "put_p50_ratio": md["put"]["p50"] / pgs["put"]["p50"],
        "batched_puts_ratio": thr["memorydesk"] / thr["postgres"],
    }
    goals = {
        "get": ratios["get_p50_ratio"] <= 3,
        "put": ratios["put_p50_ratio"] <= 3,
        "batched_puts": ratios["batched_puts_ratio"] >= 0.5,
        "search_p95": md["search"]["p95"] <= 50,
    }
    out = {
        "items": args.items,
        "calls": args.calls,
        "machine": machine_line(),
        "load_seconds": load_seconds,
        **results,
        **ratios,
        "goals_met": goals,
    }
    print(json.dumps(out, indent=2))
    header = ["measure", "Memory Desk", "PostgresStore", "ratio", "goal", "met"]
    rows = [
        [
            "get p50 ms",
            md["get"]["p50"],
            pgs["get"]["p50"],
            ratios["get_p50_ratio"],
            "≤ 3×",
            goals["get"],
        ],
        [
            "put p50 ms",
            md["put"]["p50"],
            pgs["put"]["p50"],
            ratios["put_p50_ratio"],
            "≤ 3×",
            goals["put"],
        ],
        [
            "1,000 puts in batches of 100, puts/s",
            thr["memorydesk"],
            thr["postgres"],
            ratios["batched_puts_ratio"],
            "≥ 0.5×",
            goals["batched_puts"],
        ],
        [
            f"search with a query at {args.items:,} items, p95 ms",
            md["search"]["p95"],
            pgs["search"]["p95"],
            "—",
            "≤ 50 ms",
            goals["search_p95"],
        ],
    ]
    print(markdown_table(header, rows))


if __name__ == "__main__":
    main()
