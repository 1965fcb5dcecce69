"""Ingest and search through HTTP against the in-process path, side by side in one run.

    .venv/bin/python -m benchmarks.ingest_http              # the full run (minutes)
    .venv/bin/python -m benchmarks.ingest_http --tiny       # seconds: a smoke test
    .venv/bin/python -m benchmarks.ingest_http --profile    # also: where the face's time goes

The app runs under gunicorn (``memory/gunicorn_conf.py``, one worker process, as
``mcp_overhead``); this process is both the in-process caller and the HTTP client (one
keep-alive connection, ``http.client``). The same workload goes both ways, interleaved turn
by turn (the order flipped every round), so a slow moment of the shared machine hits both:

1. Bulk triples: turns of ``--facts-per-turn`` facts. In process: ``run_create`` +
   ``run_execute`` (as ``benchmarks.ingest_throughput``); through HTTP: ``POST memories``
   with ``infer: triples, wait: true``, the caller's token and its access, the answer read
   and parsed. Facts/s per path (facts over the summed seconds of its turns); goal:
   HTTP ≥ 0.85 × in process, and ≥ 5,000 facts/s on a quiet machine.
2. Small turns of 20 facts: ms per turn, p50/p95 per path and the median of the paired
   differences (HTTP − in process, one right after the other). Goal: HTTP ≤ 30 ms p50.
3. ``POST search`` (bm25 over facts) against the ``search`` selector on the same queries:
   p50 per path and the median paired difference.

The request body is encoded before the clock starts (the in-process path is handed the
dict); the answer is read with orjson inside it (the standard library's ``json.loads`` over
the same bulk answers is timed apart and reported). gunicorn's own clock of the same
requests (``/metrics``) splits HTTP − in process into the face inside Django and what lies
outside it (gunicorn, sockets, the client). The duplicate re-estimates the runs queue are run
after each turn, off the clock, as ``ingest_throughput`` does. ``--profile`` then sends
bulk and small turns through Django's WSGI handler in this process (the code gunicorn
calls), the run's services left out, and prints the face's wall and CPU time per request,
its SQL statements and a cProfile of its CPU time.
"""

from __future__ import annotations

import argparse
import cProfile
import http.client
import io
import json
import logging
import os
import pstats
import random
import secrets
import signal
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from benchmarks.ingest_throughput import turn
from benchmarks.mcp_overhead import start_gunicorn
from benchmarks.search_common import (
    bench_database,
    machine_line,
    markdown_table,
    percentile,
    queued_refits_run,
)

DATABASE = "md_bench_ingest_http"
SLUG = "bench-http"
RATIO_GOAL = 0.85
BULK_GOAL_FACTS_PER_S = 5_000
SMALL_GOAL_MS = 30.0
SMALL_FACTS = 20
WRITTEN = ("succeeded", "succeeded_with_warnings")  # a run's outcomes that wrote its facts
METRICS = secrets.token_urlsafe(24)  # gunicorn's /metrics answers this bearer


