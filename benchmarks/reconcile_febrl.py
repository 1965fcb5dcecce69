"""Reconciliation on FEBRL person records: the originals are the memory, the duplicates
are the spreadsheet.

    .venv/bin/python -m benchmarks.reconcile_febrl                    # FEBRL-2 and FEBRL-3
    .venv/bin/python -m benchmarks.reconcile_febrl --tiny             # seconds: a smoke test
    .venv/bin/python -m benchmarks.reconcile_febrl --sets 1 4         # the held-out check
    .venv/bin/python -m benchmarks.reconcile_febrl --pad 95000        # latency at ~100k

Each set's original records (``rec-N-org``) are seeded into a fresh context through
the API (``POST entities/bulk``: name "given_name surname", every other field an
attribute, one scope per record as in ``benchmarks.duplicates_febrl``); ``--pad N`` adds N
made-up people (FEBRL's own given names and surnames recombined, random dates of birth,
postcodes and addresses) to measure latency at scale. The padding is loaded in bulk
(``pad_load``): the entity rows as the seeding path stores them, then their search
postings, every blocking key of the context and the duplicate model's re-estimate, as
seeding leaves them; seeding 95,000 people one batch at a time through the API would take
about an hour, and the benchmark measures matching, not seeding. Every duplicate record
(``rec-N-dup-k``) is then reconciled, ten queries a request as OpenRefine sends them
(``GET reconcile?queries=``, through the API in this process), with its name as the
query, ``type=person`` and every other field as an ``attr:`` property.

Reported: top-1 accuracy (the first candidate is the duplicate's original), auto-match
precision (``match: true`` candidates that are right) and recall (right auto-matches
over all duplicates), and per-query latency of single-query requests (median, p95) on a
sample. FEBRL-1 and FEBRL-4 were not looked at while choosing the match rule.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from typing import Any

from benchmarks.duplicates_febrl import load, rows_of
from benchmarks.search_common import (
    bench_database,
    machine_line,
    markdown_table,
    queued_refits_run,
)

DATABASE = "md_bench_reconcile_febrl"
BATCH = 1_000
QUERIES_PER_REQUEST = 10
LATENCY_SAMPLE = 300


def _client(slug: str) -> Any:
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    from memory.models import ContextMembership, Role
    from memory.services.contexts import context_create
    from memory.services.tokens import token_issue

    context = context_create(slug=slug, name=slug)
    user = get_user_model().objects.create_user(username=f"bench-{slug}", password="x-bench-only")
    ContextMembership.objects.create(
        user=user, context=context, role=Role.ADMIN, grants=["read,write:*"]
    )
    client = APIClient()
    client.credentials(
        HTTP_AUTHORIZATION=f"Token {token_issue(user=user, context=context, grants=['read:*']).raw}"
    )
    writer = APIClient()
    raw = token_issue(user=user, context=context, grants=["read,write:*"]).raw
    writer.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
    return client, writer


def _seed(writer: Any, base: str, rows: list[dict[str, Any]]) -> dict[str, int]:
    entity_of: dict[str, int] = {}
    for start in range(0, len(rows), BATCH):
        batch = rows[start : start + BATCH]
        body = "\n".join(json.dumps({k: v for k, v in r.items() if k != "rec_id"}) for r in batch)
        response = writer.post(f"{base}/entities/bulk", body, content_type="application/x-ndjson")
        assert response.status_code == 200, response.content[:500]
        queued_refits_run()
        for row, entry in zip(batch, response.json()["rows"], strict=True):
            if entry.get("entity_id"):
                entity_of[row["rec_id"]] = entry["entity_id"]
    return entity_of


def pad_load(slug: str, rows: list[dict[str, Any]]) -> None:
    """Write ``rows`` (``padding``) into the context as ``POST entities/bulk`` leaves new
    seeded entities of unseen names, in a few set-based statements."""
    from django.db import transaction

    from memory.domain.entity_names import entity_clean_name, entity_normalize_key
    from memory.matching.blocking import keys_write_all
    from memory.matching.records import records_of
    from memory.matching.weights import model_read
    from memory.models import Context, Entity
    from memory.search.bm25_load import postings_load
    from memory.search.models import Target
    from memory.search.texts import entity_text
    from memory.services.duplicates.pairs import refit_if_grown

    context = Context.objects.get(slug=slug)
    with transaction.atomic():
        entities = []
        for row in rows:
            name = entity_clean_name(row["name"])
            entities.append(
                Entity(
                    context=context,
                    scope=row["scope"],
                    name=name,
                    type=row["type"],
                    normalized_key=entity_normalize_key(name),
                    attributes=row["attributes"],
                    seeded=True,
                )
            )
        created = Entity.objects.bulk_create(entities, batch_size=BATCH)
        postings_load(
            context_id=context.pk,
            target=Target.ENTITY,
            items=((e.pk, e.scope, entity_text(e)) for e in created),
        )
        keys_write_all(context.pk, records_of(context.pk, None))
        refit_if_grown(context.pk, *model_read(context.pk))


def padding(frame: Any, count: int, seed: int = 5) -> list[dict[str, Any]]:
    """Made-up people from FEBRL's own name pools (none of them a duplicate's original)."""
    rng = random.Random(seed)
    given = [g for g in frame["given_name"].dropna().unique()]
    surnames = [s for s in frame["surname"].dropna().unique()]
    suburbs = [s for s in frame["suburb"].dropna().unique()]
    rows = []
    for n in range(count):
        rows.append(
            {
                "rec_id": f"pad-{n}",
                "name": f"{rng.choice(given)} {rng.choice(surnames)}",
                "type": "person",
                "scope": f"pad/r{n}",
                "attributes": {
                    "date_of_birth": f"{rng.randint(1920, 2005)}{rng.randint(1, 12):02d}"
                    f"{rng.randint(1, 28):02d}",
                    "postcode": f"{rng.randint(2000, 7999)}",
                    "suburb": rng.choice(suburbs),
                    "street_number": str(rng.randint(1, 400)),
                    "soc_sec_id": str(rng.randint(1_000_000, 9_999_999)),
                },
            }
        )
    return rows


def _query(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "query": row["name"],
        "type": "person",
        "properties": [{"pid": f"attr:{k}", "v": v} for k, v in row["attributes"].items()],
    }


def run_set(number: int, limit: int | None, pad: int) -> dict[str, Any]:
    frame, _ = load(number)
    if limit:
        frame = frame.iloc[:limit]
    rows = rows_of(frame)
    originals = [r for r in rows if str(r["rec_id"]).endswith("-org")]
    duplicates = [r for r in rows if "-dup-" in str(r["rec_id"])]
    original_of = {r["rec_id"]: r["rec_id"].split("-dup-")[0] + "-org" for r in duplicates}
    duplicates = [
        r for r in duplicates if original_of[r["rec_id"]] in {o["rec_id"] for o in originals}
    ]
    slug = f"rfebrl{number}"
    client, writer = _client(slug)
    base = f"/api/v1/contexts/{slug}"
    started = time.perf_counter()
    entity_of = _seed(writer, base, originals)
    seed_s = time.perf_counter() - started
    started = time.perf_counter()
    if pad:
        pad_load(slug, padding(frame, pad))
    pad_s = time.perf_counter() - started
    top1 = matched = matched_right = 0
    started = time.perf_counter()
    for start in range(0, len(duplicates), QUERIES_PER_REQUEST):
        batch = duplicates[start : start + QUERIES_PER_REQUEST]
        queries = {f"q{i}": _query(r) for i, r in enumerate(batch)}
        response = client.get(f"{base}/reconcile", {"queries": json.dumps(queries)})
        assert response.status_code == 200, response.content[:500]
        answers = response.json()
        for i, row in enumerate(batch):
            result = answers[f"q{i}"]["result"]
            want = str(entity_of.get(original_of[row["rec_id"]]))
            if result and result[0]["id"] == want:
                top1 += 1
            if result and result[0]["match"]:
                matched += 1
                matched_right += result[0]["id"] == want
    batch_s = time.perf_counter() - started
    latencies = []
    for row in random.Random(3).sample(duplicates, min(LATENCY_SAMPLE, len(duplicates))):
        began = time.perf_counter()
        response = client.get(f"{base}/reconcile", {"queries": json.dumps({"q": _query(row)})})
        latencies.append((time.perf_counter() - began) * 1000)
        assert response.status_code == 200
    latencies.sort()
    return {
        "entities": len(entity_of) + pad,
        "queries": len(duplicates),
        "top1": top1 / len(duplicates),
        "auto_matches": matched,
        "auto_precision": matched_right / matched if matched else 0.0,
        "auto_recall": matched_right / len(duplicates),
        "seed_s": seed_s,
        "pad_s": pad_s,
        "batched_queries_per_s": len(duplicates) / batch_s,
        "latency_ms_median": statistics.median(latencies),
        "latency_ms_p95": latencies[int(0.95 * (len(latencies) - 1))],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tiny", action="store_true", help="a few seconds, for CI")
    parser.add_argument("--sets", type=int, nargs="+", default=[2, 3], choices=[1, 2, 3, 4])
    parser.add_argument("--pad", type=int, default=0, help="made-up people added to the memory")
    parser.add_argument("--json", help="also write the report to this file")
    args = parser.parse_args()
    limit = 600 if args.tiny else None
    report: dict[str, Any] = {"machine": machine_line(), "load_average": os.getloadavg()}
    with bench_database(f"{DATABASE}_tiny" if args.tiny else DATABASE):
        for number in args.sets:
            report[f"febrl{number}"] = run_set(number, limit, args.pad)
            print(json.dumps(report[f"febrl{number}"], default=float), flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=1, default=float)
    load_avg = ", ".join(f"{x:.2f}" for x in report["load_average"])
    print(f"\n{report['machine']}; load average {load_avg}")
    table = [
        [f"FEBRL-{n}", r["entities"], r["queries"], f"{r['top1']:.4f}",
         f"{r['auto_precision']:.4f}", f"{r['auto_recall']:.4f}",
         f"{r['latency_ms_median']:.1f}", f"{r['latency_ms_p95']:.1f}"]
        for n in args.sets
        for r in [report[f"febrl{n}"]]
    ]  # fmt: skip
    print(markdown_table(
        ["set", "entities", "queries", "top-1", "auto-match precision", "auto-match recall",
         "latency median ms", "p95 ms"], table,
    ))  # fmt: skip


if __name__ == "__main__":
    main()
