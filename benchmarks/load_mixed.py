"""Mixed load over HTTP: the app under gunicorn, a task worker, N concurrent clients.

    .venv/bin/python -m benchmarks.load_mixed                 # 16 clients, 5 minutes
    .venv/bin/python -m benchmarks.load_mixed --tiny          # 2 clients, ~10 s: a smoke test

In a throwaway database (see search_common) it seeds a context — SciFact abstracts as
documents (embedded), entities and facts from triples turns (embedded), an agent user with
an API token and a curator with a dashboard login — then starts gunicorn with the
production configuration (``memory/gunicorn_conf.py``, DEBUG off, a free localhost port)
and one ``manage.py db_worker`` (ingest enqueues the new entities' embeddings), and runs
closed-loop traffic: each client thread keeps one keep-alive connection and sends its next
request as soon as the last one answers, picking by weight among

- ``POST memories`` with ``infer: triples, wait: true`` (small turns that reuse seeded
  entities, so concurrent writers meet on the same rows, and add new ones);
- ``POST search`` in bm25 and hybrid mode over chunks, facts and entities;
- ``GET entities`` and ``GET facts`` (filtered half the time);
- the dashboard's overview, entities and search pages, with the curator's session.

Per endpoint: requests, errors (any exception, any non-2xx answer, and an ingest answered
200 whose run did not succeed), req/s and p50/p95 latency as the client saw it. Also the
load average, the CPU the run's own processes used against the machine's, and what the
server recorded (runs by outcome, tasks by status, deadlocks, tracebacks in the logs).
Prints JSON, then a Markdown table; exits 1 if any request failed. Ctrl-C stops the
clients, gunicorn and the worker, and drops the database.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.datasets import dataset, dataset_required
from benchmarks.ingest_throughput import turn
from benchmarks.load_clients import CTX, MIX, PASSWORD, SHARED_SCOPE, Client, Seed, traffic
from benchmarks.search_common import (
    ROOT,
    bench_database,
    machine_line,
    markdown_table,
    percentile,
)

# --- seeding (in this process, through the services) ---------------------------------------


def seed(args: argparse.Namespace, rng: random.Random) -> Seed:
    from django.contrib.auth import get_user_model
    from django_tasks_db.models import DBTaskResult

    from memory.domain.access import system_access
    from memory.models import Chunk, ContextMembership, Entity, Fact, Role, RunOutcome
    from memory.services.contexts import context_create
    from memory.services.ingest.documents import document_create, documents_embed
    from memory.services.ingest.run import run_create, run_execute
    from memory.services.tokens import token_issue
    from memory.services.vectors import vectors_compute

    context = context_create(slug=CTX)
    access = system_access(context)
    with (dataset("scifact") / "corpus.jsonl").open() as lines:
        corpus = [json.loads(line) for _, line in zip(range(args.documents), lines, strict=False)]
    ids = [
        document_create(
            access=access, title=d["title"], text=d["text"], scope=SHARED_SCOPE, embed_later=True
        ).pk
        for d in corpus
    ]
    documents_embed(document_ids=ids)
    for t in range(args.seed_turns):
        triples = turn(rng, facts=args.seed_facts_per_turn, prefix=f"S{t}")
        run = run_create(
            access=access, text="", scope=SHARED_SCOPE, infer="triples", triples=triples
        )
        done = run_execute(run_id=run.pk)  # constraint warnings at most: nothing refused
        written_ok = (RunOutcome.SUCCEEDED, RunOutcome.SUCCEEDED_WITH_WARNINGS)
        assert done.outcome in written_ok and not done.summary["unresolved"], done.error
    entities = list(Entity.objects.filter(context=context).values("id", "name", "type"))
    vectors_compute("entities", [e["id"] for e in entities])
    DBTaskResult.objects.all().delete()  # the same embeddings, queued by the seed runs

    users = get_user_model()
    agent = users.objects.create_user("bench-agent")
    curator = users.objects.create_user("bench-curator", password=PASSWORD)
    for user in (agent, curator):
        ContextMembership.objects.create(
            user=user, context=context, role=Role.CURATOR, grants=["read,write:*"]
        )
    token = token_issue(user=agent, context=context, grants=["read,write:*"]).raw
    with (dataset("scifact") / "queries.jsonl").open() as lines:
        queries = [json.loads(line)["text"] for line in lines]
    counts = {
        "documents": len(ids),
        "chunks": Chunk.objects.filter(context=context).count(),
        "entities": len(entities),
        "facts": Fact.objects.filter(context=context).count(),
    }
    return Seed(token=token, entities=entities, queries=queries, counts=counts)


# --- the server processes -------------------------------------------------------------------


@dataclass
class Servers:
    port: int
    web: subprocess.Popen[bytes]
    worker: subprocess.Popen[bytes]
    logs: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def servers(args: argparse.Namespace, database_url: str, logs: Path) -> Iterator[Servers]:
    """gunicorn (memory/gunicorn_conf.py) and one db_worker; stopped on the way out."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "memory.settings",
        "DATABASE_URL": database_url,
        "DEBUG": "0",
        "MEMORY_HTTPS": "0",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1",
    }
    port = _free_port()
    command = [sys.executable, "-m", "gunicorn", "-c", "python:memory.gunicorn_conf"]
    command += ["--bind", f"127.0.0.1:{port}"]
    if args.web_workers:
        command += ["--workers", str(args.web_workers)]
    if args.web_threads:
        command += ["--threads", str(args.web_threads)]
    processes: list[subprocess.Popen[bytes]] = []

    def start(cmd: list[str], log: str) -> subprocess.Popen[bytes]:
        # A session of their own: Ctrl-C reaches only this process, which stops them in order.
        with (logs / log).open("wb") as out:
            process = subprocess.Popen(
                cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        processes.append(process)
        return process

    try:
        web = start(command, "gunicorn.log")
        worker = start([sys.executable, "manage.py", "db_worker"], "db_worker.log")
        _wait_for(web, logs / "gunicorn.log", " ready", _configured_workers(args))
        _wait_for(worker, logs / "db_worker.log", "Starting worker", 1)
        yield Servers(port=port, web=web, worker=worker, logs=logs)
    finally:
        for process in reversed(processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _configured_workers(args: argparse.Namespace) -> int:
    from memory import gunicorn_conf

    return int(args.web_workers or gunicorn_conf.workers)


def _wait_for(process: subprocess.Popen[bytes], log: Path, line: str, count: int) -> None:
    """Until ``line`` appears ``count`` times in the log. gunicorn: every worker process
    has loaded the app and the embedder (otherwise the first would accept every keep-alive
    connection while the others boot); db_worker: it polls the queue."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{log.stem} exited ({process.returncode}):\n{_tail(log)}")
        if log.read_text(errors="replace").count(line) >= count:
            return
        time.sleep(0.5)
    raise RuntimeError(f"{log.stem} not ready after 300 s:\n{_tail(log)}")


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:]


# --- what the machine and the server say ----------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK")


def _machine_cpu() -> tuple[float, float, float]:
    """Busy and total CPU seconds of the whole machine since boot (/proc/stat), and when."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return (sum(values[:8]) - idle) / _TICK, sum(values[:8]) / _TICK, time.monotonic()


def _process_cpu(pids: set[int]) -> dict[int, float]:
    """CPU seconds (user + system) of each process still alive."""
    seconds = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        seconds[pid] = (int(fields[11]) + int(fields[12])) / _TICK
    return seconds


def _our_pids(servers: Servers, database: str) -> set[int]:
    """This process, gunicorn and its workers, the task worker, and the database backends
    serving the benchmark database."""
    from django.db import connection

    pids = {os.getpid(), servers.web.pid, servers.worker.pid}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == servers.web.pid:
                pids.add(int(entry.name))
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", [database])
        pids |= {row[0] for row in cursor.fetchall()}
    return pids


def server_side(database: str, logs: Path) -> dict[str, Any]:
    from django.db import connection
    from django.db.models import Count
    from django_tasks_db.models import DBTaskResult

    from memory.models import Run

    runs = dict(
        Run.objects.filter(created_by__username="bench-agent")
        .values_list("outcome")
        .annotate(n=Count("id"))
    )
    tasks = dict(DBTaskResult.objects.values_list("status").annotate(n=Count("id")))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT deadlocks, conflicts FROM pg_stat_database WHERE datname = %s", [database]
        )
        deadlocks, conflicts = cursor.fetchone() or (0, 0)
    web_log = (logs / "gunicorn.log").read_text(errors="replace")
    worker_log = (logs / "db_worker.log").read_text(errors="replace")
    return {
        "runs": runs,
        "tasks": tasks,
        "deadlocks": deadlocks,
        "conflicts": conflicts,
        "tracebacks_web": web_log.count("Traceback"),
        "worker_timeouts_web": web_log.count("WORKER TIMEOUT"),
        "tracebacks_worker": worker_log.count("Traceback"),
        "exceptions": dict(Counter(EXCEPTION.findall(web_log + worker_log)).most_common(10)),
    }


# The last line of a traceback: "django.core.exceptions.FieldError: Cannot compute …".
EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Deadlock\w*)\b.{0,200})", re.M)


