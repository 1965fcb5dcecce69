"""Read replicas on one machine: routing cost, read-your-writes, a replica killed under load.

    .venv/bin/python -m benchmarks.replicas                # 8 clients, 200 searches each
    .venv/bin/python -m benchmarks.replicas --tiny         # 2 clients, a smoke test

Starts two hot standbys of the embedded primary (``pg_basebackup -R``, as ``manage.py
embedded_replica`` does) in ``var/bench-replicas/``, makes a throwaway database (see
search_common) with a context of SciFact-like short documents, embedded, and drives the
whole Django stack in-process (``django.test.Client``: middleware, router, views), one
thread per client, each with its own database connections:

1. **Hybrid search with 0, 1 and 2 replicas**: ``--clients`` threads each send
   ``--searches`` ``POST search`` (hybrid, chunks); p50/p95 per setting. Everything runs
   on one host, so replicas add no capacity: this shows the routing works, not a
   speed-up. The **routing cost** is measured on its own: the middleware's decision
   (is the request read-only, the client's pinned WAL position, a usable replica) timed
   over 2,000 requests, p50.
2. **Write, then read at once**: ``--loops`` times one client writes a fact and reads it
   back by id; a 404 is a stale read. Also how many of those reads a replica served.
3. **A replica killed under load**: the clients search for ``--kill-seconds``; a third of
   the way in, every process of one standby gets SIGKILL. Errors are any non-200 answer.

Prints JSON, then a Markdown table; exits 1 if any read was stale or any request failed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.search_common import (
    ROOT,
    _server_url,
    bench_database,
    machine_line,
    markdown_table,
    percentile,
)

DB_NAME = "bench_replicas"
STANDBYS = ("bench-1", "bench-2")
WORDS = [
    "protein",
    "cell",
    "gene",
    "cancer",
    "immune",
    "response",
    "receptor",
    "mutation",
    "therapy",
    "infection",
    "tumour",
    "signal",
    "pathway",
    "brain",
    "neuron",
    "memory",
    "sleep",
    "diet",
    "insulin",
    "vitamin",
    "bone",
    "blood",
    "vessel",
    "heart",
    "lung",
    "liver",
    "kidney",
    "virus",
    "bacteria",
    "antibody",
    "vaccine",
    "enzyme",
    "hormone",
    "stress",
    "exercise",
]


def _var() -> Path:
    return Path(os.environ.get("MEMORY_VAR_DIR", str(ROOT / "var")))


def _standbys(primary_url: str) -> list[str]:
    """Start the standbys and return their URLs for the benchmark's database."""
    from memory.infra.embedded_replicas import replica_start, replica_stop

    urls = []
    for name in STANDBYS:
        folder = _var() / "bench-replicas" / name
        replica_stop(folder, remove=True)
        url = replica_start(_var() / "pgdata", folder)
        urls.append(url.replace("/memorydesk?", f"/{DB_NAME}?"))
    return urls


def _seed(documents: int) -> tuple[str, str]:
    """A context with short documents (embedded now) and an agent token: (slug, token)."""
    from django.contrib.auth import get_user_model

    from memory.domain.access import system_access
    from memory.models import ContextMembership, Role
    from memory.services.contexts import context_create
    from memory.services.ingest.documents import document_create
    from memory.services.tokens import token_issue
    from memory.services.vectors import embeddings_drain

    context = context_create(slug="bench", name="Replicas benchmark")
    access = system_access(context)
    rng = random.Random(7)
    for number in range(documents):
        text = " ".join(rng.choice(WORDS) for _ in range(60))
        document_create(
            access=access, title=f"note {number}", text=text, scope="lab", embed_later=True
        )
    embeddings_drain()
    user = get_user_model().objects.create_user(username="bench-agent", password=None)
    ContextMembership.objects.create(
        user=user, context=context, role=Role.ADMIN, grants=["read,write:*"]
    )
    return context.slug, token_issue(user=user, context=context, grants=["read,write:*"]).raw


def _client(token: str) -> Any:
    from django.test import Client

    return Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Token {token}")