class Caller:
    """The two ways to write and search: in process with the token's access, and through
    HTTP with the token itself."""

    def __init__(self, port: int, raw_token: str) -> None:
        from django.contrib.auth import get_user_model

        from memory.domain.access import context_access_resolve
        from memory.services.tokens import token_authenticate

        token = token_authenticate(raw_token, purpose="api")
        assert token is not None
        user = get_user_model().objects.get(pk=token.user_id)
        self.access = context_access_resolve(user=user, slug=SLUG, token=token)
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        self.headers = {
            "Authorization": f"Token {raw_token}",
            "Content-Type": "application/json",
        }

    def post(self, path: str, body: bytes) -> tuple[int, Any, bytes]:
        """Status, the answer read with orjson, and the answer as sent."""
        self.connection.request("POST", f"/api/v1/contexts/{SLUG}/{path}", body, self.headers)
        response = self.connection.getresponse()
        raw = response.read()
        return response.status, orjson.loads(raw), raw

    def server_seconds(self, endpoint: str) -> tuple[float, int]:
        """gunicorn's own clock: the summed seconds and the count of 2xx ``POST``s to
        ``endpoint`` (Django's handler, from the first middleware to the rendered answer)."""
        self.connection.request("GET", "/metrics", headers={"Authorization": f"Bearer {METRICS}"})
        response = self.connection.getresponse()
        text = response.read().decode()
        assert response.status == 200, text[:300]
        labels = f'endpoint="{endpoint}",method="POST",status="2xx"'
        found = {
            name: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            for name in ("sum", "count")
            if line.startswith(f"memory_request_seconds_{name}{{") and labels in line
        }
        return found.get("sum", 0.0), int(found.get("count", 0))

    def ingest_http(
        self, triples: dict[str, Any], scope: str
    ) -> tuple[float, int, int, float, float]:
        """Seconds, facts written and the answer's bytes of one ``POST memories``, the
        seconds the standard library's ``json.loads`` takes over the same answer, and the
        run's own clock (ms)."""
        body = json.dumps(
            {"scope": scope, "infer": "triples", "triples": triples, "wait": True}
        ).encode()
        started = time.perf_counter()
        status, answer, raw = self.post("memories", body)
        seconds = time.perf_counter() - started
        assert status == 200, answer
        summary = answer["run"]["summary"]
        # Constraint warnings (standard predicates on untyped entities) still write.
        assert answer["run"]["outcome"] in WRITTEN, answer["run"]["error"]
        began = time.perf_counter()
        json.loads(raw)
        stdlib = time.perf_counter() - began
        written = summary["facts_created"] + summary["facts_reobserved"]
        return seconds, written, len(raw), stdlib, answer["run"]["timings"]["total_ms"]

    def ingest_in_process(self, triples: dict[str, Any], scope: str) -> tuple[float, int, float]:
        from memory.services.ingest.run import run_create, run_execute

        started = time.perf_counter()
        run = run_create(access=self.access, text="", scope=scope, infer="triples", triples=triples)
        run = run_execute(run_id=run.pk)
        seconds = time.perf_counter() - started
        assert run.outcome in WRITTEN, run.error
        written = run.summary["facts_created"] + run.summary["facts_reobserved"]
        return seconds, written, run.timings["total_ms"]

    def search_http(self, query: str) -> float:
        body = json.dumps({"query": query, "mode": "bm25", "target": "facts", "k": 10}).encode()
        started = time.perf_counter()
        status, answer, _ = self.post("search", body)
        seconds = time.perf_counter() - started
        assert status == 200 and answer["results"], answer
        return seconds

    def search_in_process(self, query: str) -> float:
        from memory.selectors.search import search

        started = time.perf_counter()
        found = search(access=self.access, query=query, mode="bm25", k=10, target="facts")
        seconds = time.perf_counter() - started
        assert found.results
        return seconds


def seed_token() -> str:
    """A context, an agent with write grants and its API token."""
    from django.contrib.auth import get_user_model

    from memory.models import ContextMembership, Role
    from memory.services.contexts import context_create
    from memory.services.tokens import token_issue

    context = context_create(slug=SLUG, name="HTTP ingest benchmark")
    user = get_user_model().objects.create_user(username="bench-agent")
    ContextMembership.objects.create(
        user=user, context=context, role=Role.CURATOR, grants=["read,write:*"]
    )
    return token_issue(user=user, context=context, grants=["read,write:*"]).raw


