"""all-MiniLM-L6-v2: float32 PyTorch against ONNX Runtime (float32, and int8 dynamic
quantization with one scale per tensor or per channel), side by side in one run:
passages/s and SciFact vector nDCG@10.

    .venv/bin/python -m benchmarks.embedder_onnx                 # all 5,183 abstracts, 300 queries
    .venv/bin/python -m benchmarks.embedder_onnx --docs 500
    .venv/bin/python -m benchmarks.embedder_onnx --tiny

The ONNX files are exported from the shipped weights (``memory.infra.onnx_embedder``) into a
temporary folder at the start (timed; nothing is downloaded). Speed: the same passages
embedded by each variant in turn, ``--repeat`` rounds interleaved so every variant sees
the same machine load (medians); also short texts (LoCoMo-sized, one sentence) since
conversations are mostly those. Relevance: exact cosine over the abstracts (title + text
as one passage), nDCG@10 over the test queries whose relevant abstracts are loaded — all
300 at full scale. Adoption rule: ≥ 1.8× faster and nDCG@10 lower by ≤ 0.005.
``--torch-int8`` adds ``torch.quantization.quantize_dynamic`` (benchmarks.embedder_int8).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks.datasets import dataset_required
from benchmarks.embedder_int8 import _model
from benchmarks.search_common import machine_line, markdown_table
from benchmarks.search_scifact import load, ndcg_at_10

Embed = Callable[[list[str]], np.ndarray]


def _variants(folder: Path, *, torch_int8: bool) -> tuple[dict[str, Embed], dict[str, float]]:
    from memory.infra.onnx_embedder import OnnxEmbedder, onnx_model_build

    torch_model = _model()

    def torch_embed(model: object) -> Embed:
        return lambda texts: np.asarray(
            model.encode(  # type: ignore[attr-defined]
                texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False
            )
        )

    def onnx_embed(embedder: OnnxEmbedder) -> Embed:
        return lambda texts: np.asarray(embedder.embed(texts), dtype=np.float32)

    variants: dict[str, Embed] = {"PyTorch float32": torch_embed(torch_model)}
    build: dict[str, float] = {}
    started = time.perf_counter()
    float_path = onnx_model_build(folder)
    build["ONNX float32"] = time.perf_counter() - started
    started = time.perf_counter()
    int8_path = onnx_model_build(folder, int8=True)
    build["ONNX int8 dynamic"] = time.perf_counter() - started
    started = time.perf_counter()
    channel_path = onnx_model_build(folder, int8=True, per_channel=True)
    build["ONNX int8 dynamic per channel"] = time.perf_counter() - started
    onnx_variants = (
        ("ONNX float32", float_path),
        ("ONNX int8 dynamic", int8_path),
        ("ONNX int8 dynamic per channel", channel_path),
    )
    for name, path in onnx_variants:
        variants[name] = onnx_embed(OnnxEmbedder(path))
    if torch_int8:
        import copy

        import torch

        quantized = copy.deepcopy(torch_model)
        quantized[0].auto_model = torch.quantization.quantize_dynamic(
            quantized[0].auto_model, {torch.nn.Linear}, dtype=torch.qint8
        )
        variants["PyTorch int8 dynamic"] = torch_embed(quantized)
    return variants, build


def _speeds(variants: dict[str, Embed], texts: list[str], repeat: int) -> dict[str, float]:
    runs: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeat):  # interleaved: every variant sees the same machine load
        for name, embed in variants.items():
            started = time.perf_counter()
            embed(texts)
            runs[name].append(len(texts) / (time.perf_counter() - started))
    return {name: statistics.median(r) for name, r in runs.items()}


def _ndcg(
    embed: Embed, corpus: list[dict[str, str]], queries: dict[str, str], qrels: dict
) -> float:
    ids = [d["_id"] for d in corpus]
    passages = embed([f"{d['title']}\n{d['text']}" for d in corpus])
    query_ids = list(qrels)
    query_vectors = embed([queries[q] for q in query_ids])
    scores = []
    for query_id, vector in zip(query_ids, query_vectors, strict=True):
        order = np.argsort(-(passages @ vector), kind="stable")[:10]
        scores.append(ndcg_at_10([ids[i] for i in order], qrels[query_id]))
    return statistics.fmean(scores)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=None, help="first N abstracts (all: 5,183)")
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved speed rounds")
    parser.add_argument("--torch-int8", action="store_true", help="add PyTorch int8 dynamic")
    args = parser.parse_args()
    dataset_required("scifact", tiny=args.tiny)
    corpus, queries, qrels = load(40 if args.tiny else args.docs)
    with tempfile.TemporaryDirectory(prefix="md-onnx-") as folder:
        variants, build = _variants(Path(folder), torch_int8=args.torch_int8)
        passages = [f"{d['title']}\n{d['text']}" for d in corpus][: 32 if args.tiny else 256]
        sentences = [s for d in corpus for s in d["text"].split(". ") if len(s) > 20]
        sentences = sentences[: 64 if args.tiny else 1024]
        long_speed = _speeds(variants, passages, args.repeat)
        short_speed = _speeds(variants, sentences, args.repeat)
        ndcg = {name: _ndcg(embed, corpus, queries, qrels) for name, embed in variants.items()}
    base = "PyTorch float32"
    rows = [
        [
            name,
            f"{build[name]:.1f}" if name in build else "—",
            long_speed[name],
            long_speed[name] / long_speed[base],
            short_speed[name],
            short_speed[name] / short_speed[base],
            ndcg[name],
            ndcg[name] - ndcg[base],
        ]
        for name in variants
    ]
    print(
        f"{len(corpus)} SciFact abstracts, {len(qrels)} test queries; speed on "
        f"{len(passages)} abstracts and {len(sentences)} sentences, {args.repeat} rounds."
    )
    print(machine_line() + "\n")
    headers = ["model", "build s", "abstracts/s", "ratio", "sentences/s", "ratio"]
    print(markdown_table([*headers, "nDCG@10", "Δ nDCG@10"], rows))
    for name in variants:
        if name == base:
            continue
        ratio = min(long_speed[name] / long_speed[base], short_speed[name] / short_speed[base])
        drop = ndcg[base] - ndcg[name]
        verdict = "adopt" if ratio >= 1.8 and drop <= 0.005 else "keep PyTorch float32"
        print(f"{name}: slower-case ratio {ratio:.2f}×, nDCG@10 drop {drop:.4f} → {verdict}")


if __name__ == "__main__":
    main()
