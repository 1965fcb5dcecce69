"""BM25 with and without MaxScore pruning on the same corpus and queries, in one run.

    .venv/bin/python -m benchmarks.search_bm25_pruning --reuse  # search_scale --keep's corpus
    .venv/bin/python -m benchmarks.search_bm25_pruning          # generates 100k chunks (long)
    .venv/bin/python -m benchmarks.search_bm25_pruning --tiny   # 2k chunks: a smoke test

Each query runs through ``memory.search.bm25.bm25_rank`` twice, alternating: pruned (as
served) and with pruning switched off (``bm25_pruning.MAXSCORE_MIN_POSTINGS`` out of
reach), unfiltered and with a scope filter that leaves 10% of the chunks, k = 10 and
k = 100. Reports p50/p95 of each, the speed-up, how many queries took the pruned path
(and how many of those merged their probed lists), and how many rankings differ (ids
compared in order; scores must agree to 1e-9 relative).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np

from benchmarks.datasets import dataset_required
from benchmarks.search_common import bench_database, latency_summary, machine_line, markdown_table
from benchmarks.search_scale import _queries
from benchmarks.search_scale_data import generate, load_existing, team_scope


def _compare(context_id: int, queries: list[str], visible: Any, limit: int) -> dict[str, Any]:
    import memory.search.bm25 as bm25
    import memory.search.bm25_pruning as pruning
    from memory.search.models import Target

    served = pruning.MAXSCORE_MIN_POSTINGS
    taken = {"pruned": 0, "merged": 0}
    original, original_plan = pruning.maxscore_rank, pruning._probe_plan

    def counting(**kwargs: Any) -> Any:
        hits = original(**kwargs)
        taken["pruned"] += hits is not None
        return hits

    def planning(terms: Any, theta: float) -> Any:
        plan = original_plan(terms, theta)
        taken["merged"] += plan is not None and plan.merged
        return plan

    def rank(query: str) -> tuple[float, list[Any]]:
        started = time.perf_counter()
        hits = bm25.bm25_rank(
            context_id=context_id,
            target=Target.CHUNK,
            query=query,
            visible_sql=visible,
            limit=limit,
        )
        return (time.perf_counter() - started) * 1000, hits

    pruned_ms, full_ms, differ = [], [], 0
    pruning.maxscore_rank = counting  # type: ignore[assignment]
    pruning._probe_plan = planning  # type: ignore[assignment]
    try:
        for query in queries:
            pruning.MAXSCORE_MIN_POSTINGS = served
            ms, pruned = rank(query)
            pruned_ms.append(ms)
            pruning.MAXSCORE_MIN_POSTINGS = 10**15
            ms, full = rank(query)
            full_ms.append(ms)
            same_ids = [h.ref_id for h in pruned] == [h.ref_id for h in full]
            close = all(
                abs(a.score - b.score) <= 1e-9 * abs(b.score)
                for a, b in zip(pruned, full, strict=False)
            )
            differ += not (same_ids and close)
    finally:
        pruning.MAXSCORE_MIN_POSTINGS = served
        pruning.maxscore_rank = original  # type: ignore[assignment]
        pruning._probe_plan = original_plan  # type: ignore[assignment]
    pruned_stats, full_stats = latency_summary(pruned_ms), latency_summary(full_ms)
    return {
        "pruned": pruned_stats,
        "unpruned": full_stats,
        "speedup_p50": full_stats["p50"] / pruned_stats["p50"],
        "speedup_p95": full_stats["p95"] / pruned_stats["p95"],
        "queries_pruned": taken["pruned"],
        "queries_merged": taken["merged"],
        "rankings_differing": differ,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tiny", action="store_true", help="2k chunks, 20 queries")
    parser.add_argument("--reuse", action="store_true", help="measure a kept search_scale corpus")
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--probe-cost", type=int, help="override bm25_pruning.PROBE_COST (to sweep the pricing)"
    )
    parser.add_argument(
        "--rare-share", type=float, help="override bm25_pruning.RARE_POSTING_SHARE (to sweep it)"
    )
    parser.add_argument(
        "--merge-cost", type=float, help="override bm25_pruning.MERGE_COST (to sweep it)"
    )
    args = parser.parse_args()
    if not args.reuse:  # the generated corpus draws its words from SciFact
        dataset_required("scifact", tiny=args.tiny)
    name = "md_bench_bm25_tiny" if args.tiny else "md_bench_search_scale"
    if args.tiny:
        args.chunks, args.queries = 2000, 20
    # A generated full corpus is kept (as search_scale --keep leaves it) for later --reuse.
    with bench_database(name, keep=not args.tiny, reuse=args.reuse) as url:
        import memory.search.bm25_pruning as pruning
        from memory.kernel.scopes import Grants
        from memory.search.bm25 import corpus_visible_sql

        if args.probe_cost is not None:
            pruning.PROBE_COST = args.probe_cost
        if args.rare_share is not None:
            pruning.RARE_POSTING_SHARE = args.rare_share
        if args.merge_cost is not None:
            pruning.MERGE_COST = args.merge_cost
        gen = (
            load_existing()
            if args.reuse
            else generate(url=url, chunks=args.chunks, entities=10, facts=10, corpus="topics")
        )
        queries = _queries(gen, args.queries, np.random.default_rng(11))
        team = corpus_visible_sql(Grants.from_strings([f"read:{team_scope(3)}"]).read_q())
        report: dict[str, Any] = {
            "machine": machine_line(),
            "chunks": len(gen.chunk_ids),
            "pricing": {
                "probe_cost": pruning.PROBE_COST,
                "rare_share": pruning.RARE_POSTING_SHARE,
                "merge_cost": pruning.MERGE_COST,
            },
        }
        for label, visible, limit in [
            ("k=10", ("TRUE", []), 10),
            ("k=10, 10% scope filter", team, 10),
            ("k=100", ("TRUE", []), 100),
        ]:
            report[label] = _compare(gen.context_id, queries, visible, limit)
    print(json.dumps(report, indent=1, default=float))
    rows = [
        [
            label,
            r["pruned"]["p50"],
            r["pruned"]["p95"],
            r["unpruned"]["p50"],
            r["unpruned"]["p95"],
            f"{r['speedup_p50']:.2f}× / {r['speedup_p95']:.2f}×",
            f"{r['queries_pruned']} ({r['queries_merged']} merged)",
            r["rankings_differing"],
        ]
        for label, r in report.items()
        if isinstance(r, dict) and "pruned" in r
    ]
    header = ["case", "pruned p50", "p95", "unpruned p50", "p95", "speed-up p50 / p95"]
    print(markdown_table([*header, "queries pruned", "rankings differing"], rows))


if __name__ == "__main__":
    main()