def interleaved(
    caller: Caller, turns: list[tuple[dict[str, Any], dict[str, Any]]], scope: str
) -> dict[str, list[float]]:
    """Each pair of same-shaped turns once each way, the order flipped every round; the
    re-estimates the runs queued run after each, off the clock."""
    out: dict[str, list[float]] = {
        "in_process_s": [], "in_process_facts": [], "http_s": [], "http_facts": [], "bytes": [],
        "stdlib_parse_s": [], "in_process_run_ms": [], "http_run_ms": [],
    }  # fmt: skip
    for i, (one, other) in enumerate(turns):

        def local(t: dict[str, Any] = one, n: int = i) -> None:
            seconds, written, run_ms = caller.ingest_in_process(t, f"{scope}/in-process/{n}")
            out["in_process_s"].append(seconds)
            out["in_process_run_ms"].append(run_ms)
            out["in_process_facts"].append(written)

        def remote(t: dict[str, Any] = other, n: int = i) -> None:
            seconds, written, size, stdlib, run_ms = caller.ingest_http(t, f"{scope}/http/{n}")
            out["http_s"].append(seconds)
            out["http_run_ms"].append(run_ms)
            out["http_facts"].append(written)
            out["bytes"].append(size)
            out["stdlib_parse_s"].append(stdlib)

        for step in [local, remote] if i % 2 == 0 else [remote, local]:
            step()
            queued_refits_run()
    return out


