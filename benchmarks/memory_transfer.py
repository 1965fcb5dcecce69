"""Export and import throughput of a whole memory, and whether memory stays flat.

    .venv/bin/python -m benchmarks.memory_transfer           # 10k entities, 100k facts
    .venv/bin/python -m benchmarks.memory_transfer --tiny    # seconds
    .venv/bin/python -m benchmarks.memory_transfer --entities 100000 --facts 1000000

A synthetic export (people with attributes and identifiers; facts: attribute values,
relations between people, a superseded value in ten, validity on a third) is written to
a file and imported with ``manage.py import_memory`` into an empty context (import 1);
that context is exported with ``manage.py export_memory`` (export); the export is
imported again into a second context (import 2), and both contexts' counts compared.
Each step runs in a child process so its peak resident memory (``ru_maxrss``) is its
own. Reported: facts per second each way (the import's cumulative seconds after reading,
writing, loading the search postings, writing the duplicate finder's keys, and the
commit — ``index``), peak RSS of each step, the file's size, and the CPU seconds of each
step's Python process and of its PostgreSQL backend (read from ``/proc`` when the server
runs on this machine): one transaction's writes are all made by its one backend, so the
backend's CPU is the floor of an import's time (decision 0113).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.search_common import bench_database, machine_line, markdown_table

DATABASE = "md_bench_memory_transfer"
PREDICATES = {
    "works_with": "relation",
    "knows": "relation",
    "lives_in_city": "attribute",
    "favourite_colour": "attribute",
    "current_title": "attribute",
}
CITIES = ["Leeds", "Lyon", "Lima", "Oslo", "Osaka", "Perth", "Pune", "Quito", "Riga", "Rome"]


def synthetic_export(path: Path, entities: int, facts: int, seed: int = 11) -> None:
    rng = random.Random(seed)
    stamp = "2025-01-01T00:00:00+00:00"
    counts: dict[str, int] = {}

    def put(out: Any, record: dict[str, Any]) -> None:
        counts[record["record"]] = counts.get(record["record"], 0) + 1
        out.write(json.dumps(record, separators=(",", ":")) + "\n")

    with path.open("w") as out:
        out.write(json.dumps({"record": "header", "format": "memory-desk-export", "version": 1}))
        out.write("\n")
        for pk, (name, kind) in enumerate(PREDICATES.items(), start=1):
            put(out, {"record": "predicate", "id": pk, "name": name, "kind": kind,
                      "single_valued": name == "current_title"})  # fmt: skip
        for pk in range(1, entities + 1):
            name = f"person {pk:07d}"
            put(out, {"record": "entity", "id": pk, "name": name, "type": "person",
                      "scope": f"org/u{pk % 50}", "normalized_key": name,
                      "attributes": {"date_of_birth": _birthday(rng)},
                      "created_at": stamp, "updated_at": stamp})  # fmt: skip
            put(out, {"record": "identifier", "id": pk, "entity_id": pk,
                      "scope": f"org/u{pk % 50}", "kind": "email",
                      "value": f"p{pk}@example.org"})  # fmt: skip
        names = list(PREDICATES)
        fact_id = 0
        while fact_id < facts:
            fact_id += 1
            subject = rng.randint(1, entities)
            predicate = names[fact_id % len(names)]
            record: dict[str, Any] = {
                "record": "fact", "id": fact_id, "scope": f"org/u{subject % 50}",
                "subject_id": subject, "predicate_id": names.index(predicate) + 1,
                "raw_predicate": predicate, "kind": PREDICATES[predicate],
                "recorded_at": stamp, "last_seen_at": stamp,
                "status": "current",
            }  # fmt: skip
            if PREDICATES[predicate] == "relation":
                record["object_id"] = rng.randint(1, entities)
            else:
                value = rng.choice(CITIES) if predicate != "current_title" else f"title {fact_id}"
                record["value"], record["value_text"] = value, value
                if predicate == "current_title":
                    record["status"] = "superseded"  # history: values a later one replaced
            if fact_id % 3 == 0:
                record["valid_from"] = "2020-01-01T00:00:00+00:00"
            put(out, record)
        out.write(json.dumps({"record": "end", "counts": counts}) + "\n")


def _birthday(rng: random.Random) -> str:
    return f"19{rng.randint(40, 99)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}"


def _step(args: list[str]) -> dict[str, Any]:
    """One management command in a child process: its wall seconds and peak RSS."""
    started = time.perf_counter()
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, *args], capture_output=True, text=True, env=os.environ
    )
    if child.returncode != 0:
        raise SystemExit(child.stderr[-3000:])
    out = json.loads(child.stdout.strip().splitlines()[-1])
    out["wall_s"] = time.perf_counter() - started
    return out


_CHILD = """
import json, os, resource, sys, io, time
import django
django.setup()
from django.core.management import call_command
from django.db import connection

