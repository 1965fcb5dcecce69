"""Embeddings for chunks, facts and keywords, computed after the writing transaction.

Each ``*_enqueue`` defers to ``transaction.on_commit`` so a rolled-back write queues
nothing; each ``*_compute`` is what the task runs and what tests, benchmarks and
``import_documents --wait`` call directly.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import transaction
from django_tasks import task

from memory.embeddings import embed_texts, embedding_model_id
from memory.models import Chunk, Fact, Keyword
from memory.search.models import FactVector
from memory.search.texts import chunk_text_for_embedding, fact_sentence

EMBED_BATCH = 128


def chunk_embeddings_compute(
    chunk_ids: list[int], *, on_progress: Callable[[int], None] | None = None
) -> int:
    """Embed the given chunks (title + text); returns how many vectors were written."""
    model_id = embedding_model_id()
    written = 0
    for start in range(0, len(chunk_ids), EMBED_BATCH):
        batch = list(
            Chunk.objects.filter(pk__in=chunk_ids[start : start + EMBED_BATCH])
            .select_related("document")
            .only("pk", "text", "document__title")
        )
        vectors = embed_texts([chunk_text_for_embedding(c) for c in batch])
        for chunk, vector in zip(batch, vectors, strict=True):
            chunk.embedding, chunk.embedding_model = vector, model_id
        Chunk.objects.bulk_update(batch, ["embedding", "embedding_model"])
        written += len(batch)
        if on_progress is not None:
            on_progress(len(batch))
    return written


def fact_embeddings_compute(fact_ids: list[int]) -> int:
    model_id = embedding_model_id()
    written = 0
    for start in range(0, len(fact_ids), EMBED_BATCH):
        batch = list(
            Fact.objects.filter(pk__in=fact_ids[start : start + EMBED_BATCH]).select_related(
                "subject", "predicate", "object"
            )
        )
        vectors = embed_texts([fact_sentence(f) for f in batch])
        FactVector.objects.bulk_create(
            [
                FactVector(
                    fact=fact,
                    context_id=fact.context_id,
                    scope=fact.scope,
                    embedding=vector,
                    embedding_model=model_id,
                )
                for fact, vector in zip(batch, vectors, strict=True)
            ],
            update_conflicts=True,
            unique_fields=["fact"],
            update_fields=["embedding", "embedding_model"],
        )
        written += len(batch)
    return written


def keyword_embeddings_compute(keyword_ids: list[int]) -> int:
    written = 0
    for start in range(0, len(keyword_ids), EMBED_BATCH):
        batch = list(
            Keyword.objects.filter(pk__in=keyword_ids[start : start + EMBED_BATCH]).only(
                "pk", "text"
            )
        )
        for keyword, vector in zip(batch, embed_texts([k.text for k in batch]), strict=True):
            keyword.embedding = vector
        Keyword.objects.bulk_update(batch, ["embedding"])
        written += len(batch)
    return written


@task()
def chunk_embeddings_task(chunk_ids: list[int]) -> int:
    return chunk_embeddings_compute(chunk_ids)


@task()
def fact_embeddings_task(fact_ids: list[int]) -> int:
    return fact_embeddings_compute(fact_ids)


@task()
def keyword_embeddings_task(keyword_ids: list[int]) -> int:
    return keyword_embeddings_compute(keyword_ids)


def _enqueue_on_commit(enqueue: Callable[[list[int]], object], ids: list[int]) -> None:
    unique = list(dict.fromkeys(ids))
    if unique:
        transaction.on_commit(lambda: enqueue(unique))


def chunk_embeddings_enqueue(chunk_ids: list[int]) -> None:
    _enqueue_on_commit(chunk_embeddings_task.enqueue, chunk_ids)


def fact_embeddings_enqueue(fact_ids: list[int]) -> None:
    _enqueue_on_commit(fact_embeddings_task.enqueue, fact_ids)


def keyword_embeddings_enqueue(keyword_ids: list[int]) -> None:
    _enqueue_on_commit(keyword_embeddings_task.enqueue, keyword_ids)
