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

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from django.db import connection

from memory.infra.pg_arrays import int_array_literal
from memory.infra.queueing import embeddings_drain_enqueue
from memory.infra.stages import stage
from memory.models import Context, Entity, Fact, Predicate
from memory.search.analyzer import analyze
from memory.search.bm25 import IndexBatch, IndexItem, postings_replace_batches
from memory.search.models import Target
from memory.search.texts import entity_text_of

REBUILD_BATCH = 2000


@dataclass(frozen=True)
class FactText:
    """What a fact's search document is made of, when its writer already holds it (the
    names as read under the write's entity locks): the fact is then indexed without
    reading it back."""

    context_id: int
    scope: str
    subject: str
    predicate: str
    object: str  # the object entity's name, or the value's text


@dataclass(frozen=True)
class EntityText:
    """What an entity's search document is made of, when its writer holds it (an entity
    it has just inserted): indexed without reading it back."""

    context_id: int
    scope: str
    name: str
    aliases: tuple[str, ...]


Texts = Mapping[int, FactText] | Mapping[int, EntityText]

_pending: ContextVar[dict[Target, set[int]] | None] = ContextVar("search_pending", default=None)
# Texts given with facts and entities of the open batch, by target and id.
_texts: ContextVar[dict[tuple[Target, int], FactText | EntityText] | None] = ContextVar(
    "search_texts", default=None
)
# Facts and entities of the open batch inserted in its transaction (never indexed): no
# delete first.
_inserted: ContextVar[dict[Target, set[int]] | None] = ContextVar("search_inserted", default=None)


@contextmanager
def search_index_batch() -> Iterator[None]:
    """Defer fact and entity index refreshes to the end of the block (call it inside
    the transaction that writes them). Nested blocks join the outer one."""
    if _pending.get() is not None:
        yield
        return
    token = _pending.set({Target.FACT: set(), Target.ENTITY: set()})
    inserted_token = _inserted.set({Target.FACT: set(), Target.ENTITY: set()})
    texts_token = _texts.set({})
    try:
        yield
        pending, inserted, texts = _pending.get(), _inserted.get(), _texts.get()
        assert pending is not None and inserted is not None and texts is not None
        with stage("postings"):
            _reindex(
                facts=sorted(pending[Target.FACT]),
                entities=sorted(pending[Target.ENTITY]),
                inserted=inserted,
                texts=texts,
            )
    finally:
        _pending.reset(token)
        _inserted.reset(inserted_token)
        _texts.reset(texts_token)


def facts_index(
    fact_ids: Iterable[int],
    *,
    inserted: Iterable[int] = (),
    texts: Mapping[int, FactText] | None = None,
) -> None:
    """(Re-)index facts now, or at the end of the open ``search_index_batch``.

    ``inserted``: facts the caller inserted in this transaction and that were never
    indexed (indexed with them, without first deleting postings they cannot have).
    ``texts``: what some of them say, as their writer holds it under its locks; they are
    indexed from it instead of being read back, unless the batch is asked to index one
    of them again without its text (something changed it since)."""
    _index(Target.FACT, fact_ids, inserted, texts or {})


def entities_index(
    entity_ids: Iterable[int],
    *,
    inserted: Iterable[int] = (),
    texts: Mapping[int, EntityText] | None = None,
) -> None:
    """(Re-)index entities now, or at the end of the open ``search_index_batch``;
    ``inserted`` and ``texts`` as for ``facts_index``."""
    _index(Target.ENTITY, entity_ids, inserted, texts or {})


def _index(target: Target, ids: Iterable[int], inserted: Iterable[int], texts: Texts) -> None:
    asked, new = set(ids), set(inserted)
    pending, batch_inserted, known = _pending.get(), _inserted.get(), _texts.get()
    if pending is not None and batch_inserted is not None and known is not None:
        # Postings are written when the block ends: a row inserted in its transaction
        # has none until then, however often it is asked for meanwhile.
        pending[target].update(asked, new)
        batch_inserted[target].update(new)
        for pk in asked | new:  # asked again: only a text given now is current
            known.pop((target, pk), None)
        known.update({(target, pk): text for pk, text in texts.items()})
        return
    every = sorted(asked | new)
    _reindex(
        facts=every if target == Target.FACT else [],
        entities=every if target == Target.ENTITY else [],
        inserted={target: new},
        texts={(target, pk): text for pk, text in texts.items()},
    )


