"""Server time of every dashboard page at 100k entities and 1M facts.

    .venv/bin/python -m benchmarks.dashboard_pages             # 100k entities, 1M facts
    .venv/bin/python -m benchmarks.dashboard_pages --tiny      # seconds: a smoke test
    .venv/bin/python -m benchmarks.dashboard_pages --keep      # keep the database ...
    .venv/bin/python -m benchmarks.dashboard_pages --reuse     # ... and measure it again

The data (``benchmarks/dashboard_data.py``) is made with ``INSERT … SELECT
generate_series`` in a throwaway database. Each dashboard page is requested through
Django's test ``Client`` logged in as a curator (the seeding pages as an admin): server
time = the request handled inside this process (URL resolution, middleware, session,
views, queries, template), no network and no browser. Two warm-up requests, then
``--repeat`` timed ones; the query count of each page is taken from one extra request.
Goal: p95 ≤ 150 ms per page.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

from benchmarks.datasets import dataset_present, dataset_required
from benchmarks.search_common import bench_database, latency_summary, machine_line, markdown_table

DATABASE = "md_bench_dashboard"
SLUG = "bench-dashboard"
GOAL_MS = 150.0


def pages(context_id: int, slug: str) -> list[tuple[str, str, str]]:
    """(label, role, path) of every page measured."""
    from django.db.models import Count

    from memory.models import Entity, Fact, Run

    base = f"/c/{slug}"
    live = Entity.objects.filter(context_id=context_id, merged_into__isnull=True)
    hub = live.order_by("pk").first()
    # A typical entity: the median number of facts is a handful.
    typical = live.order_by("pk")[live.count() // 2]
    named = live.filter(type="person").order_by("updated_at").first()
    assert hub and named
    run = Run.objects.filter(context_id=context_id).order_by("-pk").first()
    assert run is not None
    hub_facts = Fact.objects.filter(subject=hub).aggregate(n=Count("id"))["n"]
    return [
        ("overview", "curator", f"{base}/"),
        ("drift", "curator", f"{base}/drift/"),
        ("duplicates", "curator", f"{base}/duplicates/"),
        ("conflicts", "curator", f"{base}/conflicts/"),
        ("registry", "curator", f"{base}/registry/"),
        ("entities", "curator", f"{base}/entities/"),
        ("entities ?type=organisation", "curator", f"{base}/entities/?type=organisation"),
        ("entities ?q=<one old person's full name>", "curator", f"{base}/entities/?q={named.name}"),
        ("entities ?q=okafor&type=person", "curator", f"{base}/entities/?q=okafor&type=person"),
        (f"entity detail, hub ({hub_facts} facts)", "curator", f"{base}/entities/{hub.pk}/"),
        ("entity detail, typical", "curator", f"{base}/entities/{typical.pk}/"),
        ("seeding (admin)", "admin", f"{base}/entities/seed/"),
        ("seeding job, 2,000-row report (admin)", "admin", _job_path(context_id, base)),
        ("search hybrid ?q=…", "curator", f"{base}/search/?q=neural+network+training"),
        ("search bm25 ?q=…", "curator", f"{base}/search/?q=neural+network+training&mode=bm25"),
        ("runs", "curator", f"{base}/runs/"),
        ("run detail", "curator", f"{base}/runs/{run.pk}/"),
        ("audit", "curator", f"{base}/audit/"),
        ("documents", "curator", f"{base}/documents/"),
        ("documents ?q=<title words>", "curator", f"{base}/documents/?q=network"),
        *_document_pages(context_id, base),
        ("tokens (admin)", "admin", f"{base}/tokens/"),
        *_fact_pages(context_id, base, typical, named),
    ]


def _fact_pages(context_id: int, base: str, typical: Any, named: Any) -> list[tuple[str, str, str]]:
    """The facts list unfiltered and with each filter, a fact's page, the conversations
    list and the 500-turn conversation."""
    from urllib.parse import quote

    from benchmarks.dashboard_data import LONG_THREAD, LONG_TURNS
    from memory.models import Fact, Run, Turn

    facts = f"{base}/facts/"
    fact = Fact.objects.filter(context_id=context_id, turn__isnull=False).order_by("pk").first()
    run = Run.objects.filter(context_id=context_id).order_by("pk").first()
    thread = Turn.objects.filter(context_id=context_id).exclude(thread=LONG_THREAD).first()
    assert fact and run and thread
    since = (fact.recorded_at.date()).isoformat()
    return [
        ("facts", "curator", facts),
        ("facts, second page (keyset)", "curator", _second_page(facts)),
        ("facts ?predicate=worksAt (alias form)", "curator", f"{facts}?predicate=worksAt"),
        ("facts ?subject=<name>", "curator", f"{facts}?subject={quote(named.name)}"),
        ("facts ?object=<name>", "curator", f"{facts}?object={quote(typical.name)}"),
        ("facts ?kind=attribute", "curator", f"{facts}?kind=attribute"),
        ("facts ?status=superseded", "curator", f"{facts}?status=superseded"),
        ("facts ?status=retracted (none)", "curator", f"{facts}?status=retracted"),
        ("facts ?source_kind=run", "curator", f"{facts}?source_kind=run"),
        ("facts ?run=<id>", "curator", f"{facts}?run={run.pk}"),
        ("facts ?thread=<thread>", "curator", f"{facts}?thread={quote(thread.thread)}"),
        ("facts ?confidence_below=0.55", "curator", f"{facts}?confidence_below=0.55"),
        ("facts ?since=<a day>", "curator", f"{facts}?since={since}"),
        ("facts ?text=roadmap", "curator", f"{facts}?text=roadmap"),
        ("facts ?sort=oldest", "curator", f"{facts}?sort=oldest"),
        ("fact detail (from a turn)", "curator", f"{facts}{fact.pk}/"),
        ("conversations", "curator", f"{base}/conversations/"),
        (f"conversation of {LONG_TURNS} turns (its first page)", "curator",
         f"{base}/conversations/{quote(LONG_THREAD)}/"),
    ]  # fmt: skip


def _second_page(facts_url: str) -> str:
    """The facts list's second page, by the keyset link the first page gives."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.get(username="bench-curator"))
    body = client.get(facts_url).content.decode()
    cursor = body.split("after=")[1].split('"')[0]
    return f"{facts_url}?after={cursor}"


