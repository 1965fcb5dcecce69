from __future__ import annotations

import math

from memory.access import ContextAccess
from memory.embeddings import DIMENSIONS, embed_texts, embedding_model_id
from memory.models import Entity
from memory.services.entities import entity_upsert
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
    assert stored.embedding_model == embedding_model_id() == "local:all-MiniLM-L6-v2"