def _wait_replayed(aliases: list[str], timeout: float = 300.0) -> None:
    from django.db import connections

    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_lsn()::text")
        position = cursor.fetchone()[0]
    deadline = time.monotonic() + timeout
    for alias in aliases:
        while True:
            try:
                with connections[alias].cursor() as cursor:
                    cursor.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [position])
                    if cursor.fetchone()[0]:
                        break
            except Exception:
                connections[alias].close()
            if time.monotonic() > deadline:
                raise SystemExit(f"{alias} did not replay the seed in {timeout:.0f} s")
            time.sleep(0.1)


def _search_clients(
    base: str, token: str, *, clients: int, searches: int = 0, seconds: float = 0.0
) -> tuple[list[float], Counter[int], list[str]]:
    """Closed-loop hybrid searches; latencies (ms), answers by status, errors."""
    from django.db import connections

    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    errors: list[str] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds if seconds else None

    def run(seed: int) -> None:
        rng = random.Random(seed)
        client = _client(token)
        done = 0
        try:
            while (stop_at and time.monotonic() < stop_at) or (not stop_at and done < searches):
                query = " ".join(rng.sample(WORDS, 3))
                started = time.perf_counter()
                try:
                    response = client.post(
                        f"{base}/search",
                        {"query": query, "mode": "hybrid", "target": "chunks", "k": 10},
                        content_type="application/json",
                    )
                    status = response.status_code
                except Exception as exc:  # counted, never raised
                    status = 0
                    with lock:
                        errors.append(repr(exc)[:200])
                elapsed = (time.perf_counter() - started) * 1000
                with lock:
                    latencies.append(elapsed)
                    statuses[status] += 1
                done += 1
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies, statuses, errors


