"""Seeding throughput: rows/s of a CSV entity import, embeddings included.

    .venv/bin/python -m benchmarks.seeding_import            # 2,000 rows, 3 repeats
    .venv/bin/python -m benchmarks.seeding_import --tiny     # seconds: a smoke test

What an import job runs (``entities_import`` with ``seeded=True``) on a generated CSV file
— people and organisations with aliases and emails, 5% rows repeating an earlier row
(matched), 2% rows without a name (errors) — into a fresh context of a throwaway
database, with the production task backend (django-tasks-db). Measured:
- the import itself (what the progress bar waits for; with the batched import this
  includes the vectors, computed per batch);
- the embedding work it leaves to the worker: the entity embedding tasks it queued, run
  here one after another as ``db_worker`` would (zero when the import embeds inline);
- the sum, as rows/s: how long until every seeded entity is findable by vector.
Reference in the same run: the embedder alone on the same entity texts in one batch.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from inspect import signature
from typing import Any

from benchmarks.search_common import bench_database, machine_line, markdown_table

DATABASE = "md_bench_seeding"
BATCHED = False  # whether this code's import has ``embed_now`` (batched; set in main)


def csv_file(rows: int, offset: int) -> str:
    lines = ["name,type,scope,aliases,email"]
    for i in range(rows):
        n = offset + i
        if i % 50 == 49:
            lines.append(",person,bench/org,,")  # no name: an error row
        elif i % 20 == 19:
            lines.append(lines[-5] if len(lines) > 5 else lines[-1])  # a repeat: matched
        elif i % 3 == 0:
            lines.append(f"Northwind Trading {n} Ltd,organisation,bench/org,NWT {n},")
        else:
            lines.append(f"Person {n} Example,person,bench/org/team/t{n % 10},P. Example {n},"
                         f"person{n}@example.org")  # fmt: skip
    return "\n".join(lines) + "\n"


def queued_embedding_tasks() -> int:
    from django_tasks_db.models import DBTaskResult

    return DBTaskResult.objects.filter(
        task_path="memory.tasks.embeddings_drain_task", status="READY"
    ).count()


def run_once(rows: int, offset: int, *, embed_now: bool) -> dict[str, float]:
    from django_tasks_db.models import DBTaskResult

    from memory.domain.access import system_access
    from memory.services.contexts import context_create
    from memory.services.transfer.seeding import entities_import
    from memory.services.vectors import embeddings_drain

    context = context_create(slug=f"bench-seed-{offset}")
    content = csv_file(rows, offset)
    DBTaskResult.objects.all().delete()
    started = time.perf_counter()
    # ``embed_now``: as the import job calls it (vectors per batch, in the worker); without
    # it, the embedding work is queued (one task per batch; one per row before batching).
    options: dict[str, Any] = {"embed_now": embed_now} if BATCHED else {}
    report = entities_import(access=system_access(context), content=content, seeded=True, **options)
    import_s = time.perf_counter() - started
    tasks = queued_embedding_tasks()
    started = time.perf_counter()
    if tasks:  # the worker's drain embeds whatever the import left without a vector
        embeddings_drain(context=context)
    worker_s = time.perf_counter() - started
    assert report.failed == rows // 50, report.errors[:3]
    return {
        "rows": rows,
        "created": report.created,
        "matched": report.matched,
        "failed": report.failed,
        "import_s": import_s,
        "queued_tasks": tasks,
        "worker_s": worker_s,
        "import_rows_per_s": rows / import_s,
        "total_rows_per_s": rows / (import_s + worker_s),
    }


def _batched() -> bool:
    from memory.services.transfer.seeding import entities_import

    return "embed_now" in signature(entities_import).parameters


def embedder_alone(rows: int) -> float:
    from memory.infra.embeddings import embed_texts

    texts = [f"Person {i} Example (person); also known as P. Example {i}" for i in range(rows)]
    started = time.perf_counter()
    embed_texts(texts)
    return rows / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tiny", action="store_true", help="a few seconds, for CI")
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.tiny:
        args.rows, args.repeat = 100, 1
    os.environ.setdefault("MEMORY_TASKS_BACKEND", "django_tasks_db.DatabaseBackend")
    # A smoke test never drops the database of a full run going on next to it.
    with bench_database(f"{DATABASE}_tiny" if args.tiny else DATABASE):
        from memory.infra.embeddings import embed_texts

        global BATCHED
        BATCHED = _batched()
        embed_texts(["load the model"])
        modes = [False, True] if BATCHED else [False]
        runs = {
            ("embedded per batch" if now else "embeddings queued"): [
                run_once(args.rows, offset=(2 * i + now) * args.rows, embed_now=now)
                for i in range(args.repeat)
            ]
            for now in modes
        }
        alone = embedder_alone(args.rows)
    keys = ("import_s", "worker_s", "import_rows_per_s", "total_rows_per_s")
    median = {
        mode: {k: statistics.median(r[k] for r in rs) for k in keys} for mode, rs in runs.items()
    }
    report: dict[str, Any] = {
        "machine": machine_line(),
        "load_average": os.getloadavg(),
        "batched_import": BATCHED,
        "runs": runs,
        "median": median,
        "embedder_alone_texts_per_s": alone,
    }
    print(json.dumps(report, indent=1, default=float))
    load = ", ".join(f"{x:.2f}" for x in report["load_average"])
    print(f"\n{args.rows} rows, median of {args.repeat}; load average {load}")
    rows = [
        [mode, f"{m['import_rows_per_s']:.1f}", f"{m['worker_s']:.1f}",
         f"{m['total_rows_per_s']:.1f}"]
        for mode, m in median.items()
    ]  # fmt: skip
    rows.append(["reference: the embedder alone, texts/s", f"{alone:.1f}", "—", "—"])
    header = ["import", "rows/s (import)", "worker embedding s", "rows/s (all)"]
    print(markdown_table(header, rows))


if __name__ == "__main__":
    main()
