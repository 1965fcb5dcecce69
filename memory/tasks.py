"""Background work on the django-tasks database queue (``manage.py db_worker``)."""

from __future__ import annotations

import logging

from django.db import transaction
from django_tasks import task

from memory.embeddings import embed_texts, embedding_model_id
from memory.models import Entity

logger = logging.getLogger(__name__)

EMBED_BATCH = 256


def entity_embedding_text(entity: Entity) -> str:
    """What an entity's vector encodes: its name, type and other spellings."""
    aliases = ", ".join(entity.aliases[:10])
    return f"{entity.name} ({entity.type})" + (f"; also known as {aliases}" if aliases else "")


def entity_embeddings_compute(entity_ids: list[int]) -> int:
    """Embed the given live entities now; returns how many vectors were written."""
    written = 0
    model_id = embedding_model_id()
    for start in range(0, len(entity_ids), EMBED_BATCH):
        batch = list(
            Entity.objects.filter(pk__in=entity_ids[start : start + EMBED_BATCH]).only(
                "pk", "name", "type", "aliases"
            )
        )
        vectors = embed_texts([entity_embedding_text(e) for e in batch])
        for entity, vector in zip(batch, vectors, strict=True):
            Entity.objects.filter(pk=entity.pk).update(embedding=vector, embedding_model=model_id)
            written += 1
    return written


@task()
def entity_embeddings_task(entity_ids: list[int]) -> int:
    return entity_embeddings_compute(entity_ids)


def entity_embeddings_enqueue(entity_ids: list[int]) -> None:
    """Queue embedding work once the current transaction commits (never for a rollback)."""
    ids = list(dict.fromkeys(entity_ids))
    if ids:
        transaction.on_commit(lambda: entity_embeddings_task.enqueue(ids))


@task()
def ingest_run_task(run_id: int) -> str:
    """Execute one ingest run (``memory.services.ingest.run_execute``); returns its outcome.

    Runs left ``running`` by a worker that died are failed first, so they can be retried.
    """
    # Imported here: the ingest services import this module (for the embedding task).
    from memory.services.ingest import run_execute, runs_recover_stale

    runs_recover_stale()
    return str(run_execute(run_id=run_id).outcome)