def _document_pages(context_id: int, base: str) -> list[tuple[str, str, str]]:
    """A document's page, when the benchmark's memory has documents."""
    from memory.models import Document

    document = Document.objects.filter(context_id=context_id).order_by("pk").first()
    return [("document detail", "curator", f"{base}/documents/{document.pk}/")] if document else []


def _job_path(context_id: int, base: str) -> str:
    from memory.models import ImportJob

    job = ImportJob.objects.filter(context_id=context_id).order_by("-pk").first()
    assert job is not None
    return f"{base}/entities/seed/jobs/{job.pk}/"


def clients(context: Any) -> dict[str, Any]:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from memory.models import ContextMembership, Role

    out = {}
    for role in (Role.CURATOR, Role.ADMIN):
        user, _ = get_user_model().objects.get_or_create(username=f"bench-{role}")
        ContextMembership.objects.get_or_create(
            user=user, context=context, defaults={"role": role, "grants": ["read,write:*"]}
        )
        client = Client()
        client.force_login(user)
        out[str(role)] = client
    return out


def measure(
    label: str, client: Any, path: str, repeat: int, *, slow_queries: int = 3
) -> dict[str, Any]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for _ in range(2):
        response = client.get(path)
        assert response.status_code == 200, (label, path, response.status_code)
    ms, cpu = [], []
    for _ in range(repeat):
        started, cpu_started = time.perf_counter(), time.process_time()
        client.get(path)
        ms.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - cpu_started) * 1000)
    with CaptureQueriesContext(connection) as queries:
        client.get(path)
    slowest = sorted(queries.captured_queries, key=lambda q: -float(q["time"]))[:slow_queries]
    return {
        "page": label,
        "path": path,
        **latency_summary(ms),
        # This process's CPU time (views, ORM, templates; not PostgreSQL's): less
        # sensitive than wall time to other jobs on a shared machine.
        "cpu_p50": statistics.median(cpu),
        "queries": len(queries.captured_queries),
        "query_ms": round(sum(float(q["time"]) for q in queries.captured_queries) * 1000, 1),
        "slowest": [
            {"ms": round(float(q["time"]) * 1000, 1), "sql": q["sql"][:400]} for q in slowest
        ],
    }


