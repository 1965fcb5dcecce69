"""The planted duplicates of ``duplicates_detect`` scored offline, at any scale, in minutes.

    .venv/bin/python -m benchmarks.duplicates_replay                  # 100k entities
    .venv/bin/python -m benchmarks.duplicates_replay --tiny           # seconds: a smoke test

The same entities (``benchmarks/duplicates_data.py``; bare names unless
``--attributes``), the scan's own blocking
(``blocks_of``, ``edit_distance_pairs``) and scoring (``compare``, ``Model.score``) in
memory, without the database: what costs the full benchmark half an hour at 100k on a
loaded machine is the load and the HNSW queries, not the quality. The embedding
neighbours are simulated as the random vectors of ``duplicates_detect`` make them: each
entity's 5 neighbours are random same-type entities at cosine 0.2 ("far"), a planted
embedding variant sits at 0.95 from its base, and the embedding's ``u`` is the one a scan
counts on random pairs of such vectors (all "far"). Precision and recall overall, by
kind, and by the name level of the stored pairs.

The model's best threshold for precision >= PRECISION_GOAL, and the ceiling of any
scoring over the same comparisons: the blocked pairs grouped by
what the comparators say of them (the entities' type and every field's level), each
group labelled with its true share of duplicates, and the groups taken best first while
the pairs taken stay at least PRECISION_GOAL right — the recall the Bayes-optimal
classifier reaches on these comparison vectors, knowing the truth. A model below it can
still learn; a goal above it needs comparators that see more, or data that holds more.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import sys
import time
from collections import Counter, defaultdict
from typing import Any

from benchmarks.search_common import ROOT

PRECISION_GOAL = 0.95  # the goal: recall >= 0.95 at precision >= 0.95


def run(total: int, *, attributes: bool = False) -> dict[str, Any]:
    from benchmarks.duplicates_data import plant
    from memory.domain.entity_names import entity_normalize_key
    from memory.matching.blocking import blocks_of, pair_of
    from memory.matching.model import TypeSample, fit
    from memory.matching.neighbours import NEIGHBOURS, edit_distance_pairs
    from memory.matching.scoring import LEVELS, MATCH_PROBABILITY, Record, compare

    started = time.perf_counter()
    planted = plant(total, attributes=attributes)
    records = {
        i: Record(
            id=i,
            type=p.type,
            scope=p.scope,
            key=entity_normalize_key(p.name),
            identifiers={"email": frozenset([p.email])} if p.email else {},
            attributes=dict(p.attributes),
        )
        for i, p in enumerate(planted)
    }
    members: dict[int, list[int]] = defaultdict(list)
    for i, p in enumerate(planted):
        members[p.identity].append(i)
    true = {
        (a, b): "+".join(sorted({planted[a].kind, planted[b].kind} - {"base"}))
        for group in members.values()
        for a, b in itertools.combinations(sorted(group), 2)
    }
    proposed, rare = blocks_of(records)
    for pair in edit_distance_pairs(records.values()):
        proposed[pair].add("edit_distance")
    rng = random.Random(3)
    by_type: dict[str, list[int]] = defaultdict(list)
    for record in records.values():
        by_type[record.type].append(record.id)
    cosine: dict[tuple[int, int], float] = {}
    for pair, kind in true.items():
        if kind == "embedding":
            cosine[pair] = 0.95
            proposed[pair].add("embedding")
    for record in records.values():
        for other in rng.sample(by_type[record.type], NEIGHBOURS):
            if other != record.id:
                pair = pair_of(record.id, other)
                proposed[pair].add("embedding")
                cosine.setdefault(pair, 0.2)
    blocked_comparisons = {
        pair: compare(
            records[pair[0]],
            records[pair[1]],
            cosine=cosine.get(pair, 0.0),
            rare=rare.get(records[pair[0]].type, set()),
        )
        for pair in proposed
    }
    # Each type's weights as a scan estimates them: its blocked pairs and random pairs of
    # it (10,000), whose random vectors are all "far".
    samples = {}
    for type_, members in by_type.items():
        randoms = {tuple(sorted(rng.sample(members, 2))) for _ in range(10_000)}
        samples[type_] = TypeSample(
            population=[records[i] for i in members],
            pairs=len(members) * (len(members) - 1) / 2,
            blocked=[c for p, c in blocked_comparisons.items() if records[p[0]].type == type_],
            randoms=[
                compare(records[a], records[b], cosine=0.0, rare=rare.get(type_, set()))
                for a, b in sorted(randoms)
            ],
        )
    model = fit(samples)
    found, levels = set(), Counter()
    scores: list[tuple[float, bool]] = []
    for pair, comparisons in blocked_comparisons.items():
        probability = model.score(comparisons, records[pair[0]].type)[0]
        scores.append((probability, pair in true))
        if probability >= MATCH_PROBABILITY:
            found.add(pair)
            name = LEVELS["name"][comparisons[0].level]
            levels[f"{name}, {'right' if pair in true else 'wrong'}"] += 1
    hits = len(found & set(true))
    signatures = {
        pair: (records[pair[0]].type, *((c.field, c.level) for c in comparisons))
        for pair, comparisons in blocked_comparisons.items()
    }
    return {
        "entities": total,
        "attributes": attributes,
        "seconds": time.perf_counter() - started,
        "blocked_pairs": len(proposed),
        "fitted_pairs": model.fitted_pairs,
        "candidates": len(found),
        "precision": hits / len(found) if found else 0.0,
        "recall": hits / len(true),
        "recall_by_kind": {
            kind: sum(p in found for p, k in true.items() if k == kind)
            / sum(k == kind for k in true.values())
            for kind in sorted(set(true.values()))
        },
        "stored_by_name_level": dict(sorted(levels.items())),
        "ceiling": ceiling(signatures, set(true)),
        "at_goal_precision": best_threshold(scores, len(true)),
    }


def best_threshold(scores: list[tuple[float, bool]], true: int) -> dict[str, float]:
    """The model's most recall at precision >= PRECISION_GOAL, over every threshold."""
    right = wrong = 0
    best = {"recall": 0.0, "precision": 0.0, "threshold": 1.0}
    for probability, is_true in sorted(scores, key=lambda s: -s[0]):
        right, wrong = right + is_true, wrong + (not is_true)
        if right / (right + wrong) >= PRECISION_GOAL:
            best = {
                "recall": right / true,
                "precision": right / (right + wrong),
                "threshold": probability,
            }
    return best


