"""How fast the worker drains the embedding backlog of a corpus import, against the model
alone on the same texts, measured side by side in one run.

    .venv/bin/python -m benchmarks.embedding_backlog                # 500 SciFact abstracts
    .venv/bin/python -m benchmarks.embedding_backlog --docs 5183    # the whole corpus
    .venv/bin/python -m benchmarks.embedding_backlog --tiny         # 30 abstracts, for CI

SciFact abstracts go in through ``POST documents`` (no ``wait``: chunks, postings and
keywords are written, the vectors left to the worker, as in production). Then, in turn:
the model alone (``embed_texts`` over the very texts the backlog holds, in calls of
``EMBED_BATCH``), the worker's drain (``embeddings_drain``: reading the rows, one model call
per batch across documents, one UPDATE per target and batch), and the model alone again.
The ratio is the drain's rows/s over the median of the two model-alone runs (goal:
≥ 0.8). Throwaway database.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from tqdm import tqdm

from benchmarks.datasets import dataset, dataset_required
from benchmarks.search_common import bench_database, machine_line, markdown_table


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=500, help="SciFact abstracts to import")
    parser.add_argument("--tiny", action="store_true", help="30 abstracts, for CI")
    args = parser.parse_args()
    dataset_required("scifact", tiny=args.tiny)
    limit = 30 if args.tiny else args.docs
    with (dataset("scifact") / "corpus.jsonl").open() as lines:
        corpus = [json.loads(line) for _, line in zip(range(limit), lines, strict=False)]

    with bench_database("md_bench_embedding_backlog"):
        from rest_framework.test import APIClient

        from memory.infra.embeddings import embed_texts
        from memory.models import Chunk, Keyword
        from memory.search.texts import chunk_text_for_embedding
        from memory.services.contexts import context_create
        from memory.services.vectors import EMBED_BATCH, embedding_backlog, embeddings_drain

        context = context_create(slug="bench-backlog", name="Backlog")
        embed_texts(["warm up"])  # the model loads outside every timing
        client = APIClient()
        from django.contrib.auth import get_user_model

        from memory.models import ContextMembership, Role
        from memory.services.tokens import token_issue

        user = get_user_model().objects.create_user(username="bench", password="x-bench-only")
        ContextMembership.objects.create(
            user=user, context=context, role=Role.ADMIN, grants=["read,write:*"]
        )
        raw = token_issue(user=user, context=context, grants=["read,write:*"]).raw
        client.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
        started = time.perf_counter()
        for doc in tqdm(corpus, desc="POST documents", unit="doc"):
            response = client.post(
                f"/api/v1/contexts/{context.slug}/documents",
                {"title": doc["title"], "text": doc["text"], "scope": "public"},
                format="json",
            )
            assert response.status_code == 201, response.content
        import_s = time.perf_counter() - started
        backlog = embedding_backlog(context=context)
        chunks = Chunk.objects.filter(context=context).select_related("document")
        texts = [chunk_text_for_embedding(c) for c in chunks.order_by("pk")]
        texts += list(
            Keyword.objects.filter(context=context).order_by("pk").values_list("text", flat=True)
        )
        assert len(texts) == sum(backlog.values()), (len(texts), backlog)

        def model_alone() -> float:
            started = time.perf_counter()
            for start in range(0, len(texts), EMBED_BATCH):
                embed_texts(texts[start : start + EMBED_BATCH])
            return len(texts) / (time.perf_counter() - started)

        before = model_alone()
        started = time.perf_counter()
        report = embeddings_drain(context=context)
        drain_s = time.perf_counter() - started
        after = model_alone()
        assert not any(embedding_backlog(context=context).values())
        drained = report.total / drain_s
        model = statistics.median([before, after])

    print(
        f"{len(corpus)} SciFact abstracts through POST documents in {import_s:.0f} s: "
        f"backlog {backlog['chunks']} chunks + {backlog['keywords']} keywords = {len(texts)} "
        f"texts. {machine_line()}\n"
    )
    print(
        markdown_table(
            ["measure", "texts/s", "ratio to the model alone"],
            [
                ["model alone, before", before, before / model],
                ["worker drain (embeddings_drain)", drained, drained / model],
                ["model alone, after", after, after / model],
            ],
        )
    )
    print(
        f"\nDrain: {report.total} rows in {drain_s:.1f} s, {report.model_calls} model calls. "
        f"Goal ≥ 0.8 × the model alone → {drained / model:.2f}."
    )


if __name__ == "__main__":
    main()