def run(
    *, entities: int, facts: int, documents: int, repeat: int, reuse: bool, only: str | None
) -> dict[str, Any]:
    from benchmarks.dashboard_data import generate
    from memory.models import Context
    from memory.services.contexts import context_create

    if reuse:
        context = Context.objects.get(slug=SLUG)
        generated: dict[str, Any] = {"timings": "reused"}
    else:
        context = context_create(slug=SLUG)
        generated = generate(
            context_id=context.pk, entities=entities, facts=facts, documents=documents
        )
    by_role = clients(context)  # before the pages: the second facts page is read as one
    results = []
    for label, role, path in pages(context.pk, context.slug):
        if only and only not in label:
            continue
        results.append(measure(label, by_role[role], path, repeat))
        print(f"{label}: p50 {results[-1]['p50']:.1f} ms, p95 {results[-1]['p95']:.1f} ms",
              flush=True)  # fmt: skip
    return {
        "machine": machine_line(),
        "load_average": os.getloadavg(),
        "entities": Context.objects.get(pk=context.pk).entities.count(),
        "facts": Context.objects.get(pk=context.pk).facts.count(),
        "generation": generated["timings"],
        "repeat": repeat,
        "pages": results,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tiny", action="store_true", help="a few seconds, for CI")
    parser.add_argument("--entities", type=int, default=100_000)
    parser.add_argument("--facts", type=int, default=1_000_000)
    parser.add_argument("--documents", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--only", help="measure only the pages whose label contains this")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    parser.add_argument(
        "--reuse", action="store_true", help="measure again on a database kept with --keep"
    )
    parser.add_argument("--json", help="also write the report to this file")
    args = parser.parse_args()
    if args.tiny:
        args.entities, args.facts, args.repeat = 2_000, 20_000, 3
        # The documents pages show Inspec abstracts; the smoke run goes without them.
        args.documents = 10 if dataset_present("inspec") else 0
    elif args.documents and not args.reuse:
        dataset_required("inspec", tiny=False)
    options = {
        "entities": args.entities,
        "facts": args.facts,
        "documents": args.documents,
        "repeat": args.repeat,
        "only": args.only,
    }
    # A smoke test never drops a full-size database kept for --reuse.
    database = f"{DATABASE}_tiny" if args.tiny else DATABASE
    with bench_database(database, keep=args.keep or args.reuse, reuse=args.reuse):
        report = run(reuse=args.reuse, **options)
    print(json.dumps(report, indent=1, default=float))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=1, default=float)
    rows = [
        [p["page"], f"{p['p50']:.1f}", f"{p['p95']:.1f}", f"{p['cpu_p50']:.1f}",
         f"{p['query_ms']:.1f}", p["queries"], "met" if p["p95"] <= GOAL_MS else "**not met**"]
        for p in report["pages"]
    ]  # fmt: skip
    load = ", ".join(f"{x:.2f}" for x in report["load_average"])
    print(f"\n{report['entities']:,} entities, {report['facts']:,} facts; load average {load}")
    header = ["page", "p50 ms", "p95 ms", "CPU p50 ms", "SQL ms", "queries", "p95 ≤ 150 ms"]
    print(markdown_table(header, rows))


if __name__ == "__main__":
    main()