def ceiling(signatures: dict[Any, tuple[Any, ...]], true: set[Any]) -> dict[str, float]:
    """The most recall any scoring of these comparison vectors reaches at precision >=
    PRECISION_GOAL: groups of pairs with the same vector, best share of duplicates
    first, taken while the running precision holds (pairs no block proposed are lost
    to every scoring)."""
    groups: dict[tuple[Any, ...], list[int]] = defaultdict(lambda: [0, 0])
    for pair, signature in signatures.items():
        groups[signature][0 if pair in true else 1] += 1
    right = wrong = 0
    for r, w in sorted(groups.values(), key=lambda g: -g[0] / (g[0] + g[1])):
        if (right + r) / (right + r + wrong + w) < PRECISION_GOAL:
            break
        right, wrong = right + r, wrong + w
    return {
        "recall": right / len(true),
        "precision": right / (right + wrong) if right + wrong else 0.0,
        "groups": len(groups),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tiny", action="store_true", help="a few seconds, for CI")
    parser.add_argument("--entities", type=int, default=100_000)
    parser.add_argument(
        "--attributes", action="store_true", help="entities with attributes (ATTRIBUTES)"
    )
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    report = run(3_000 if args.tiny else args.entities, attributes=args.attributes)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"{report['entities']:,} entities ({'with' if report['attributes'] else 'without'} "
        f"attributes), {report['seconds']:.0f} s, load average {load}"
    )
    print(
        f"blocked pairs {report['blocked_pairs']:,}; EM fitted on {report['fitted_pairs']:,}; "
        f"candidates {report['candidates']:,}; precision {report['precision']:.3f} / "
        f"recall {report['recall']:.3f}"
    )
    print("recall by kind:", {k: round(v, 3) for k, v in report["recall_by_kind"].items()})
    print("stored, by name level:", report["stored_by_name_level"])
    tuned = report["at_goal_precision"]
    print(
        f"the model at its best threshold ({tuned['threshold']:.3g}): recall "
        f"{tuned['recall']:.3f} at precision {tuned['precision']:.3f}"
    )
    top = report["ceiling"]
    print(
        f"ceiling over the comparison vectors ({top['groups']:,} groups): recall "
        f"{top['recall']:.3f} at precision {top['precision']:.3f} (>= {PRECISION_GOAL})"
    )


if __name__ == "__main__":
    main()