def paired_turns(
    rng: random.Random, count: int, facts: int, prefix: str
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [
        (
            turn(rng, facts=facts, prefix=f"{prefix}L{i}"),
            turn(rng, facts=facts, prefix=f"{prefix}H{i}"),
        )
        for i in range(count)
    ]


def where_it_goes(
    caller: Caller,
    endpoint: str,
    before: tuple[float, int],
    local_s: list[float],
    http_s: list[float],
    runs_ms: tuple[list[float], list[float]] = ([], []),
) -> dict[str, float]:
    """Mean ms per call: in process, through HTTP, and gunicorn's own clock of the same
    requests, which splits HTTP − in process into the face inside Django (authentication,
    reading and checking the body, the answer) and what lies outside it (gunicorn, the
    sockets, the client reading the answer). ``runs_ms``: the runs' own clocks (in process,
    in gunicorn), the same work timed where it ran."""
    after = caller.server_seconds(endpoint)
    count = after[1] - before[1]
    server = (after[0] - before[0]) / count * 1000 if count else float("nan")
    local, remote = statistics.fmean(local_s) * 1000, statistics.fmean(http_s) * 1000
    return {
        "in_process_mean_ms": local,
        "http_mean_ms": remote,
        "django_mean_ms": server,
        "face_in_django_ms": server - local,
        "outside_django_ms": remote - server,
        "run_clock_in_process_ms": statistics.fmean(runs_ms[0]) if runs_ms[0] else float("nan"),
        "run_clock_http_ms": statistics.fmean(runs_ms[1]) if runs_ms[1] else float("nan"),
    }  # fmt: skip


def bulk(caller: Caller, args: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    local_rates, http_rates, ratios = [], [], []
    answer_bytes: list[float] = []
    stdlib_ms: list[float] = []
    local_s: list[float] = []
    http_s: list[float] = []
    runs_ms: tuple[list[float], list[float]] = ([], [])
    before = caller.server_seconds("api-memories")
    for rep in range(args.repeat):
        turns = paired_turns(rng, args.turns, args.facts_per_turn, f"B{rep}")
        timed = interleaved(caller, turns, f"bench/bulk/{rep}")
        local = sum(timed["in_process_facts"]) / sum(timed["in_process_s"])
        remote = sum(timed["http_facts"]) / sum(timed["http_s"])
        local_rates.append(local)
        http_rates.append(remote)
        ratios.append(remote / local)
        answer_bytes += timed["bytes"]
        stdlib_ms += [x * 1000 for x in timed["stdlib_parse_s"]]
        local_s += timed["in_process_s"]
        runs_ms[0].extend(timed["in_process_run_ms"])
        runs_ms[1].extend(timed["http_run_ms"])
        http_s += timed["http_s"]
    return {
        "turns": args.turns,
        "facts_per_turn": args.facts_per_turn,
        "repeat": args.repeat,
        "in_process_facts_per_s": statistics.median(local_rates),
        "http_facts_per_s": statistics.median(http_rates),
        "ratio": statistics.median(ratios),
        "answer_kb": statistics.median(answer_bytes) / 1024,
        # Not in the figures above (the client reads with orjson): the standard library's
        # json.loads over the same answer, per turn.
        "client_stdlib_parse_ms": statistics.median(stdlib_ms),
        "split": where_it_goes(caller, "api-memories", before, local_s, http_s, runs_ms),
        "runs": {"in_process": local_rates, "http": http_rates, "ratio": ratios},
    }


def small(caller: Caller, args: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    turns = paired_turns(rng, args.small_turns, SMALL_FACTS, "S")
    before = caller.server_seconds("api-memories")
    timed = interleaved(caller, turns, "bench/small")
    runs_ms = (timed["in_process_run_ms"], timed["http_run_ms"])
    split = where_it_goes(
        caller, "api-memories", before, timed["in_process_s"], timed["http_s"], runs_ms
    )
    local = [s * 1000 for s in timed["in_process_s"]]
    remote = [s * 1000 for s in timed["http_s"]]
    diffs = [r - loc for r, loc in zip(remote, local, strict=True)]
    return {
        "turns": args.small_turns,
        "in_process_ms": {"p50": statistics.median(local), "p95": percentile(local, 0.95)},
        "http_ms": {"p50": statistics.median(remote), "p95": percentile(remote, 0.95)},
        "paired_difference_p50_ms": statistics.median(diffs),
        "answer_kb": statistics.median(timed["bytes"]) / 1024,
        "split": split,
    }


def searches(caller: Caller, args: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    from benchmarks.ingest_throughput import ATTRIBUTES, REGISTERED

    queries = [
        f"{rng.choice(REGISTERED).replace('_', ' ')} {rng.choice(ATTRIBUTES).replace('_', ' ')}"
        for _ in range(args.searches)
    ]
    local: list[float] = []
    remote: list[float] = []
    before = caller.server_seconds("api-search")
    for i, query in enumerate(queries):
        pair = [("local", caller.search_in_process), ("remote", caller.search_http)]
        for name, fn in pair if i % 2 == 0 else reversed(pair):
            (local if name == "local" else remote).append(fn(query) * 1000)
    diffs = [r - loc for r, loc in zip(remote, local, strict=True)]
    split = where_it_goes(
        caller, "api-search", before, [x / 1000 for x in local], [x / 1000 for x in remote]
    )
    return {
        "queries": len(queries),
        "in_process_ms": {"p50": statistics.median(local), "p95": percentile(local, 0.95)},
        "http_ms": {"p50": statistics.median(remote), "p95": percentile(remote, 0.95)},
        "paired_difference_p50_ms": statistics.median(diffs),
        "split": split,
    }


def face_profile(raw_token: str, rng: random.Random, facts: int, requests: int) -> str:
    """``requests`` turns of ``facts`` facts through Django's WSGI handler in this process
    (the code gunicorn calls), the run's services (``run_create``, ``run_execute``) left
    out: the face's wall and CPU time per request, its SQL statements, and a cProfile of
    its CPU time (this thread's clock, so other jobs' use of the cores does not show)."""
    from django.db import connection
    from django.test import Client

    import memory.api.ingest_api as ingest_api
    from memory.services.ingest import run as run_module

    client = Client(HTTP_AUTHORIZATION=f"Token {raw_token}")
    profile = cProfile.Profile(time.thread_time)
    spent = {"wall": 0.0, "cpu": 0.0}
    statements: dict[str, list[float]] = {}
    in_service = [False]

    def left_out(fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(**kwargs: Any) -> Any:
            profile.disable()
            in_service[0] = True
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return fn(**kwargs)
            finally:
                spent["wall"] += time.perf_counter() - wall
                spent["cpu"] += time.thread_time() - cpu
                in_service[0] = False
                profile.enable()

        return call

    def traced(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if in_service[0]:
            return execute(sql, params, many, context)
        began = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            shape = " ".join(sql.split())[:70]
            statements.setdefault(shape, []).append((time.perf_counter() - began) * 1000)

    def post(n: int) -> Any:
        body = json.dumps(
            {"scope": f"bench/profile/{facts}", "infer": "triples", "wait": True,
             "triples": turn(rng, facts=facts, prefix=f"P{facts}R{n}")}
        )  # fmt: skip
        return client.post(
            f"/api/v1/contexts/{SLUG}/memories", body, content_type="application/json"
        )

    post(-1)  # warm: this process's first request through the handler
    originals = (ingest_api.run_create, ingest_api.run_execute)
    ingest_api.run_create = left_out(run_module.run_create)  # type: ignore[assignment]
    ingest_api.run_execute = left_out(run_module.run_execute)  # type: ignore[assignment]
    wall = cpu = 0.0
    size = 0
    try:
        with connection.execute_wrapper(traced):
            for n in range(requests):
                began, began_cpu = time.perf_counter(), time.thread_time()
                profile.enable()
                response = post(n)
                profile.disable()
                wall += time.perf_counter() - began
                cpu += time.thread_time() - began_cpu
                assert response.status_code == 200, response.content[:300]
                size = len(response.content)
                in_service[0] = True  # the worker's re-estimates: not the face's statements
                queued_refits_run()
                in_service[0] = False
    finally:
        ingest_api.run_create, ingest_api.run_execute = originals
    out = io.StringIO()
    out.write(
        f"\nThe face of a {facts}-fact turn, {requests} requests through the WSGI handler "
        f"(answer {size / 1024:.0f} kB): {(wall - spent['wall']) / requests * 1000:.1f} ms wall, "
        f"{(cpu - spent['cpu']) / requests * 1000:.1f} ms CPU per request (unprofiled: less), "
        "the services left out\n"
    )
    rows = [
        [f"`{shape}`", f"{len(ms) / requests:.1f}", f"{sum(ms) / requests:.2f}"]
        for shape, ms in sorted(statements.items(), key=lambda kv: -sum(kv[1]))
    ]
    out.write(markdown_table(["the face's SQL", "per request", "ms per request"], rows) + "\n")
    pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(30)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tiny", action="store_true", help="a smoke test in seconds")
    parser.add_argument("--turns", type=int, default=5, help="bulk turns per path and repeat")
    parser.add_argument("--facts-per-turn", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--small-turns", type=int, default=100)
    parser.add_argument("--searches", type=int, default=100)
    parser.add_argument("--profile", action="store_true", help="profile the face afterwards")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    if args.tiny:
        args.turns, args.facts_per_turn, args.repeat = 2, 200, 1
        args.small_turns, args.searches = 5, 5
    rng = random.Random(args.seed)
    # Each in-process run logs a line; the report is what this command prints.
    logging.getLogger("memory.ingest").setLevel(logging.WARNING)
    report: dict[str, Any] = {"machine": machine_line()}
    with bench_database(DATABASE) as url, tempfile.TemporaryDirectory() as logs:
        raw_token = seed_token()
        os.environ["MEMORY_METRICS_TOKEN"] = METRICS  # gunicorn inherits it
        web, port = start_gunicorn(url, Path(logs))
        try:
            caller = Caller(port, raw_token)
            # The worker loads the embedding model in the background as it starts: one
            # vector search waits for it, so its loading is not timed against either path.
            status, answer, _ = caller.post("search", b'{"query": "warm up", "mode": "vector"}')
            assert status == 200, answer
            # Warm-up (not timed): both processes' imports and query plans, and the
            # generator's vocabulary, which a real import also creates only once.
            interleaved(caller, paired_turns(rng, 2, 200, "W"), "bench/warm-up")
            interleaved(caller, paired_turns(rng, 4, SMALL_FACTS, "w"), "bench/warm-up")
            loads = [os.getloadavg()[0]]
            report["bulk"] = bulk(caller, args, rng)
            loads.append(os.getloadavg()[0])
            report["small"] = small(caller, args, rng)
            loads.append(os.getloadavg()[0])
            report["search"] = searches(caller, args, rng)
            loads.append(os.getloadavg()[0])
            report["load_1min"] = loads
            caller.connection.close()
        finally:
            web.send_signal(signal.SIGTERM)
            web.wait(timeout=60)
        profiles = (
            [
                face_profile(raw_token, rng, args.facts_per_turn, 3 if args.tiny else 10),
                face_profile(raw_token, rng, SMALL_FACTS, 5 if args.tiny else 50),
            ]
            if args.profile
            else []
        )
    print(json.dumps(report, indent=1, default=float))
    _print_table(report)
    for text in profiles:
        print(text)


def _print_table(report: dict[str, Any]) -> None:
    b, s, q = report["bulk"], report["small"], report["search"]
    rows = [
        [f"bulk triples ({b['turns']} turns × {b['facts_per_turn']} facts per path, "
         f"{b['repeat']} rounds), facts/s", round(b["in_process_facts_per_s"]),
         round(b["http_facts_per_s"]), f"{b['ratio']:.2f}",
         f"≥ {RATIO_GOAL} and ≥ {BULK_GOAL_FACTS_PER_S:,}: "
         f"{'met' if b['ratio'] >= RATIO_GOAL else 'NOT met'} / "
         f"{'met' if b['http_facts_per_s'] >= BULK_GOAL_FACTS_PER_S else 'NOT met'}"],
        [f"{s['turns']} turns of {SMALL_FACTS} facts, ms p50 (p95)",
         f"{s['in_process_ms']['p50']:.1f} ({s['in_process_ms']['p95']:.1f})",
         f"{s['http_ms']['p50']:.1f} ({s['http_ms']['p95']:.1f})",
         f"+{s['paired_difference_p50_ms']:.1f} ms paired",
         f"≤ {SMALL_GOAL_MS:.0f} ms: "
         f"{'met' if s['http_ms']['p50'] <= SMALL_GOAL_MS else 'NOT met'}"],
        [f"{q['queries']} bm25 fact searches, ms p50 (p95)",
         f"{q['in_process_ms']['p50']:.1f} ({q['in_process_ms']['p95']:.1f})",
         f"{q['http_ms']['p50']:.1f} ({q['http_ms']['p95']:.1f})",
         f"+{q['paired_difference_p50_ms']:.1f} ms paired", "—"],
    ]  # fmt: skip
    print(markdown_table(["measure", "in process", "HTTP", "HTTP vs in process", "goal"], rows))
    print("\nWhere HTTP − in process goes (means, ms per call; gunicorn's clock from /metrics)")
    split_rows = [
        [name, f"{p['split']['in_process_mean_ms']:.1f}", f"{p['split']['http_mean_ms']:.1f}",
         f"{p['split']['django_mean_ms']:.1f}", f"{p['split']['face_in_django_ms']:.1f}",
         f"{p['split']['outside_django_ms']:.1f}",
         f"{p['split']['run_clock_in_process_ms']:.1f} / {p['split']['run_clock_http_ms']:.1f}"]
        for name, p in (("bulk turn", b), ("20-fact turn", s), ("bm25 search", q))
    ]  # fmt: skip
    header = ["call", "in process", "HTTP", "Django's handler", "face in Django", "outside Django",
              "run's clock: in process / in gunicorn"]  # fmt: skip
    print(markdown_table(header, split_rows))
    loads = report["load_1min"]
    print(f"load average (1 min) during the run: {min(loads):.2f} to {max(loads):.2f}")
    print(
        f"answer sizes: bulk {b['answer_kb']:.0f} kB, small {s['answer_kb']:.1f} kB; the "
        f"standard library's json.loads would add {b['client_stdlib_parse_ms']:.1f} ms per bulk "
        "answer (the client reads with orjson)"
    )


if __name__ == "__main__":
    main()
    # The gunicorn worker is stopped and the database dropped by now; a thread left by an
    # in-process embedder must not keep the interpreter alive.
    os._exit(0)
