"""The drift page's suggestions: what a page of drift names costs cold, again, and shifted.

    .venv/bin/python -m benchmarks.drift_page_cache           # pages of 20 names, 3 rounds
    .venv/bin/python -m benchmarks.drift_page_cache --tiny    # pages of 5 names, 1 round
    .venv/bin/python -m benchmarks.drift_page_cache --rounds 1

Besides milliseconds (which a shared machine's load moves a lot) it counts the texts sent
to the model for each load, which no load can move.

The drift page ranks one page of names (``memory.selectors.drift``): the registry's texts,
the names' words, and each name's example sentences read both ways against its shortlist,
all embedded with the real all-MiniLM-L6-v2. Measured for three loads in a row — cold
(nothing cached), the same page again, and the page shifted by one name (the first was
aliased, the next comes in) — with the vector cache the selector uses (per model and
text) against the cache it replaced (one entry per embedded batch, ``lru_cache`` on the
tuple of texts), both over the same embedder in one process. Labelled names and
examples come from ``benchmarks.drift_labelled``; the registry is the standard library.
No database is needed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory.settings")
django.setup()

import numpy as np  # noqa: E402

from benchmarks.drift_labelled import LABELLED, LabelledDrift  # noqa: E402
from benchmarks.drift_suggestions import library_candidates  # noqa: E402
from memory.domain.drift_ranking import Ranker, Vector  # noqa: E402
from memory.infra.embeddings import embed_for_request  # noqa: E402
from memory.selectors import drift as drift_selector  # noqa: E402

Embed = Callable[[list[str]], list[Vector]]
EMBEDDED = {"texts": 0}  # texts sent to the model: the figure the machine's load cannot move


def _normalized(texts: list[str]) -> tuple[Vector, ...]:
    EMBEDDED["texts"] += len(texts)
    vectors = np.asarray(embed_for_request(texts, hint="benchmark"), dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return tuple(vectors / np.where(norms == 0, 1.0, norms))


def batch_cache() -> Embed:
    """The cache the selector had: one entry per batch of texts."""

    @lru_cache(maxsize=1024)
    def vectors(texts: tuple[str, ...]) -> tuple[Vector, ...]:
        return _normalized(list(texts))

    return lambda texts: list(vectors(tuple(texts)))


def text_cache() -> Embed:
    """The selector's cache (per model and text), emptied first; what it embeds is counted
    from its misses."""
    with drift_selector._vector_cache_lock:
        drift_selector._vector_cache.clear()

    def embed(texts: list[str]) -> list[Vector]:
        before = drift_selector.drift_vector_cache_info()["misses"]
        vectors = drift_selector._embed(texts)
        EMBEDDED["texts"] += drift_selector.drift_vector_cache_info()["misses"] - before
        return vectors

    return embed


def page_ms(embed: Embed, page: Sequence[LabelledDrift]) -> tuple[float, int]:
    """One drift page's suggestions, as ``drift_suggestions_attach`` computes them: the
    milliseconds and the texts embedded."""
    before = EMBEDDED["texts"]
    began = time.perf_counter()
    ranker = Ranker(library_candidates(), embed)
    ranker.prepare([item.name for item in page])
    for item in page:
        ranker.rank(item.name, item.examples)
    return (time.perf_counter() - began) * 1000, EMBEDDED["texts"] - before


def measure(size: int, rounds: int) -> dict[str, Any]:
    _normalized(["warm the model up"])  # loading the model is not the page's cost
    out: dict[str, Any] = {"page_size": size, "rounds": rounds}
    for label, make in (("batch_cache", batch_cache), ("text_cache", text_cache)):
        loads: dict[str, list[float]] = {"cold": [], "again": [], "shifted": []}
        texts: dict[str, int] = {"cold": 0, "again": 0, "shifted": 0}
        for round_ in range(rounds):
            start = round_ * (size + 1)  # fresh names each round: a cold page is cold
            page = LABELLED[start : start + size]
            shifted = LABELLED[start + 1 : start + size + 1]
            embed = make()
            for load, names in (("cold", page), ("again", page), ("shifted", shifted)):
                ms, embedded = page_ms(embed, names)
                loads[load].append(ms)
                texts[load] += embedded
        out[label] = {k: round(statistics.median(v), 1) for k, v in loads.items()}
        out[label + "_texts_embedded"] = texts
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tiny", action="store_true", help="pages of 5 names, one round")
    parser.add_argument("--rounds", type=int, default=3, help="pages of 20 names, this many")
    args = parser.parse_args()
    size, rounds = (5, 1) if args.tiny else (20, args.rounds)
    if len(LABELLED) < rounds * (size + 1):
        raise SystemExit("the labelled set is too small for these pages")
    result = measure(size, rounds)
    result["machine"] = f"{platform.node()} load {os.getloadavg()[0]:.2f}"
    print(json.dumps(result, indent=2))
    batch, text = result["batch_cache"], result["text_cache"]
    print()
    batch_n, text_n = result["batch_cache_texts_embedded"], result["text_cache_texts_embedded"]
    print("| load | batch cache (before): ms, texts embedded | text cache (now): ms, texts |")
    print("|---|---:|---:|")
    for load in ("cold", "again", "shifted"):
        print(f"| {load} | {batch[load]}, {batch_n[load]} | {text[load]}, {text_n[load]} |")


if __name__ == "__main__":
    main()