# --- main -----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tiny", action="store_true", help="2 clients for ~10 s, for CI")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of traffic")
    parser.add_argument("--documents", type=int, default=1_000, help="SciFact abstracts")
    parser.add_argument("--seed-turns", type=int, default=10)
    parser.add_argument("--seed-facts-per-turn", type=int, default=1_000)
    parser.add_argument("--web-workers", type=int, help="override gunicorn_conf's processes")
    parser.add_argument("--web-threads", type=int, help="override gunicorn_conf's threads")
    parser.add_argument("--keep", action="store_true", help="keep the database and the logs")
    args = parser.parse_args()
    dataset_required("scifact", tiny=args.tiny)
    if args.tiny:
        args.clients, args.duration = 2, 10.0
        args.documents, args.seed_turns, args.seed_facts_per_turn = 50, 2, 100
    # Ctrl-C (even when started in the background, where SIGINT is ignored) and a plain
    # `kill` clean up too: the exceptions unwind the with-blocks of ``run``.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    logs = Path(tempfile.mkdtemp(prefix="md_bench_load_"))
    try:
        report = run(args, logs)
    except BaseException:
        print(f"server logs kept in {logs}", file=sys.stderr)
        raise
    print(json.dumps(report, indent=1, default=float))
    _print_table(report)
    if args.keep or report["errors"]:
        print(f"\nserver logs kept in {logs}")
    else:
        for log in logs.iterdir():
            log.unlink()
        logs.rmdir()
    sys.exit(1 if report["errors"] else 0)


