"""Duplicate detection over 100k entities: scan time, candidates, precision and recall.

    .venv/bin/python -m benchmarks.duplicates_detect            # 100k entities
    .venv/bin/python -m benchmarks.duplicates_detect --tiny     # seconds: a smoke test

Entities with planted duplicates (``benchmarks/duplicates_data.py``: case and
punctuation, legal suffixes, token order, typos, phonetic spellings, shared e-mail
addresses, embedding neighbours) are loaded into a throwaway database with COPY, random
384-d vectors in SQL (a planted embedding neighbour gets its base's vector plus noise) and
the HNSW index built once. Then ``memory.services.duplicates.finder.duplicates_scan`` runs over
the whole context, as the task ``Scan now`` on the duplicates page queues does; its report
gives the time of each phase (reading, key blocks, identifiers, edit distance, embedding
neighbours, storing the pairs).

Quality: every pair of entities planted as one identity is a true pair; precision = true
pairs among the stored candidates, recall = true pairs found, overall, per method and per
kind of variation.

Reference, in the same run: the blocking-free way — every pair compared with rapidfuzz
(``fuzz.ratio`` ≥ the scan's edit-distance cut, on normalized keys) — on a sample of
identities with their duplicates, timed as a plain Python loop and as rapidfuzz's
``cdist`` (C), extrapolated to all pairs of the full set (n²/2), with its precision and
recall on the sample next to the scan's on the same sample.
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import os
import random
import time
from collections import defaultdict
from typing import Any

from benchmarks.duplicates_data import Planted, plant
from benchmarks.search_common import bench_database, machine_line, markdown_table, percentile

DATABASE = "md_bench_duplicates"


def load(context_id: int, planted: list[Planted]) -> dict[int, Planted]:
    """COPY the entities in, give them vectors, build the HNSW index; entity id → planted."""
    from django.db import connection

    from memory.domain.entity_names import entity_normalize_key
    from memory.infra.embeddings import embedding_model_id

    buffer = io.StringIO()
    for p in planted:
        key = entity_normalize_key(p.name)
        attributes = json.dumps(p.attributes).replace("\\", "\\\\")  # COPY's text format
        buffer.write(
            f"{context_id}\t{p.scope}\t{p.name}\t{p.type}\t{key}\t{{}}\t{{}}\t{attributes}\t\t"
            "f\t2026-01-01 00:00:00+00\t2026-01-01 00:00:00+00\n"
        )
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX entity_embedding_hnsw")
        with cursor.cursor.copy(
            "COPY memory_entity (context_id, scope, name, type, normalized_key, aliases, "
            "alias_keys, attributes, embedding_model, seeded, created_at, updated_at) FROM STDIN"
        ) as copy:
            copy.write(buffer.getvalue())
        cursor.execute(
            "SELECT id, scope, type, name FROM memory_entity WHERE context_id = %s", [context_id]
        )
        by_key = {(scope, type_, name): pk for pk, scope, type_, name in cursor.fetchall()}
        ids = {by_key[(p.scope, p.type, p.name)]: p for p in planted}
        cursor.execute(
            """
            UPDATE memory_entity SET embedding_model = %s, embedding = (
                SELECT array_agg(random() - 0.5)::vector(384)
                FROM generate_series(1, 384) WHERE id > 0)
            WHERE context_id = %s
            """,
            [embedding_model_id(), context_id],
        )
        base_of = {(p.identity): pk for pk, p in ids.items() if p.kind == "base"}
        pairs = [(pk, base_of[p.identity]) for pk, p in ids.items() if p.kind == "embedding"]
        cursor.execute("CREATE TEMP TABLE planted_pair (dup bigint, base bigint)")
        cursor.executemany("INSERT INTO planted_pair VALUES (%s, %s)", pairs)
        # The base's vector plus noise of about a third of its length: cosine ≈ 0.95.
        cursor.execute(
            """
            UPDATE memory_entity d SET embedding = b.embedding + (
                SELECT array_agg((random() - 0.5) * 0.33)::vector(384)
                FROM generate_series(1, 384) WHERE d.id > 0)
            FROM planted_pair p JOIN memory_entity b ON b.id = p.base
            WHERE d.id = p.dup
            """
        )
        emails = [(pk, p) for pk, p in ids.items() if p.email]
        cursor.executemany(
            "INSERT INTO memory_entityidentifier (entity_id, context_id, scope, kind, value) "
            "VALUES (%s, %s, %s, 'email', %s)",
            [(pk, context_id, p.scope, p.email) for pk, p in emails],
        )
        started = time.perf_counter()
        cursor.execute(
            "CREATE INDEX entity_embedding_hnsw ON memory_entity USING hnsw "
            "(embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
        )
        ids_hnsw_s = time.perf_counter() - started
        cursor.execute("ANALYZE memory_entity")
        cursor.execute("ANALYZE memory_entityidentifier")
    print(f"loaded {len(ids):,} entities; HNSW build {ids_hnsw_s:.0f} s", flush=True)
    return ids


def truth(ids: dict[int, Planted]) -> dict[tuple[int, int], str]:
    """Every pair of one identity → the kind of variation that made it."""
    members: dict[int, list[int]] = defaultdict(list)
    for pk, p in ids.items():
        members[p.identity].append(pk)
    pairs = {}
    for group in members.values():
        for a, b in itertools.combinations(sorted(group), 2):
            kinds = sorted({ids[a].kind, ids[b].kind} - {"base"})
            pairs[(a, b)] = "+".join(kinds)
    return pairs


Pairs = dict[tuple[int, int], list[str]]


def quality(found: Pairs, true: dict[tuple[int, int], str]) -> dict[str, Any]:
    hits = [pair for pair in found if pair in true]
    by_method: dict[str, dict[str, float]] = {}
    for method in sorted({m for methods in found.values() for m in methods}):
        mine = [pair for pair, methods in found.items() if method in methods]
        right = sum(pair in true for pair in mine)
        by_method[method] = {
            "candidates": len(mine),
            "precision": right / len(mine) if mine else 0.0,
            "recall": right / len(true) if true else 0.0,
        }
    by_kind = {}
    for kind in sorted(set(true.values())):
        planted = [pair for pair, k in true.items() if k == kind]
        by_kind[kind] = sum(pair in found for pair in planted) / len(planted)
    return {
        "candidates": len(found),
        "true_pairs": len(true),
        "precision": len(hits) / len(found) if found else 0.0,
        "recall": len(hits) / len(true) if true else 0.0,
        "by_method": by_method,
        "recall_by_kind": by_kind,
    }


def reference(ids: dict[int, Planted], true: dict[tuple[int, int], str]) -> dict[str, Any]:
    """recordlinkage's own pipeline on the same records: sorted-neighbourhood indexing on
    the normalized name (window 9) and blocking on the e-mail address, Jaro–Winkler ≥ 0.85
    on the name, exact comparisons of the e-mail and of each attribute, its ECM
    classifier."""
    import pandas as pd
    import recordlinkage

    from memory.domain.entity_names import entity_normalize_key

    attribute_names = sorted({name for p in ids.values() for name in p.attributes})
    frame = pd.DataFrame(
        {
            "key": [entity_normalize_key(p.name) for p in ids.values()],
            "type": [p.type for p in ids.values()],
            "email": [p.email or None for p in ids.values()],
            **{name: [p.attributes.get(name) for p in ids.values()] for name in attribute_names},
        },
        index=list(ids),
    )
    started = time.perf_counter()
    indexer = recordlinkage.Index()
    indexer.sortedneighbourhood("key", window=9, block_on="type")
    indexer.block(["type", "email"])
    candidates = indexer.index(frame)
    compare = recordlinkage.Compare()
    compare.string("key", "key", method="jarowinkler", threshold=0.85, label="name")
    compare.exact("email", "email", missing_value=0, label="email")
    for name in attribute_names:
        compare.exact(name, name, missing_value=0, label=name)
    features = compare.compute(candidates, frame)
    matches = recordlinkage.ECMClassifier(binarize=None).fit_predict(features)
    seconds = time.perf_counter() - started
    found = {(min(a, b), max(a, b)): ["recordlinkage"] for a, b in matches}
    return {"seconds": seconds, "candidates": len(candidates), "quality": quality(found, true)}


def incremental(context_id: int, ids: dict[int, Planted], count: int) -> dict[str, Any]:
    """The check of one new entity, ``count`` times: a planted duplicate of a random base
    (or, every other time, a new name), inserted with a vector, then
    ``duplicates_check([id])`` in its own transaction, timed."""
    from django.db import connection, transaction

    from benchmarks.duplicates_data import KINDS, _variant, carried
    from memory.domain.entity_names import entity_normalize_key
    from memory.models import Entity
    from memory.services.duplicates.finder import duplicates_check

    rng = random.Random(23)
    bases = [p for p in ids.values() if p.kind == "base"]
    times = []
    for i in range(count):
        base = rng.choice(bases)
        if i % 2 == 0:
            planted = _variant(rng, base, rng.choice(KINDS[:5]))
            planted.attributes = carried(rng, base.attributes)
        else:
            planted = Planted(f"Zuvora Nekimo {i}", base.type, "bench/org/new", -1, "new")
        entity = Entity.objects.create(
            context_id=context_id,
            scope="bench/org/new",
            name=planted.name,
            type=planted.type,
            normalized_key=entity_normalize_key(planted.name) or f"x{i}",
            aliases=[],
            alias_keys=[],
            attributes=planted.attributes,
        )
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE memory_entity SET embedding = (SELECT array_agg(random() - 0.5)"
                "::vector(384) FROM generate_series(1, 384) WHERE id > 0) WHERE id = %s",
                [entity.pk],
            )
        started = time.perf_counter()
        with transaction.atomic():
            duplicates_check([entity.pk])
        times.append((time.perf_counter() - started) * 1000)
    return {
        "checks": count,
        "median_ms": percentile(times, 0.5),
        "p95_ms": percentile(times, 0.95),
        "max_ms": max(times),
    }


def run(*, total: int, checks: int, attributes: bool = False) -> dict[str, Any]:
    from memory.models.duplicate import DuplicateCandidate
    from memory.services.contexts import context_create
    from memory.services.duplicates.finder import duplicates_scan

    context = context_create(slug="bench-duplicates")
    started = time.perf_counter()
    planted = plant(total, attributes=attributes)
    ids = load(context.pk, planted)
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    scan = duplicates_scan(context=context)
    scan_s = time.perf_counter() - started
    candidates = list(
        DuplicateCandidate.objects.filter(context=context)
        .order_by("-score", "pk")
        .values_list("entity_a_id", "entity_b_id", "methods")
    )
    found = {(a, b): methods for a, b, methods in candidates}
    true = truth(ids)
    # What a curator sees first: the page ranks clusters by their best pair's score.
    at_k = {
        k: sum((a, b) in true for a, b, _ in candidates[:k]) / min(k, len(candidates))
        for k in (1_000, 5_000, 10_000)
        if candidates
    }
    return {
        "machine": machine_line(),
        "load_average": os.getloadavg(),
        "entities": len(ids),
        "attributes": attributes,
        "planted_duplicates": sum(p.kind != "base" for p in ids.values()),
        "load_s": load_s,
        "scan_s": scan_s,
        "scan_report": {
            "pairs": scan.pairs,
            "stored": scan.stored,
            "fitted_pairs": scan.fitted_pairs,
            "by_method": scan.by_method,
        },
        "scan_phases_s": scan.phases,
        "precision_at_k": at_k,
        "quality": quality(found, true),
        "reference": reference(ids, true),
        "incremental": incremental(context.pk, ids, checks),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tiny", action="store_true", help="a few seconds, for CI")
    parser.add_argument("--entities", type=int, default=100_000)
    parser.add_argument("--checks", type=int, default=300, help="incremental checks timed")
    parser.add_argument("--json", help="also write the report to this file")
    parser.add_argument(
        "--attributes", action="store_true", help="entities with attributes (ATTRIBUTES)"
    )
    args = parser.parse_args()
    if args.tiny:
        args.entities, args.checks = 3_000, 30
    # A smoke test never drops the database of a full run going on next to it.
    with bench_database(f"{DATABASE}_tiny" if args.tiny else DATABASE):
        report = run(total=args.entities, checks=args.checks, attributes=args.attributes)
    print(json.dumps(report, indent=1, default=float))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=1, default=float)
    q, ref, inc = report["quality"], report["reference"], report["incremental"]
    load = ", ".join(f"{x:.2f}" for x in report["load_average"])
    print(f"\n{report['entities']:,} entities ({'with' if report['attributes'] else 'without'} "
          f"attributes), {report['planted_duplicates']:,} planted duplicates; "
          f"load average {load}")  # fmt: skip
    print(markdown_table(
        ["measure", "value"],
        [
            ["full scan, s", f"{report['scan_s']:.1f}"],
            *[[f"… {phase}, s", f"{seconds:.1f}"]
              for phase, seconds in report["scan_phases_s"].items()],
            ["blocked pairs compared", f"{report['scan_report']['pairs']:,}"],
            ["EM fitted on (blocked pairs)", f"{report['scan_report']['fitted_pairs']:,}"],
            ["candidates stored (match probability ≥ 0.5)", f"{q['candidates']:,}"],
            ["precision / recall", f"{q['precision']:.3f} / {q['recall']:.3f}"],
            *[[f"precision of the best {k:,} pairs by score", f"{p:.3f}"]
              for k, p in report["precision_at_k"].items()],
            [f"incremental check of one new entity ({inc['checks']}), median / p95 ms",
             f"{inc['median_ms']:.1f} / {inc['p95_ms']:.1f}"],
            ["recordlinkage (sorted neighbourhood + e-mail block, JW, ECM), s",
             f"{ref['seconds']:.1f}"],
            ["… its candidates / precision / recall",
             f"{ref['candidates']:,} / {ref['quality']['precision']:.3f} / "
             f"{ref['quality']['recall']:.3f}"],
        ],
    ))  # fmt: skip
    print(markdown_table(
        ["method", "candidates", "precision", "share of true pairs"],
        [[m, f"{v['candidates']:,}", f"{v['precision']:.3f}", f"{v['recall']:.3f}"]
         for m, v in q["by_method"].items()],
    ))  # fmt: skip
    print(markdown_table(
        ["planted variation", "recall"],
        [[k, f"{v:.3f}"] for k, v in q["recall_by_kind"].items()],
    ))  # fmt: skip


if __name__ == "__main__":
    main()
