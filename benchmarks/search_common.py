"""Shared pieces of the search benchmarks: a throwaway database, timing and reporting.

Every benchmark runs in its own database on the same PostgreSQL server (the embedded
one unless ``DATABASE_URL`` is set), created and migrated at start and dropped at the
end (``--keep`` keeps it), so it never touches anyone's data and leaves nothing behind.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent


def _server_url() -> str:
    url = os.environ.get("DATABASE_URL")
    if url:
        return url
    sys.path.insert(0, str(ROOT))
    from memory.infra.embedded_db import embedded_database_url

    var = Path(os.environ.get("MEMORY_VAR_DIR", str(ROOT / "var")))
    # Joining the embedded server also registers this process as one of its users, so
    # it is not stopped under the benchmark when other processes exit.
    return embedded_database_url(var / "pgdata")


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


@contextmanager
def bench_database(name: str, *, keep: bool = False, reuse: bool = False) -> Iterator[str]:
    """Create database ``name``, point Django at it, migrate; drop it afterwards.

    ``reuse`` keeps an existing database of that name (kept by an earlier ``keep``).
    """
    import psycopg

    server = _server_url()
    with psycopg.connect(server, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not (reuse and exists):
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
    url = _with_database(server, name)
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connections

    call_command("migrate", verbosity=0)
    try:
        yield url
    finally:
        connections.close_all()
        if not keep:
            with psycopg.connect(server, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def latency_summary(ms: list[float]) -> dict[str, float]:
    return {
        "p50": statistics.median(ms),
        "p95": percentile(ms, 0.95),
        "mean": statistics.fmean(ms),
        "n": float(len(ms)),
    }


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = fn()
    return (time.perf_counter() - started) * 1000, value


def machine_line() -> str:
    return (
        f"{platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} cores "
        "(shared with other work: figures are noisy)"
    )


def markdown_table(header: list[str], rows: list[list[Any]]) -> str:
    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.4f}" if abs(value) < 10 else f"{value:.1f}"
        return str(value)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def queued_refits_run() -> float:
    """Run the duplicate re-estimates that writes queued, as the task worker would right
    after them (benchmarks run no worker); seconds taken. Other queued work (embeddings)
    is left alone."""
    from django_tasks_db.models import DBTaskResult

    from memory.infra.queueing import DUPLICATES_REFIT_TASK, queued_task

    started = time.perf_counter()
    queued = list(DBTaskResult.objects.filter(task_path=DUPLICATES_REFIT_TASK).ready())
    for row in queued:
        queued_task(DUPLICATES_REFIT_TASK).call(*row.args_kwargs["args"])
        row.delete()
    return time.perf_counter() - started if queued else 0.0
