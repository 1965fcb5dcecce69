from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from memory.domain.access import ContextAccess
from memory.infra.embeddings import (
    DIMENSIONS,
    LocalEmbedder,
    embed_texts,
    embedder_get,
    embedding_model_id,
)
from memory.infra.onnx_embedder import OnnxEmbedder, onnx_model_build
from memory.models import Entity
from memory.services.entities.writes import entity_upsert
from memory.services.vectors import vectors_compute


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_local_model_gives_normalized_384_dimension_vectors() -> None:
    vectors = embed_texts(["Acme Corporation", "ACME Inc.", "a recipe for lemon cake"])
    assert [len(v) for v in vectors] == [DIMENSIONS] * 3
    assert all(math.isclose(_cosine(v, v), 1.0, rel_tol=1e-4) for v in vectors)
    assert _cosine(vectors[0], vectors[1]) > _cosine(vectors[0], vectors[2])


def test_entity_embeddings_are_stored_with_their_model_id(access: ContextAccess) -> None:
    entity = entity_upsert(access=access, name="Acme Corp", type="organisation", scope="s").entity
    assert vectors_compute("entities", [entity.pk]) == 1
    stored = Entity.objects.get(pk=entity.pk)
    assert stored.embedding is not None and len(stored.embedding) == DIMENSIONS
    assert stored.embedding_model == embedding_model_id() == "local:all-MiniLM-L6-v2-int8"


def test_the_default_int8_model_agrees_with_the_float32_model() -> None:
    """The default embedder is the shipped model quantized to int8 (docs/decisions/0055): its
    vectors point where PyTorch's float32 ones do, and rank texts as they do."""
    texts = [
        "Alex Rivera works at Acme",
        "works_at",
        "Alex is employed by Acme Corporation",
        "a recipe for lemon cake",
        "",
    ]
    quantized = embedder_get().embed(texts)
    full = LocalEmbedder().embed(texts)
    assert [len(v) for v in quantized] == [DIMENSIONS] * len(texts)
    assert all(math.isclose(_cosine(v, v), 1.0, rel_tol=1e-4) for v in quantized)
    assert min(_cosine(q, f) for q, f in zip(quantized, full, strict=True)) > 0.95
    assert _cosine(quantized[0], quantized[2]) > _cosine(quantized[0], quantized[3])


def test_the_int8_model_is_built_from_the_shipped_weights_once(tmp_path: Path) -> None:
    """The first start exports and quantizes the shipped model (nothing downloaded, no
    half-written file left); a second start loads what the first built."""
    folder = tmp_path / "models"
    built = onnx_model_build(folder, int8=True, per_channel=True)
    assert sorted(p.name for p in folder.iterdir()) == [
        "all-MiniLM-L6-v2.int8-per-channel.onnx",
        "all-MiniLM-L6-v2.onnx",
    ]
    modified = built.stat().st_mtime_ns
    assert onnx_model_build(folder, int8=True, per_channel=True) == built
    assert built.stat().st_mtime_ns == modified
    vector = OnnxEmbedder(built).embed(["Acme Corporation"])[0]
    assert _cosine(vector, embed_texts(["Acme Corporation"])[0]) > 0.999


def test_the_setting_names_the_embedder_and_its_model_id(settings: Any) -> None:
    settings.MEMORY_EMBED_MODEL = "local:all-MiniLM-L6-v2"
    assert embedding_model_id() == "local:all-MiniLM-L6-v2"
    settings.MEMORY_EMBED_MODEL = "local"
    assert embedding_model_id() == "local:all-MiniLM-L6-v2-int8"
    settings.MEMORY_EMBED_MODEL = "openai:text-embedding-3-small"
    assert embedding_model_id() == "openai:text-embedding-3-small"
