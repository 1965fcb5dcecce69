"""LoCoMo through ``POST context``: is the evidence turn inside the 1,500-token memory
block? Beside it, in the same run, the share ``POST search`` puts in its top 10.

    .venv/bin/python -m benchmarks.locomo_context                    # all 10 conversations
    .venv/bin/python -m benchmarks.locomo_context --conversations 2  # the first two only
    .venv/bin/python -m benchmarks.locomo_context --tiny             # one conversation, 3 sessions

The turns go in as ``benchmarks.locomo_turns`` writes them (``POST memories``, ``infer:
"none"``), each conversation in a scope of its own (``locomo/conv-26``) so a block can be
asked for one conversation with the request's ``scope`` — the context request has no
thread filter. Each question of categories 1–4 with evidence: ``POST context`` (query,
``scope: ["locomo/conv-N"]``, 1,500 tokens, hybrid) — the share of its evidence turns
(``meta.ref``) among the block's passages — and ``POST search`` (hybrid, ``target:
"turns"``, that ``thread``, k = 10) — its recall@10. Throwaway database.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time

from tqdm import tqdm

from benchmarks.datasets import dataset_required
from benchmarks.locomo_turns import _write_turns, load
from benchmarks.search_common import bench_database, latency_summary, machine_line, markdown_table

BUDGET = 1500


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tiny", action="store_true", help="one conversation's first sessions")
    parser.add_argument("--conversations", type=int, help="only the first N conversations")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    parser.add_argument("--reuse", action="store_true", help="ask a database kept by --keep")
    args = parser.parse_args()
    dataset_required("locomo", tiny=args.tiny)
    turns, questions = load(tiny=args.tiny, conversations=args.conversations)
    answerable = [q for q in questions if q.evidence]

    with bench_database("md_bench_locomo_context", keep=args.keep or args.reuse, reuse=args.reuse):
        from django.contrib.auth import get_user_model
        from rest_framework.test import APIClient

        from memory.infra.embeddings import embed_texts
        from memory.models import Context, ContextMembership, Role
        from memory.services.contexts import context_create
        from memory.services.tokens import token_issue

        logging.getLogger("memory.ingest").setLevel(logging.WARNING)
        embed_texts(["warm up"])
        if args.reuse:
            context = Context.objects.get(slug="bench-locomo")
            user = get_user_model().objects.get(username="bench")
        else:
            context = context_create(slug="bench-locomo", name="LoCoMo")
            user = get_user_model().objects.create_user(username="bench", password="x-bench-only")
            ContextMembership.objects.create(
                user=user, context=context, role=Role.ADMIN, grants=["read,write:*"]
            )
        raw = token_issue(user=user, context=context, grants=["read,write:*"]).raw
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
        base = f"/api/v1/contexts/{context.slug}"
        if not args.reuse:
            _write_turns(client, base, turns, scope_per_thread=True)

        block_recall: list[float] = []
        search_recall: list[float] = []
        block_ms: list[float] = []
        search_ms: list[float] = []
        in_block: list[int] = []
        for q in tqdm(answerable, desc="questions", unit="question"):
            started = time.perf_counter()
            response = client.post(
                f"{base}/context",
                {"query": q.text, "scope": [f"locomo/{q.thread}"], "budget_tokens": BUDGET},
                format="json",
            )
            block_ms.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, response.content
            passages = [p for p in response.json()["passages"] if p["type"] == "turn"]
            refs = {p["meta"]["ref"] for p in passages}
            in_block.append(len(passages))
            block_recall.append(len(q.evidence & refs) / len(q.evidence))
            started = time.perf_counter()
            response = client.post(
                f"{base}/search",
                {"query": q.text, "target": "turns", "thread": q.thread, "k": 10},
                format="json",
            )
            search_ms.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, response.content
            top = {r["meta"]["ref"] for r in response.json()["results"]}
            search_recall.append(len(q.evidence & top) / len(q.evidence))

    threads = len({t.thread for t in turns})
    print(
        f"LoCoMo: {threads} conversations, {len(turns)} turns, {len(answerable)} questions "
        f"of categories 1–4 with evidence. {machine_line()}"
    )
    print()
    blocks, searches = latency_summary(block_ms), latency_summary(search_ms)
    print(
        markdown_table(
            ["through the API", "evidence recall", "turns per answer (median)", "p50 ms", "p95 ms"],
            [
                [
                    f"POST context, {BUDGET} tokens",
                    statistics.fmean(block_recall),
                    statistics.median(in_block),
                    blocks["p50"],
                    blocks["p95"],
                ],
                [
                    "POST search, top 10",
                    statistics.fmean(search_recall),
                    10,
                    searches["p50"],
                    searches["p95"],
                ],
            ],
        )
    )


if __name__ == "__main__":
    main()
