"""Relevance on BEIR SciFact (test split): nDCG@10 and recall@100 for every search mode.

    .venv/bin/python -m benchmarks.search_scifact          # 5,183 abstracts, 300 queries
    .venv/bin/python -m benchmarks.search_scifact --tiny   # 500 abstracts, their queries
    .venv/bin/python -m benchmarks.search_scifact --keep   # then --reuse: measure it again

The corpus goes in through ``document_create`` (title + abstract → chunks, postings,
RAKE keywords), vectors come from the real local model (all-MiniLM-L6-v2), and every
query goes through ``memory.selectors.search.search`` over chunks with k = 300. A
document's rank is that of its best chunk (duplicates dropped), then nDCG@10 (gain =
qrel score, log2 discount, as pytrec_eval / BEIR) and recall@100 are averaged over the
queries. Same run, same tokens: ``bm25s`` (method lucene) over our analyzer's chunk
tokens, as a check that the SQL BM25 ranks the same. Throwaway database, dropped after
(``--keep`` keeps it for ``--reuse``).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections import defaultdict
from typing import Any

from tqdm import tqdm

from benchmarks.datasets import dataset, dataset_required
from benchmarks.search_common import (
    bench_database,
    latency_summary,
    machine_line,
    markdown_table,
)

MODES = ["bm25", "vector", "hybrid", "hybrid_graph"]
K_CHUNKS = 300
PUBLISHED = [
    ("BM25, BEIR paper (Elasticsearch)", 0.665, None),
    ("BM25, Anserini flat (title + text)", 0.6789, 0.9253),
]


def load(
    limit: int | None,
) -> tuple[list[dict[str, str]], dict[str, str], dict[str, dict[str, int]]]:
    root = dataset("scifact")
    with (root / "corpus.jsonl").open() as lines:
        corpus = [json.loads(line) for line in lines][:limit]
    with (root / "queries.jsonl").open() as lines:
        queries = {row["_id"]: row["text"] for row in map(json.loads, lines)}
    known = {doc["_id"] for doc in corpus}
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    with (root / "qrels" / "test.tsv").open() as lines:
        next(lines)
        for line in lines:
            query_id, doc_id, score = line.split()
            qrels[query_id][doc_id] = int(score)
    if limit is not None:  # keep the queries whose relevant documents are all loaded
        qrels = defaultdict(dict, {q: r for q, r in qrels.items() if set(r) <= known})
    return corpus, queries, qrels


def ndcg_at_10(ranked: list[str], relevant: dict[str, int]) -> float:
    dcg = sum(relevant.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted(relevant.values(), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at_100(ranked: list[str], relevant: dict[str, int]) -> float:
    wanted = {d for d, g in relevant.items() if g > 0}
    return len(wanted & set(ranked[:100])) / len(wanted) if wanted else 0.0


def _documents(chunk_ids: list[int], doc_of_chunk: dict[int, str]) -> list[str]:
    ranked: list[str] = []
    for chunk_id in chunk_ids:
        doc = doc_of_chunk[chunk_id]
        if doc not in ranked:
            ranked.append(doc)
    return ranked


def _bm25s_reference(
    doc_of_chunk: dict[int, str], queries: dict[str, str], qrels: dict[str, dict[str, int]]
) -> tuple[float, float]:
    import bm25s
    import numpy as np

    from memory.models import Chunk
    from memory.search.analyzer import analyze
    from memory.search.texts import chunk_index_text

    chunks = list(Chunk.objects.select_related("document").order_by("pk"))
    model = bm25s.BM25(method="lucene", k1=1.2, b=0.75)
    model.index(
        [analyze(chunk_index_text(title=c.document.title, text=c.text)) for c in chunks],
        show_progress=False,
    )
    ids = np.array([c.pk for c in chunks])
    ndcg, recall = [], []
    for query_id, relevant in qrels.items():
        scores = model.get_scores(analyze(queries[query_id]))
        order = np.lexsort((ids, -scores))[:K_CHUNKS]
        ranked = _documents([int(ids[i]) for i in order if scores[i] > 0], doc_of_chunk)
        ndcg.append(ndcg_at_10(ranked, relevant))
        recall.append(recall_at_100(ranked, relevant))
    return statistics.fmean(ndcg), statistics.fmean(recall)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tiny", action="store_true", help="500 abstracts and their queries")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    parser.add_argument(
        "--reuse", action="store_true", help="measure the corpus an earlier --keep run loaded"
    )
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated modes")
    args = parser.parse_args()
    dataset_required("scifact", tiny=args.tiny)
    corpus, queries, qrels = load(500 if args.tiny else None)
    modes = args.modes.split(",")

    name = "md_bench_search_scifact_tiny" if args.tiny else "md_bench_search_scifact"
    with bench_database(name, keep=args.keep or args.reuse, reuse=args.reuse):
        from memory.domain.access import system_access
        from memory.models import Chunk, Context
        from memory.selectors.search import search

        context = Context.objects.filter(slug="bench-scifact").first()
        if args.reuse and context is not None:
            import_s = embed_s = 0.0
        else:
            context, import_s, embed_s = _load_corpus(corpus)
        access = system_access(context)
        doc_of_chunk = {
            pk: meta["id"] for pk, meta in Chunk.objects.values_list("pk", "document__metadata")
        }

        rows: list[list[Any]] = []
        for mode in modes:
            ndcg, recall, ms = [], [], []
            for query_id, relevant in tqdm(qrels.items(), desc=mode, unit="query"):
                response = search(access=access, query=queries[query_id], mode=mode, k=K_CHUNKS)
                ranked = _documents([r.id for r in response.results], doc_of_chunk)
                ndcg.append(ndcg_at_10(ranked, relevant))
                recall.append(recall_at_100(ranked, relevant))
                ms.append(response.took_ms)
            rows.append(
                [mode, statistics.fmean(ndcg), statistics.fmean(recall), latency_summary(ms)["p50"]]
            )
        ref_ndcg, ref_recall = _bm25s_reference(doc_of_chunk, queries, qrels)
        chunks = len(doc_of_chunk)

    print(f"SciFact test: {len(corpus)} abstracts → {chunks} chunks, {len(qrels)} queries.")
    print(f"{machine_line()}")
    print(f"Import {import_s:.0f} s (postings + keywords), embedding {embed_s:.0f} s.\n")
    table: list[list[Any]] = [
        *rows,
        ["bm25s lucene, same tokens (reference)", ref_ndcg, ref_recall, "—"],
    ]
    for label, their_ndcg, their_recall in PUBLISHED:
        shown = their_recall if their_recall is not None else "—"
        table.append([f"published: {label}", their_ndcg, shown, "—"])
    print(markdown_table(["mode", "nDCG@10", "recall@100", f"p50 ms (k={K_CHUNKS})"], table))
    scores = {row[0]: row[1] for row in rows}
    if {"bm25", "vector", "hybrid"} <= set(scores):
        print(
            f"\nGoals: bm25 ≥ 0.665 → {scores['bm25']:.4f}; hybrid ≥ max(bm25, vector) − 0.01 "
            f"= {max(scores['bm25'], scores['vector']) - 0.01:.4f} → {scores['hybrid']:.4f}"
        )
    if {"hybrid", "hybrid_graph"} <= set(scores):
        print(
            f"hybrid_graph ≥ hybrid − 0.01 = {scores['hybrid'] - 0.01:.4f} → "
            f"{scores['hybrid_graph']:.4f}"
        )


def _load_corpus(corpus: list[dict[str, str]]) -> tuple[Any, float, float]:
    """The abstracts through ``document_create``, then their vectors: the context and the
    seconds each part took."""
    from memory.domain.access import system_access
    from memory.services.contexts import context_create
    from memory.services.ingest.documents import document_create, documents_embed

    context = context_create(slug="bench-scifact", name="SciFact")
    access = system_access(context)
    started = time.perf_counter()
    ids = [
        document_create(
            access=access,
            title=doc["title"],
            text=doc["text"],
            scope="public",
            metadata={"id": doc["_id"]},
            embed_later=True,
        ).pk
        for doc in tqdm(corpus, desc="importing", unit="doc")
    ]
    import_s = time.perf_counter() - started
    started = time.perf_counter()
    with tqdm(desc="embedding", unit="chunk") as bar:

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        documents_embed(document_ids=ids, on_progress=progress)
    return context, import_s, time.perf_counter() - started


if __name__ == "__main__":
    main()
