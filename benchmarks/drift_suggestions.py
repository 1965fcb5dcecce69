"""Drift suggestions on a labelled set: do they know when they don't know?

    .venv/bin/python -m benchmarks.drift_suggestions            # the whole labelled set
    .venv/bin/python -m benchmarks.drift_suggestions --tiny     # every fourth item (smoke)
    .venv/bin/python -m benchmarks.drift_suggestions --show     # every item's top three

The standard library is the registry (its ``inverse`` names read backwards, as they are in
a fresh context); ``benchmarks.drift_labelled`` holds the observed names with example facts
and the expected answer. The ranking is ``memory.domain.drift_ranking`` with the real
all-MiniLM-L6-v2, exactly as ``GET drift/`` runs it. Measured, per style and overall:

- right first: where a registered target exists, the first suggestion is it, in the right
  direction (an inverse answer counts as the same as the target's registered inverse read
  forwards: ``managed_by`` is ``reports_to`` or the inverse of ``manages``);
- right and confident: the same, and marked confident;
- wrong direction offered: suggestions naming the expected target (or its equivalent) in
  the wrong direction, anywhere in the top three — must be 0 (an inverse is never offered
  as a plain alias);
- novel without a confident suggestion: for concepts the registry lacks.
No database is needed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections import defaultdict
from typing import Any

import numpy as np

from benchmarks.drift_labelled import LABELLED, LabelledDrift
from memory.domain.drift_ranking import (
    CONFIDENT_SCORE,
    CandidatePredicate,
    RankedSuggestion,
    Ranker,
    Vector,
)
from memory.domain.predicate_library import STANDARD_PREDICATES
from memory.domain.predicate_names import predicate_normalize


def library_candidates() -> list[CandidatePredicate]:
    return [
        CandidatePredicate(
            name=p.name,
            kind=p.kind,
            description=p.description,
            subject_types=p.subject_types,
            object_types=p.object_types,
            inverse=p.inverse,
            aliases=tuple(
                dict.fromkeys(a for a in (predicate_normalize(r) for r in p.aliases) if a != p.name)
            ),
        )
        for p in STANDARD_PREDICATES
    ]


def local_embed() -> Any:
    """The default local embedder (all-MiniLM-L6-v2 in int8, docs/decisions/0055), kept where
    the app keeps it; named here because this benchmark runs without Django's settings."""
    from benchmarks.search_common import ROOT
    from memory.infra.embeddings import LocalInt8Embedder

    embedder = LocalInt8Embedder(folder=ROOT / "var" / "models")

    def embed(texts: list[str]) -> list[Vector]:
        return [np.asarray(v, dtype=np.float64) for v in embedder.embed(texts)]

    return embed


def acceptable(item: LabelledDrift, candidates: list[CandidatePredicate]) -> set[tuple[str, bool]]:
    """(target, inverse) answers meaning the same as the label."""
    if item.target is None:
        return set()
    answers = {(item.target, item.inverse)}
    by_name = {c.name: c for c in candidates}
    inverse_name = by_name[item.target].inverse
    if inverse_name in by_name and inverse_name != item.target:
        answers.add((inverse_name, not item.inverse))
    return answers


