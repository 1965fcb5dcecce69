"""MCP against REST: the same `search` and `get_context` calls through both, in one run.

    .venv/bin/python -m benchmarks.mcp_overhead             # 400 documents, 400 calls of each
    .venv/bin/python -m benchmarks.mcp_overhead --tiny      # seconds: a smoke test
    .venv/bin/python -m benchmarks.mcp_overhead --client-mode legacy   # 2025 clients' handshake

The app runs under gunicorn (``memory/gunicorn_conf.py``, one worker process so both
faces share one warm embedder and one connection pool). This process is the client: the
SDK's own MCP client (``mcp.Client`` over streamable HTTP, one session) and a keep-alive
HTTP client for REST (``httpx2``, the SDK's HTTP library, so both pay the same client
stack). Calls are interleaved — for each query: REST search, MCP search, REST context, MCP
context, the order of each pair flipped every round — so a slow moment of the shared
machine hits both faces alike. Wall time per call as the client sees it (request, server,
response parsed). Overhead = MCP p50 − REST p50, and the median of the per-pair
differences (MCP − REST of the same query, one right after the other), which a slow moment
of the machine moves far less; the goal is judged on that median. The load average is
sampled every round. Goal: MCP ≤ REST + 5 ms at p50.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from benchmarks.load_mixed import _free_port, _wait_for
from benchmarks.search_common import (
    ROOT,
    bench_database,
    latency_summary,
    machine_line,
    markdown_table,
    percentile,
)

DATABASE = "md_bench_mcp"
SLUG = "bench-mcp"
SCOPE = "org/bench"
GOAL_MS = 5.0
WORDS = [
    "alpha",
    "atlas",
    "berlin",
    "budget",
    "cloud",
    "contract",
    "database",
    "design",
    "engine",
    "forecast",
    "gateway",
    "hiring",
    "invoice",
    "kernel",
    "ledger",
    "migration",
    "network",
    "onboarding",
    "pipeline",
    "quarterly",
    "release",
    "roadmap",
    "security",
    "storage",
    "supplier",
    "training",
    "upgrade",
    "vendor",
    "warehouse",
    "workflow",
]
PEOPLE = ["Alex Rivera", "Maria Chen", "Priya Patel", "Jon Smith", "Dana Lee", "Hannah Ortiz"]
PROJECTS = ["Phoenix", "Hammock", "Nightjar", "Atlas", "Orion", "Juniper"]


def seed(*, documents: int, rng: random.Random) -> str:
    """A context with ``documents`` short documents, people, projects and facts; returns a
    token with every grant."""
    from django.contrib.auth import get_user_model

    from memory.domain.access import system_access
    from memory.models import ContextMembership, Role
    from memory.services.contexts import context_create
    from memory.services.entities.writes import entity_upsert
    from memory.services.facts.write import fact_write
    from memory.services.ingest.documents import document_create
    from memory.services.tokens import token_issue
    from memory.services.vectors import embeddings_drain

    context = context_create(slug=SLUG, name="MCP benchmark")
    access = system_access(context)
    people = [
        entity_upsert(access=access, name=n, type="person", scope=SCOPE).entity for n in PEOPLE
    ]
    projects = [
        entity_upsert(access=access, name=f"Project {n}", type="project", scope=SCOPE).entity
        for n in PROJECTS
    ]
    for person in people:
        for project in rng.sample(projects, 3):
            fact_write(access=access, subject=person, predicate="works_on", object=project)
        fact_write(access=access, subject=person, predicate="current_title", value="Engineer")
        fact_write(access=access, subject=person, predicate="located_in", value="Berlin")
    for i in range(documents):
        who, what = rng.choice(PEOPLE), rng.choice(PROJECTS)
        text = " ".join(
            f"{who} discussed the {' '.join(rng.sample(WORDS, 4))} of Project {what}."
            for _ in range(4)
        )
        document_create(access=access, title=f"Note {i}", text=text, scope=SCOPE, embed_later=True)
    embeddings_drain(context=context)  # every vector in a few batched model calls
    user = get_user_model().objects.create_user(username="bench-agent")
    ContextMembership.objects.create(user=user, context=context, role=Role.VIEWER)
    return token_issue(user=user, context=context, grants=["read,write:*"]).raw


def queries(count: int, rng: random.Random) -> list[str]:
    return [
        f"{rng.choice(PEOPLE).split()[0]} {' '.join(rng.sample(WORDS, 2))}" for _ in range(count)
    ]


def start_gunicorn(database_url: str, logs: Path) -> tuple[subprocess.Popen[bytes], int]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "memory.settings",
        "DATABASE_URL": database_url,
        "DEBUG": "0",
        "MEMORY_HTTPS": "0",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1",
        "MEMORY_API_RATE_USER": "1000000/min",
    }
    port = _free_port()
    command = [sys.executable, "-m", "gunicorn", "-c", "python:memory.gunicorn_conf"]
    command += ["--bind", f"127.0.0.1:{port}", "--workers", "1"]
    log = logs / "gunicorn.log"
    with log.open("wb") as out:
        web = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    _wait_for(web, log, " ready", 1)
    return web, port


Call = Callable[[], Awaitable[Any]]


async def measure(
    port: int, token: str, texts: list[str], warmup: int, *, client_mode: str, loads: list[float]
) -> dict[str, list[float]]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp_types import TextContent

    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Token {token}"}
    timings: dict[str, list[float]] = {}
    async with (
        httpx2.AsyncClient(base_url=base, headers=headers, timeout=120) as rest,
        httpx2.AsyncClient(headers=headers, timeout=120) as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http), mode=client_mode) as mcp,
    ):

        def rest_call(path: str, body: dict[str, Any]) -> Call:
            async def go() -> Any:
                response = await rest.post(f"/api/v1/contexts/{SLUG}/{path}", json=body)
                response.raise_for_status()
                return response.json()

            return go

        def mcp_call(tool: str, arguments: dict[str, Any]) -> Call:
            async def go() -> Any:
                result = await mcp.call_tool(tool, arguments)
                if result.is_error:
                    content = result.content[0]
                    raise RuntimeError(
                        content.text if isinstance(content, TextContent) else content
                    )
                return result.structured_content

            return go

        for i, query in enumerate(texts):
            loads.append(os.getloadavg()[0])
            search = {"query": query, "mode": "hybrid", "k": 10}
            bm25 = {"query": query, "mode": "bm25", "k": 10}
            context = {"query": query}
            pairs = [
                ("search hybrid", rest_call("search", search), mcp_call("search", search)),
                ("search bm25", rest_call("search", bm25), mcp_call("search", bm25)),
                ("get_context", rest_call("context", context), mcp_call("get_context", context)),
            ]
            for label, via_rest, via_mcp in pairs:
                order = [("REST", via_rest), ("MCP", via_mcp)]
                if i % 2:
                    order.reverse()
                for face, fn in order:
                    started = time.perf_counter()
                    await fn()
                    elapsed = (time.perf_counter() - started) * 1000
                    if i >= warmup:
                        timings.setdefault(f"{label}|{face}", []).append(elapsed)
    return timings


def report(timings: dict[str, list[float]]) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for label in ("search hybrid", "search bm25", "get_context"):
        rest, mcp = timings[f"{label}|REST"], timings[f"{label}|MCP"]
        diffs = [m - r for m, r in zip(mcp, rest, strict=True)]
        paired = percentile(diffs, 0.5)
        rows[label] = {
            "calls": len(rest),
            "rest": latency_summary(rest),
            "mcp": latency_summary(mcp),
            "overhead_p50_ms": latency_summary(mcp)["p50"] - latency_summary(rest)["p50"],
            "paired_difference_p50_ms": paired,
            "paired_difference_p25_p75_ms": [percentile(diffs, 0.25), percentile(diffs, 0.75)],
            "goal_met": paired <= GOAL_MS,
        }
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a smoke test in seconds")
    parser.add_argument("--documents", type=int, default=400)
    parser.add_argument("--calls", type=int, default=400, help="timed calls per face and tool")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--client-mode",
        default="auto",
        choices=["auto", "legacy"],
        help="auto: the SDK's default (2026-07-28 single exchanges); legacy: initialize first",
    )
    args = parser.parse_args()
    if args.tiny:
        args.documents, args.calls = 10, 10
    warmup = 3 if args.tiny else 20
    rng = random.Random(args.seed)
    with bench_database(DATABASE) as url, tempfile.TemporaryDirectory() as logs:
        token = seed(documents=args.documents, rng=rng)
        web, port = start_gunicorn(url, Path(logs))
        try:
            load_before = os.getloadavg()
            loads: list[float] = []
            texts = queries(args.calls + warmup, rng)
            timings = anyio.run(
                functools.partial(
                    measure, port, token, texts, warmup, client_mode=args.client_mode, loads=loads
                )
            )
            load_after = os.getloadavg()
        finally:
            web.send_signal(signal.SIGTERM)
            web.wait(timeout=60)
    rows = report(timings)
    out = {
        "documents": args.documents,
        "calls": args.calls,
        "machine": machine_line(),
        "client_mode": args.client_mode,
        "load_before": load_before,
        "load_after": load_after,
        "load_1min_during": {
            "min": min(loads),
            "median": percentile(loads, 0.5),
            "max": max(loads),
        },
        "results": rows,
    }
    print(json.dumps(out, indent=2))
    table = [
        [
            label,
            r["rest"]["p50"],
            r["rest"]["p95"],
            r["mcp"]["p50"],
            r["mcp"]["p95"],
            r["overhead_p50_ms"],
            r["paired_difference_p50_ms"],
            "yes" if r["goal_met"] else "NO",
        ]
        for label, r in rows.items()
    ]
    header = [
        "call",
        "REST p50 ms",
        "REST p95 ms",
        "MCP p50 ms",
        "MCP p95 ms",
        "MCP − REST p50 ms",
        "median paired difference ms",
        "≤ 5 ms (paired)",
    ]
    print(markdown_table(header, table))
    during = out["load_1min_during"]
    print(
        f"load average (1 min) during the run: {during['min']:.2f} to {during['max']:.2f}, "
        f"median {during['median']:.2f}; client mode {args.client_mode}",
        flush=True,
    )


if __name__ == "__main__":
    main()
    # A worker thread left by the in-process embedder (the seeding's drain) can keep the
    # interpreter from exiting; everything is printed and the database dropped by now.
    sys.stderr.flush()
    os._exit(0)