def run(args: argparse.Namespace, logs: Path) -> dict[str, Any]:
    """Seed, start the servers, send the traffic; the report."""
    database = "md_bench_load"
    report: dict[str, Any] = {
        "machine": machine_line(),
        "command": " ".join(["python -m benchmarks.load_mixed", *sys.argv[1:]]),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "clients": args.clients,
        "load_average": {"before_seeding": os.getloadavg()},
    }
    with bench_database(database, keep=args.keep) as url:
        started = time.monotonic()
        data = seed(args, random.Random(7))
        report["seed"] = {**data.counts, "seconds": time.monotonic() - started}
        started = time.monotonic()
        with servers(args, url, logs) as running:
            report["server"] = _server_line(args, time.monotonic() - started)
            report["load_average"]["traffic_start"] = os.getloadavg()
            pids = _our_pids(running, database)
            cpu_before, machine_before = _process_cpu(pids), _machine_cpu()
            clients, elapsed = traffic(args, running.port, data)
            machine_after = _machine_cpu()
            cpu_after = _process_cpu(pids | _our_pids(running, database))
            report["load_average"]["traffic_end"] = os.getloadavg()
            processes = {"gunicorn": running.web, "db_worker": running.worker}
            exited = [name for name, p in processes.items() if p.poll() is not None]
        report["server_side"] = {**server_side(database, logs), "exited_early": exited}
    report["duration_s"] = elapsed
    window = machine_after[2] - machine_before[2]
    machine_busy = (machine_after[0] - machine_before[0]) / window
    ours = (sum(cpu_after.values()) - sum(cpu_before.get(p, 0.0) for p in cpu_after)) / window
    report["cpu_cores_used"] = {
        "machine": machine_busy,
        "this_benchmark": ours,
        "everything_else": max(0.0, machine_busy - ours),
    }
    report["endpoints"] = _endpoints(clients, elapsed)
    report["errors"] = report["endpoints"]["all"]["errors"] + len(exited)
    return report