def evaluate(items: list[LabelledDrift], show: bool = False) -> dict[str, Any]:
    candidates = library_candidates()
    started = time.perf_counter()
    ranker = Ranker(candidates, local_embed())
    load_s = time.perf_counter() - started
    per_style: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    timings: list[float] = []
    misses: list[str] = []
    for item in items:
        began = time.perf_counter()
        ranked = ranker.rank(item.name, item.examples)
        timings.append((time.perf_counter() - began) * 1000)
        stats = per_style[item.style]
        stats["items"] += 1
        good = acceptable(item, candidates)
        top = ranked[0] if ranked else None
        if show:
            print(item.style, item.name, "->", _brief(ranked))
        if item.target is None:
            confident = any(s.confident for s in ranked)
            stats["novel_unconfident"] += not confident
            if confident:
                misses.append(f"novel {item.name}: {_brief(ranked)}")
            continue
        first_right = top is not None and (top.name, top.inverse) in good
        stats["right_first"] += first_right
        stats["right_confident"] += first_right and top is not None and top.confident
        names = {name for name, _ in good}
        wrong_way = [s for s in ranked if s.name in names and (s.name, s.inverse) not in good]
        stats["wrong_direction_offered"] += len(wrong_way)
        stats["wrong_direction_confident"] += sum(s.confident for s in wrong_way)
        if not first_right or wrong_way:
            misses.append(f"{item.style} {item.name} (want {sorted(good)}): {_brief(ranked)}")
    return {
        "items": len(items),
        "confident_score": CONFIDENT_SCORE,
        "per_style": {k: dict(v) for k, v in sorted(per_style.items())},
        "totals": _totals(per_style),
        "rank_ms_median": round(statistics.median(timings), 2) if timings else 0.0,
        "registry_embed_s": round(load_s, 2),
        "misses": misses,
    }


def _totals(per_style: dict[str, dict[str, int]]) -> dict[str, Any]:
    with_target = [s for style, s in per_style.items() if style != "novel"]
    targets = sum(s["items"] for s in with_target)
    novel = per_style.get("novel", {})
    return {
        "right_first": _share(sum(s["right_first"] for s in with_target), targets),
        "right_and_confident": _share(sum(s["right_confident"] for s in with_target), targets),
        "wrong_direction_offered": sum(s["wrong_direction_offered"] for s in with_target),
        "wrong_direction_confident": sum(s["wrong_direction_confident"] for s in with_target),
        "inverse_right_first": _share(
            per_style.get("inverse", {}).get("right_first", 0),
            per_style.get("inverse", {}).get("items", 0),
        ),
        "novel_without_confident": _share(novel.get("novel_unconfident", 0), novel.get("items", 0)),
    }


def _share(part: int, whole: int) -> dict[str, Any]:
    return {"n": part, "of": whole, "share": round(part / whole, 3) if whole else None}


def _brief(ranked: list[RankedSuggestion]) -> str:
    return ", ".join(
        f"{'inverse of ' if s.inverse else ''}{s.name} {s.score:.2f}{'*' if s.confident else ''}"
        for s in ranked
    )


def markdown(result: dict[str, Any]) -> str:
    rows = [
        "| style | items | right first | right and confident | wrong direction offered "
        "| novel without a confident suggestion |",
        "|---|---|---|---|---|---|",
    ]
    for style, s in result["per_style"].items():
        if style == "novel":
            rows.append(
                f"| novel | {s['items']} | – | – | – | "
                f"{s.get('novel_unconfident', 0)}/{s['items']} |"
            )
        else:
            rows.append(
                f"| {style} | {s['items']} | {s.get('right_first', 0)}/{s['items']} | "
                f"{s.get('right_confident', 0)}/{s['items']} | "
                f"{s.get('wrong_direction_offered', 0)} | – |"
            )
    t = result["totals"]
    rows.append(
        f"| **all with a target** | {t['right_first']['of']} | {t['right_first']['share']:.1%} | "
        f"{t['right_and_confident']['share']:.1%} | {t['wrong_direction_offered']} | "
        f"{t['novel_without_confident']['share']:.1%} (novel) |"
    )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tiny", action="store_true", help="every fourth item: a smoke test")
    parser.add_argument("--show", action="store_true", help="print every item's top three")
    args = parser.parse_args()
    items = list(LABELLED[::4] if args.tiny else LABELLED)
    result = evaluate(items, show=args.show)
    result["machine"] = f"{platform.node()} load {os.getloadavg()[0]:.2f}"
    print(json.dumps(result, indent=2))
    print()
    print(markdown(result))


if __name__ == "__main__":
    main()
