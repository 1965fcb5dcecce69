"""Keeping the BM25 index in step with facts and entities, inside the writing transaction.

``fact_write`` and ``entity_upsert``/``entity_update`` call ``facts_index`` /
``entities_index`` right after saving, so postings commit (or roll back) with the row.
Deleting a fact, entity or chunk needs no call: the cascade deletes its ``SearchDoc``
and the database triggers remove the postings. Code that rewrites what a fact or entity
says by other means (merges, alias rewrites) calls the same two functions.

Bulk writers wrap their loop in ``search_index_batch()``: refreshes are then collected
and applied in a few statements when the block ends (still inside the transaction).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from memory.models import Context, Entity, Fact
from memory.queueing import embeddings_drain_enqueue
from memory.search.analyzer import analyze
from memory.search.bm25 import IndexItem, postings_replace
from memory.search.models import Target
from memory.search.texts import entity_text, fact_text_of
from memory.stages import stage

REBUILD_BATCH = 2000

_pending: ContextVar[dict[Target, set[int]] | None] = ContextVar("search_pending", default=None)


@contextmanager
def search_index_batch() -> Iterator[None]:
    """Defer fact and entity index refreshes to the end of the block (call it inside
    the transaction that writes them). Nested blocks join the outer one."""
    if _pending.get() is not None:
        yield
        return
    token = _pending.set({Target.FACT: set(), Target.ENTITY: set()})
    try:
        yield
        pending = _pending.get()
        assert pending is not None
        with stage("postings"):
            _facts_reindex(sorted(pending[Target.FACT]))
            _entities_reindex(sorted(pending[Target.ENTITY]))
    finally:
        _pending.reset(token)


def facts_index(fact_ids: Iterable[int]) -> None:
    """(Re-)index facts now, or at the end of the open ``search_index_batch``."""
    ids = list(fact_ids)
    pending = _pending.get()
    if pending is not None:
        pending[Target.FACT].update(ids)
    else:
        _facts_reindex(ids)


def entities_index(entity_ids: Iterable[int]) -> None:
    ids = list(entity_ids)
    pending = _pending.get()
    if pending is not None:
        pending[Target.ENTITY].update(ids)
    else:
        _entities_reindex(ids)


def _facts_reindex(fact_ids: list[int]) -> None:
    if not fact_ids:
        return
    # Plain values, not model instances: building 2,000 Facts with three related rows
    # each cost ten times the SQL it ran (benchmarks/ingest_throughput.py).
    rows = Fact.objects.filter(pk__in=fact_ids).values_list(
        "pk",
        "context_id",
        "scope",
        "subject__name",
        "predicate__name",
        "object__name",
        "value_text",
    )
    by_context: dict[int, list[IndexItem]] = {}
    for pk, context_id, scope, subject, predicate, object_name, value_text in rows:
        text = fact_text_of(
            subject=subject,
            predicate=predicate,
            obj=object_name if object_name is not None else value_text,
        )
        by_context.setdefault(context_id, []).append(
            IndexItem(ref_id=pk, scope=scope, terms=analyze(text))
        )
    for context_id, items in by_context.items():
        postings_replace(context_id=context_id, target=Target.FACT, items=items)
    embeddings_drain_enqueue()  # their sentences changed: the drain embeds them


def _entities_reindex(entity_ids: list[int]) -> None:
    """Entity vectors are the entity module's job (``entity_embeddings_enqueue``)."""
    if not entity_ids:
        return
    by_context: dict[int, list[IndexItem]] = {}
    for entity in Entity.objects.filter(pk__in=entity_ids).only(
        "pk", "context_id", "scope", "name", "aliases"
    ):
        by_context.setdefault(entity.context_id, []).append(
            IndexItem(ref_id=entity.pk, scope=entity.scope, terms=analyze(entity_text(entity)))
        )
    for context_id, items in by_context.items():
        postings_replace(context_id=context_id, target=Target.ENTITY, items=items)


def search_index_rebuild(*, context: Context) -> None:
    """Re-index every fact and entity of ``context`` (after a bulk change that bypassed
    the services). Chunks are indexed once, when their document is written."""
    fact_ids = list(Fact.objects.filter(context=context).values_list("pk", flat=True))
    entity_ids = list(Entity.objects.filter(context=context).values_list("pk", flat=True))
    for start in range(0, max(len(fact_ids), len(entity_ids)), REBUILD_BATCH):
        _facts_reindex(fact_ids[start : start + REBUILD_BATCH])
        _entities_reindex(entity_ids[start : start + REBUILD_BATCH])