def backend_cpu(pid):
    # utime + stime of the server process, when it runs on this machine
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

def own_cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime

with connection.cursor() as cursor:
    cursor.execute("SELECT pg_backend_pid()")
    backend = cursor.fetchone()[0]
cpu_before, backend_before = own_cpu(), backend_cpu(backend)
out = io.StringIO()
started = time.perf_counter()
call_command(*sys.argv[1:], stdout=out)
seconds = time.perf_counter() - started
backend_after = backend_cpu(backend)
cpu = {
    "python": round(own_cpu() - cpu_before, 1),
    "backend": None if backend_before is None or backend_after is None
    else round(backend_after - backend_before, 1),
}
text = out.getvalue().strip()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
report = json.loads(text) if text.startswith("{") else None
print(json.dumps({"seconds": seconds, "peak_rss_mb": peak, "report": report, "cpu_s": cpu}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--entities", type=int, default=10_000)
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--json", help="also write the report to this file")
    args = parser.parse_args()
    entities, facts = (500, 5_000) if args.tiny else (args.entities, args.facts)
    report: dict[str, Any] = {
        "machine": machine_line(),
        "load_average": os.getloadavg(),
        "entities": entities,
        "facts": facts,
    }
    with tempfile.TemporaryDirectory() as folder, bench_database(DATABASE):
        from memory.models import Context, Entity, Fact

        source = Path(folder) / "synthetic.jsonl"
        synthetic_export(source, entities, facts)
        exported = Path(folder) / "exported.jsonl"
        report["file_mb"] = source.stat().st_size / 1e6
        first = _step(["import_memory", str(source), "--context", "one", "--create"])
        export = _step(["export_memory", "--context", "one", "--output", str(exported)])
        second = _step(["import_memory", str(exported), "--context", "two", "--create"])
        one, two = Context.objects.get(slug="one"), Context.objects.get(slug="two")
        for name, ctx in (("one", one), ("two", two)):
            report[f"counts_{name}"] = {
                "entities": Entity.objects.filter(context=ctx).count(),
                "facts": Fact.objects.filter(context=ctx).count(),
            }
        assert report["counts_one"] == report["counts_two"], report
        report["import"] = first
        report["export"] = export | {"facts_per_s": facts / export["seconds"]}
        report["import_again"] = second
        for step in (first, second):
            step["facts_per_s"] = facts / step["seconds"]
        report["parent_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(report, indent=1, default=float))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=float))
    load_avg = ", ".join(f"{x:.2f}" for x in report["load_average"])
    print(f"\n{report['machine']}; load average {load_avg}")
    rows = []
    for label, step in (
        ("import", first),
        ("export", report["export"]),
        ("import of the export", second),
    ):
        phases = (step.get("report") or {}).get("seconds", {})
        shown = json.dumps(phases) if phases else "—"
        cpu = step["cpu_s"]
        backend = "—" if cpu["backend"] is None else f"{cpu['backend']:.1f}"
        rows.append([label, f"{step['seconds']:.1f}", f"{step['facts_per_s']:,.0f}", shown,
                     f"{cpu['python']:.1f} / {backend}",
                     f"{step['peak_rss_mb']:.0f}"])  # fmt: skip
    print(markdown_table(
        [f"{entities:,} entities / {facts:,} facts", "s", "facts/s",
         "phases (cumulative s)", "CPU s (Python / its backend)", "peak RSS MB"], rows,
    ))  # fmt: skip


if __name__ == "__main__":
    main()