def _server_line(args: argparse.Namespace, start_seconds: float) -> dict[str, Any]:
    from memory import gunicorn_conf

    threads = args.web_threads or gunicorn_conf.threads
    return {
        "gunicorn": f"{gunicorn_conf.worker_class}, {_configured_workers(args)} processes × "
        f"{threads} threads",
        "task_workers": 1,
        "start_seconds": start_seconds,
    }


def _endpoints(clients: list[Client], elapsed: float) -> dict[str, dict[str, Any]]:
    merged: dict[str, dict[str, Any]] = {}
    for label in [*MIX, "all"]:
        parts = [c.stats[label] for c in clients] if label != "all" else [
            s for c in clients for s in c.stats.values()
        ]  # fmt: skip
        ms = [v for p in parts for v in p.latencies_ms]
        statuses: Counter[str] = sum((p.statuses for p in parts), Counter())
        merged[label] = {
            "requests": len(ms),
            "errors": sum(p.errors for p in parts),
            "per_s": len(ms) / elapsed,
            "p50_ms": percentile(ms, 0.5),
            "p95_ms": percentile(ms, 0.95),
            "statuses": dict(statuses),
            "error_samples": [s for p in parts for s in p.samples][:5],
        }
    return merged


def _print_table(report: dict[str, Any]) -> None:
    rows = [
        [label, e["requests"], e["errors"], e["per_s"], e["p50_ms"], e["p95_ms"]]
        for label, e in report["endpoints"].items()
    ]
    print()
    print(markdown_table(["endpoint", "requests", "errors", "req/s", "p50 ms", "p95 ms"], rows))
    keys = ("before_seeding", "traffic_start", "traffic_end")
    load = " → ".join(f"{report['load_average'][k][0]:.2f}" for k in keys)
    cpu = report["cpu_cores_used"]
    side = report["server_side"]
    print(
        f"\n{report['clients']} clients, {report['duration_s']:.0f} s, "
        f"{report['server']['gunicorn']} + {report['server']['task_workers']} db_worker. "
        f"Load average (1 min) before seeding → at traffic start → at its end: {load}. "
        f"CPU cores busy during the traffic: {cpu['machine']:.2f} in all, "
        f"{cpu['this_benchmark']:.2f} by this benchmark, {cpu['everything_else']:.2f} by "
        f"everything else. Server: runs {side['runs']}, tasks {side['tasks']}, deadlocks "
        f"{side['deadlocks']}, tracebacks (web/worker) "
        f"{side['tracebacks_web']}/{side['tracebacks_worker']}"
        + (
            f"; exited before the end: {', '.join(side['exited_early'])}."
            if side["exited_early"]
            else "."
        )
    )
    for line, count in side["exceptions"].items():
        print(f"- {count} × {line}")


if __name__ == "__main__":
    main()
