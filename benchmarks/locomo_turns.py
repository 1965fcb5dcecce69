"""LoCoMo turns through the API: evidence recall of turn search, next to an in-memory
reference computed in the same run.

    .venv/bin/python -m benchmarks.locomo_turns                    # 10 conversations, 5,882 turns
    .venv/bin/python -m benchmarks.locomo_turns --conversations 3  # the first three only
    .venv/bin/python -m benchmarks.locomo_turns --tiny             # one conversation, 3 sessions

Every turn goes in through ``POST memories`` (``infer: "none"``, ``wait: true``) with its
speaker, its session's date and time as ``said_at``, the conversation as ``thread`` and the
``dia_id`` as ``ref``; a photo's caption is part of the text ("[shares a photo: …]"). The
worker's drain (``embeddings_drain``) then embeds the backlog (timed). Each question of
categories 1–4 searches its own conversation (``POST search``, ``target: "turns"``,
``thread``, k = 20) in every mode; a result's ``meta.ref`` is compared with the question's
``evidence``: recall@5/10/20 (share of the evidence found, averaged over the questions
with evidence) and hit@10 (any of it in the top 10), with the request's wall time through
the in-process API client (p50/p95).

Reference, same run: per conversation, ``bm25s`` (method lucene, English stemmer and
stopwords), exact all-MiniLM-L6-v2 cosine and their RRF (k = 60), over each turn as
``"(session date) Speaker: text"`` — the form the data README's reference figures were
measured on (0.574 / 0.488 / 0.597 recall@10 on the full set). Throwaway database.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import re
import statistics
import time
import zipfile
from dataclasses import dataclass
from typing import Any

import numpy as np
from tqdm import tqdm

from benchmarks.datasets import dataset, dataset_required
from benchmarks.search_common import (
    bench_database,
    latency_summary,
    machine_line,
    markdown_table,
)

MODES = ["bm25", "vector", "hybrid", "hybrid_graph"]
K = 20
RRF_K = 60
TINY_SESSIONS = 3


@dataclass(frozen=True)
class TurnRow:
    thread: str
    ref: str
    speaker: str
    text: str
    said_at: dt.datetime | None
    session_date: str


@dataclass(frozen=True)
class Question:
    thread: str
    text: str
    evidence: frozenset[str]
    category: int


def _session_time(raw: str) -> dt.datetime | None:
    """``1:56 pm on 8 May, 2023`` → a UTC date-time."""
    try:
        parsed = dt.datetime.strptime(raw.strip(), "%I:%M %p on %d %B, %Y")
    except ValueError:
        return None
    return parsed.replace(tzinfo=dt.UTC)


def load(*, tiny: bool, conversations: int | None = None) -> tuple[list[TurnRow], list[Question]]:
    turns: list[TurnRow] = []
    questions: list[Question] = []
    with zipfile.ZipFile(dataset("locomo") / "locomo10.zip") as archive:
        names = sorted(n for n in archive.namelist() if re.search(r"locomo10_v2/\d+\.json$", n))
        if tiny:
            names = names[:1]
        elif conversations is not None:
            names = names[:conversations]
        for name in names:
            conversation = json.loads(archive.read(name))
            thread = "conv-" + name.rsplit("/", 1)[1].removesuffix(".json")
            sessions = sorted(
                int(m.group(1))
                for key in conversation
                if (m := re.fullmatch(r"session_(\d+)", key))
            )
            if tiny:
                sessions = sessions[:TINY_SESSIONS]
            for number in sessions:
                when = conversation.get(f"session_{number}_date_time", "")
                for turn in conversation[f"session_{number}"]:
                    text = turn["text"]
                    if turn.get("blip_caption"):
                        text += f" [shares a photo: {turn['blip_caption']}]"
                    turns.append(
                        TurnRow(
                            thread=thread,
                            ref=turn["dia_id"],
                            speaker=turn["speaker"],
                            text=text,
                            said_at=_session_time(when),
                            session_date=when,
                        )
                    )
            known = {t.ref for t in turns if t.thread == thread}
            for qa in conversation["qa"]:
                evidence = frozenset(e.strip() for e in qa.get("evidence") or [])
                if qa.get("category") not in (1, 2, 3, 4):
                    continue
                if tiny and not (evidence and evidence <= known):
                    continue
                questions.append(
                    Question(
                        thread=thread,
                        text=qa["question"],
                        evidence=evidence,
                        category=int(qa["category"]),
                    )
                )
    return turns, questions


def _scores(ranked: list[str], evidence: frozenset[str]) -> dict[str, float]:
    found = {k: len(evidence & set(ranked[:k])) / len(evidence) for k in (5, 10, 20)}
    return {
        "recall@5": found[5],
        "recall@10": found[10],
        "recall@20": found[20],
        "hit@10": 1.0 if evidence & set(ranked[:10]) else 0.0,
    }


def _mean(rows: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.fmean(r[key] for r in rows) for key in rows[0]} if rows else {}


def _rrf(*rankings: list[str]) -> list[str]:
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, ref in enumerate(ranking, start=1):
            fused[ref] = fused.get(ref, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(fused, key=lambda ref: (-fused[ref], ref))


def reference(turns: list[TurnRow], questions: list[Question]) -> dict[str, list[dict[str, float]]]:
    """bm25s + exact cosine + RRF per conversation, in memory."""
    import bm25s
    import Stemmer

    from memory.infra.embeddings import embed_texts

    stemmer = Stemmer.Stemmer("english")
    texts = [f"({t.session_date}) {t.speaker}: {t.text}" for t in turns]
    vectors = np.array(embed_texts(texts), dtype=np.float32)
    by_thread: dict[str, list[int]] = {}
    for i, t in enumerate(turns):
        by_thread.setdefault(t.thread, []).append(i)
    indexes: dict[str, Any] = {}
    for thread, rows in by_thread.items():
        retriever = bm25s.BM25(method="lucene")
        tokens = bm25s.tokenize(
            [texts[i] for i in rows], stopwords="en", stemmer=stemmer, show_progress=False
        )
        retriever.index(tokens, show_progress=False)
        indexes[thread] = retriever
    query_vectors = np.array(embed_texts([q.text for q in questions]), dtype=np.float32)
    out: dict[str, list[dict[str, float]]] = {"bm25s": [], "cosine": [], "rrf": []}
    for q, qv in zip(questions, query_vectors, strict=True):
        if not q.evidence:
            continue
        rows = by_thread[q.thread]
        refs = [turns[i].ref for i in rows]
        tokens = bm25s.tokenize([q.text], stopwords="en", stemmer=stemmer, show_progress=False)
        k = min(K, len(rows))
        docs, _ = indexes[q.thread].retrieve(tokens, k=k, show_progress=False)
        lexical = [refs[int(d)] for d in docs[0]]
        similarity = vectors[rows] @ qv
        order = np.argsort(-similarity, kind="stable")[:k]
        dense = [refs[int(i)] for i in order]
        out["bm25s"].append(_scores(lexical, q.evidence))
        out["cosine"].append(_scores(dense, q.evidence))
        out["rrf"].append(_scores(_rrf(lexical, dense)[:K], q.evidence))
    return out


def _write_turns(
    client: Any, base: str, turns: list[TurnRow], *, scope_per_thread: bool = False
) -> tuple[float, float, Any]:
    """Every turn through ``POST memories``, then the worker's drain: (write s, drain s, drain).
    With ``scope_per_thread``, each conversation in a scope of its own (``locomo/conv-26``)."""
    from memory.services.vectors import embeddings_drain

    started = time.perf_counter()
    for t in tqdm(turns, desc="memories", unit="turn"):
        response = client.post(
            f"{base}/memories",
            {
                "text": t.text,
                "scope": f"locomo/{t.thread}" if scope_per_thread else "locomo",
                "infer": "none",
                "wait": True,
                "speaker": t.speaker,
                "said_at": t.said_at.isoformat() if t.said_at else None,
                "thread": t.thread,
                "ref": t.ref,
            },
            format="json",
        )
        assert response.status_code == 200, response.content
    write_s = time.perf_counter() - started
    started = time.perf_counter()
    drain = embeddings_drain()
    drain_s = time.perf_counter() - started
    assert drain.finished and drain.written["turns"] == len(turns), drain
    return write_s, drain_s, drain


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tiny", action="store_true", help="one conversation's first sessions")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    parser.add_argument(
        "--reuse", action="store_true", help="search a database kept by --keep (no writes)"
    )
    parser.add_argument("--no-reference", action="store_true", help="skip the in-memory reference")
    parser.add_argument("--conversations", type=int, help="only the first N conversations")
    parser.add_argument(
        "--modes", default=",".join(MODES), help="comma-separated search modes to measure"
    )
    args = parser.parse_args()
    dataset_required("locomo", tiny=args.tiny)
    modes = [m for m in args.modes.split(",") if m]
    turns, questions = load(tiny=args.tiny, conversations=args.conversations)
    answerable = [q for q in questions if q.evidence]

    with bench_database("md_bench_locomo_turns", keep=args.keep or args.reuse, reuse=args.reuse):
        from rest_framework.test import APIClient

        from memory.infra.embeddings import embed_texts
        from memory.models import Role
        from memory.services.contexts import context_create
        from memory.services.tokens import token_issue

        logging.getLogger("memory.ingest").setLevel(logging.WARNING)  # a line per run otherwise
        embed_texts(["warm up"])  # the model loads outside every timing
        from django.contrib.auth import get_user_model

        from memory.models import Context, ContextMembership

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

        write_s = drain_s = 0.0
        drain = None
        if not args.reuse:
            write_s, drain_s, drain = _write_turns(client, base, turns)

        rows: list[list[Any]] = []
        for mode in modes:
            scored: list[dict[str, float]] = []
            ms: list[float] = []
            for q in tqdm(answerable, desc=mode, unit="question"):
                started = time.perf_counter()
                response = client.post(
                    f"{base}/search",
                    {"query": q.text, "mode": mode, "k": K, "target": "turns", "thread": q.thread},
                    format="json",
                )
                ms.append((time.perf_counter() - started) * 1000)
                assert response.status_code == 200, response.content
                ranked = [r["meta"]["ref"] for r in response.json()["results"]]
                scored.append(_scores(ranked, q.evidence))
            figures = _mean(scored)
            latency = latency_summary(ms)
            rows.append(
                [
                    f"API {mode}",
                    figures["recall@5"],
                    figures["recall@10"],
                    figures["recall@20"],
                    figures["hit@10"],
                    latency["p50"],
                    latency["p95"],
                ]
            )
        ref = {} if args.no_reference else reference(turns, questions)

    for name, scored in ref.items():
        figures = _mean(scored)
        rows.append(
            [
                f"in-memory {name} (reference)",
                figures["recall@5"],
                figures["recall@10"],
                figures["recall@20"],
                figures["hit@10"],
                "—",
                "—",
            ]
        )
    threads = len({t.thread for t in turns})
    print(
        f"LoCoMo: {threads} conversations, {len(turns)} turns, {len(questions)} questions of "
        f"categories 1–4 ({len(answerable)} with evidence)."
    )
    print(machine_line())
    if drain is not None:
        print(
            f"Writes through POST memories: {write_s:.0f} s ({len(turns) / write_s:.0f} turns/s);"
            f" embedding drain: {drain_s:.1f} s, {drain.model_calls} model calls "
            f"({len(turns) / drain_s:.0f} turns/s).\n"
        )
    print(
        markdown_table(
            ["search", "recall@5", "recall@10", "recall@20", "hit@10", "p50 ms", "p95 ms"], rows
        )
    )


if __name__ == "__main__":
    main()