def _routing_cost(base: str, token: str, rounds: int = 2000) -> dict[str, float]:
    """The middleware's decision alone, for a read-only request."""
    from django.test import RequestFactory

    from memory.infra.replicas import choose_replica, pinned_position, reads_only

    factory = RequestFactory()
    request = factory.post(
        f"{base}/search",
        data=json.dumps({"query": "gene"}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {token}",
    )
    timings = []
    for _ in range(rounds):
        started = time.perf_counter()
        assert reads_only(request)
        choose_replica(replayed=pinned_position(request))
        timings.append((time.perf_counter() - started) * 1000)
    return {"p50_ms": percentile(timings, 0.5), "p95_ms": percentile(timings, 0.95)}


def _write_then_read(base: str, token: str, loops: int) -> dict[str, Any]:
    from django.db import connections

    served: Counter[str] = Counter()

    def recorder(alias: str) -> Any:
        def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            if sql.lstrip().upper().startswith("SELECT") and '"memory_fact"' in sql:
                served[alias] += 1
            return execute(sql, params, many, context)

        return record

    client = _client(token)
    stale = failed = 0
    wrappers = [connections[alias].execute_wrapper(recorder(alias)) for alias in connections]
    for wrapper in wrappers:
        wrapper.__enter__()
    try:
        for number in range(loops):
            written = client.post(
                f"{base}/facts",
                {
                    "subject": {"name": f"Writer {number}", "type": "person"},
                    "predicate": "works_at",
                    "object": {"name": "Lab", "type": "organisation"},
                    "scope": "lab",
                },
                content_type="application/json",
            )
            if written.status_code not in (200, 201):
                failed += 1
                continue
            fact_id = written.json()["fact"]["id"]
            read = client.get(f"{base}/facts/{fact_id}")
            if read.status_code == 404:
                stale += 1
            elif read.status_code != 200:
                failed += 1
    finally:
        for wrapper in reversed(wrappers):
            wrapper.__exit__(None, None, None)
    return {"loops": loops, "stale": stale, "failed": failed, "fact_reads_by": dict(served)}


def _kill(folder: Path) -> int:
    """SIGKILL every process of the standby in ``folder`` (a machine lost)."""
    import psutil

    found = {
        process
        for process in psutil.process_iter(["name", "cwd"])
        if process.info["name"] == "postgres" and process.info["cwd"] == str(folder)
    }
    for process in list(found):
        with contextlib.suppress(psutil.NoSuchProcess):
            found.update(process.children(recursive=True))
    killed = 0
    for process in found:
        with contextlib.suppress(psutil.NoSuchProcess):  # a child that left with its parent
            process.kill()
            killed += 1
    return killed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--searches", type=int, default=200, help="per client and setting")
    parser.add_argument("--documents", type=int, default=300)
    parser.add_argument("--loops", type=int, default=1000)
    parser.add_argument("--kill-seconds", type=float, default=30.0)
    parser.add_argument("--tiny", action="store_true")
    args = parser.parse_args()
    if args.tiny:
        args.clients, args.searches, args.documents, args.loops = 2, 10, 40, 50
        args.kill_seconds = 6.0
    sys.path.insert(0, str(ROOT))
    _server_url()  # start (and hold) the embedded primary
    urls = _standbys(_server_url())
    os.environ["DATABASE_REPLICA_URLS"] = ",".join(urls)
    os.environ["MEMORY_API_RATE_USER"] = "100000000/min"
    report: dict[str, Any] = {"machine": machine_line(), "args": vars(args)}
    try:
        with bench_database(DB_NAME):
            from django.conf import settings

            from memory.infra.replicas import forget_replica_health

            aliases = list(settings.MEMORY_REPLICA_DATABASES)
            slug, token = _seed(args.documents)
            base = f"/api/v1/contexts/{slug}"
            _wait_replayed(aliases)
            _client(token).post(  # load the embedder before timing
                f"{base}/search", {"query": "gene"}, content_type="application/json"
            )
            settings.ALLOWED_HOSTS = ["testserver"]
            searches: dict[str, Any] = {}
            for count in (0, 1, 2):
                settings.MEMORY_REPLICA_DATABASES = aliases[:count]
                forget_replica_health()
                latencies, statuses, errors = _search_clients(
                    base, token, clients=args.clients, searches=args.searches
                )
                searches[f"{count} replicas"] = {
                    "requests": len(latencies),
                    "p50_ms": percentile(latencies, 0.5),
                    "p95_ms": percentile(latencies, 0.95),
                    "non_200": sum(n for s, n in statuses.items() if s != 200),
                    "errors": errors[:3],
                }
            report["search"] = searches
            report["routing_cost"] = _routing_cost(base, token)
            settings.MEMORY_REPLICA_DATABASES = aliases
            forget_replica_health()
            report["write_then_read"] = _write_then_read(base, token, args.loops)

            killer = threading.Timer(
                args.kill_seconds / 3,
                lambda: report.setdefault(
                    "killed_processes", _kill(_var() / "bench-replicas" / STANDBYS[0])
                ),
            )
            killer.start()
            latencies, statuses, errors = _search_clients(
                base, token, clients=args.clients, seconds=args.kill_seconds
            )
            killer.join()
            report["replica_killed"] = {
                "requests": len(latencies),
                "non_200": sum(n for s, n in statuses.items() if s != 200),
                "errors": errors[:3],
                "p50_ms": percentile(latencies, 0.5),
            }
    finally:
        from memory.infra.embedded_replicas import replica_stop

        for name in STANDBYS:
            replica_stop(_var() / "bench-replicas" / name, remove=True)
    print(json.dumps(report, indent=2, default=str))
    rows = [
        [name, s["requests"], f"{s['p50_ms']:.1f}", f"{s['p95_ms']:.1f}", s["non_200"]]
        for name, s in report["search"].items()
    ]
    print(markdown_table(["hybrid search", "requests", "p50 ms", "p95 ms", "non-200"], rows))
    wtr, kill = report["write_then_read"], report["replica_killed"]
    print(
        f"\nrouting decision p50 {report['routing_cost']['p50_ms']:.3f} ms; write-then-read "
        f"{wtr['loops']} loops, {wtr['stale']} stale, {wtr['failed']} failed; replica killed "
        f"under load: {kill['requests']} requests, {kill['non_200']} not 200"
    )
    bad = wtr["stale"] or wtr["failed"] or kill["non_200"]
    bad = bad or any(s["non_200"] for s in report["search"].values())
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
