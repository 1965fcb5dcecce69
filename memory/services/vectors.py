"""Refilling vectors: rows whose vector a dead worker never wrote, or — after a switch of
``MEMORY_EMBED_MODEL`` — every row, embedded again in batches (``manage.py reembed``).

The vectors are computed by the same functions the embedding tasks run
(``memory.search.tasks``, ``memory.tasks``), so a refilled vector is exactly the one the
worker would have written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from django.db.models import Q, QuerySet

from memory.errors import ValidationFailed
from memory.models import Chunk, Context, Entity, Fact, Keyword
from memory.search.tasks import (
    EMBED_BATCH,
    chunk_embeddings_compute,
    fact_embeddings_compute,
    keyword_embeddings_compute,
)
from memory.tasks import entity_embeddings_compute

VectorTarget = Literal["chunks", "facts", "entities", "keywords"]
VECTOR_TARGETS: tuple[VectorTarget, ...] = ("chunks", "facts", "entities", "keywords")
MAX_BATCH = 4096

_COMPUTE: dict[str, Callable[[list[int]], int]] = {
    "chunks": chunk_embeddings_compute,
    "facts": fact_embeddings_compute,
    "entities": entity_embeddings_compute,
    "keywords": keyword_embeddings_compute,
}


def vectors_to_embed(
    *, target: VectorTarget, context: Context | None = None, only_missing: bool = True
) -> QuerySet[Any]:
    """The rows of ``target`` (in ``context``, or in every context) without a vector — or,
    with ``only_missing=False``, every row that should have one: each chunk, fact and
    keyword, and each live entity (a merged one is a redirect, never searched)."""
    rows: QuerySet[Any]
    if target == "chunks":
        rows, missing = Chunk.objects.all(), Q(embedding__isnull=True)
    elif target == "facts":
        rows, missing = Fact.objects.all(), Q(vector__isnull=True)  # FactVector holds them
    elif target == "entities":
        rows, missing = Entity.objects.filter(merged_into__isnull=True), Q(embedding__isnull=True)
    elif target == "keywords":
        rows, missing = Keyword.objects.all(), Q(embedding__isnull=True)
    else:
        raise ValidationFailed(
            f"target must be one of {', '.join(VECTOR_TARGETS)}", code="invalid_target"
        )
    if context is not None:
        rows = rows.filter(context=context)
    return rows.filter(missing) if only_missing else rows


def vectors_refill(
    *,
    target: VectorTarget,
    context: Context | None = None,
    only_missing: bool = True,
    batch_size: int = EMBED_BATCH,
    on_progress: Callable[[int], None] | None = None,
) -> int:
    """Embed the rows of ``vectors_to_embed`` in batches of ``batch_size`` (in primary-key
    order, each batch written and committed before the next is read); return how many
    vectors were written. ``on_progress(written)`` is called after each batch.

    With ``only_missing`` a second run finds nothing to do. If the embedder fails, the
    batches before the failure stay written and its error is raised (for an API model
    ``EmbeddingUnavailable``): running again carries on where this stopped.
    """
    if not 1 <= batch_size <= MAX_BATCH:
        raise ValidationFailed(
            f"the batch size must be between 1 and {MAX_BATCH}", code="invalid_batch_size"
        )
    rows = vectors_to_embed(target=target, context=context, only_missing=only_missing)
    compute = _COMPUTE[target]
    written, after = 0, 0
    while True:
        # By key from the last batch on: with --all every row stays a candidate, and
        # a row the embedder skipped (deleted meanwhile) is not read again.
        ids = list(
            rows.filter(pk__gt=after).order_by("pk").values_list("pk", flat=True)[:batch_size]
        )
        if not ids:
            return written
        written += compute(ids)
        after = ids[-1]
        if on_progress is not None:
            on_progress(written)