def _reindex(
    *,
    facts: list[int],
    entities: list[int],
    inserted: dict[Target, set[int]],
    texts: Mapping[tuple[Target, int], FactText | EntityText] | None = None,
) -> None:
    """Facts' and entities' postings, per context in one batch of statements
    (``postings_replace_batches``); those with a text in ``texts`` are not read back."""
    texts = texts or {}
    by_context: dict[int, list[IndexBatch]] = {}
    fact_texts = {pk: t for (_, pk), t in texts.items() if isinstance(t, FactText)}
    for context_id, items in _fact_items(facts, fact_texts).items():
        batch = IndexBatch(Target.FACT, items, inserted.get(Target.FACT, set()))
        by_context.setdefault(context_id, []).append(batch)
    entity_texts = {pk: t for (_, pk), t in texts.items() if isinstance(t, EntityText)}
    for context_id, items in _entity_items(entities, entity_texts).items():
        batch = IndexBatch(Target.ENTITY, items, inserted.get(Target.ENTITY, set()))
        by_context.setdefault(context_id, []).append(batch)
    for context_id, batches in by_context.items():
        postings_replace_batches(context_id=context_id, batches=batches)
    if facts:
        embeddings_drain_enqueue()  # their sentences changed: the drain embeds them


def _fact_items(fact_ids: list[int], texts: Mapping[int, FactText]) -> dict[int, list[IndexItem]]:
    if not fact_ids:
        return {}
    rows = [
        (pk, t.context_id, t.scope, t.subject, t.predicate, t.object, None)
        for pk in fact_ids
        if (t := texts.get(pk)) is not None
    ]
    unread = [pk for pk in fact_ids if pk not in texts]
    if unread:
        # Plain rows, not model instances, and the ids as one array literal: building
        # 2,000 Facts with three related rows each cost ten times the SQL it ran, and
        # binding 2,000 ids one by one into ``IN (…)`` most of the rest.
        with connection.cursor() as cursor:
            cursor.execute(_FACT_TEXTS_SQL, [int_array_literal(unread)])
            rows += cursor.fetchall()
    by_context: dict[int, list[IndexItem]] = {}
    terms_of = _PartTerms()
    for pk, context_id, scope, subject, predicate, object_name, value_text in rows:
        obj = object_name if object_name is not None else value_text
        by_context.setdefault(context_id, []).append(
            IndexItem(ref_id=pk, scope=scope, terms=terms_of.fact(subject, predicate, obj))
        )
    return by_context


_FACT_TEXTS_SQL = f"""
    SELECT f.id, f.context_id, f.scope, s.name, p.name, o.name, f.value_text
    FROM {Fact._meta.db_table} f
    JOIN {Entity._meta.db_table} s ON s.id = f.subject_id
    JOIN {Predicate._meta.db_table} p ON p.id = f.predicate_id
    LEFT JOIN {Entity._meta.db_table} o ON o.id = f.object_id
    WHERE f.id = ANY(%s::bigint[])
"""  # noqa: S608 - table names from the models, values are parameters


class _PartTerms:
    """The terms of fact texts, each part analyzed once per batch.

    The analyzer works word by word on whitespace-split text, so the terms of
    ``fact_text_of(subject, predicate, obj)`` are the terms of its three parts in turn;
    a batch names each entity and predicate in many facts, and analyzing (stemming
    above all) each name once instead of in every fact is most of the indexing's
    Python time."""

    def __init__(self) -> None:
        self._known: dict[str, list[str]] = {}

    def of(self, part: str) -> list[str]:
        terms = self._known.get(part)
        if terms is None:
            terms = self._known[part] = analyze(part)
        return terms

    def fact(self, subject: str, predicate: str, obj: str) -> list[str]:
        return [*self.of(subject), *self.of(predicate), *self.of(obj)]


def _entity_items(
    entity_ids: list[int], texts: Mapping[int, EntityText]
) -> dict[int, list[IndexItem]]:
    """Entity vectors are the entity module's job (``entity_embeddings_enqueue``)."""
    if not entity_ids:
        return {}
    by_context: dict[int, list[IndexItem]] = {}
    rows = [
        (pk, t.context_id, t.scope, t.name, list(t.aliases))
        for pk in entity_ids
        if (t := texts.get(pk)) is not None
    ]
    unread = [pk for pk in entity_ids if pk not in texts]
    if unread:
        with connection.cursor() as cursor:  # plain rows, as for facts
            cursor.execute(
                f"SELECT id, context_id, scope, name, aliases FROM {Entity._meta.db_table} "  # noqa: S608
                "WHERE id = ANY(%s::bigint[])",
                [int_array_literal(unread)],
            )
            rows += cursor.fetchall()
    for pk, context_id, scope, name, aliases in rows:
        text = entity_text_of(name=name, aliases=aliases)
        by_context.setdefault(context_id, []).append(
            IndexItem(ref_id=pk, scope=scope, terms=analyze(text))
        )
    return by_context


def search_index_rebuild(*, context: Context) -> None:
    """Re-index every fact and entity of ``context`` (after a bulk change that bypassed
    the services). Chunks are indexed once, when their document is written."""
    fact_ids = list(Fact.objects.filter(context=context).values_list("pk", flat=True))
    entity_ids = list(Entity.objects.filter(context=context).values_list("pk", flat=True))
    for start in range(0, max(len(fact_ids), len(entity_ids)), REBUILD_BATCH):
        _reindex(
            facts=fact_ids[start : start + REBUILD_BATCH],
            entities=entity_ids[start : start + REBUILD_BATCH],
            inserted={},
        )
