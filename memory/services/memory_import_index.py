"""The indexes of an imported memory: search postings and blocking keys, in bulk.

Every fact, entity, chunk and turn of the context is new (an import only goes into an
empty context), so none has a search document yet: their postings are loaded with
``postings_load`` (memory/search/bm25_load.py), the texts made as the services' own
indexing makes them (memory/search/texts.py), read through server-side cursors. Nor has
any entity a blocking key: they are added a batch of entities at a time.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.db import connection, models

from memory.models import Chunk, Context, Entity, Fact, Turn
from memory.models.duplicate import DuplicateKey
from memory.search.bm25_load import postings_load
from memory.search.models import Target
from memory.search.texts import chunk_index_text, entity_text, fact_text_of, turn_index_text
from memory.services.duplicate_blocking import blocking_keys, records_of

FETCH_ROWS = 5_000  # rows a fetch of the server-side cursors
KEY_BATCH = 5_000  # entities whose blocking keys are made and copied at a time


def memory_import_index(context: Context) -> None:
    """Search postings of every imported fact, entity, chunk and turn, loaded in bulk:
    none of them is indexed yet (the context was empty)."""
    facts = Fact.objects.filter(context=context).values_list(
        "pk", "scope", "subject__name", "predicate__name", "object__name", "value_text"
    )
    postings_load(context_id=context.pk, target=Target.FACT, items=(
        (pk, scope, fact_text_of(subject=subject, predicate=predicate,
                                 obj=object_name if object_name is not None else value_text))
        for pk, scope, subject, predicate, object_name, value_text in _stream(facts)
    ))  # fmt: skip
    entities = Entity.objects.filter(context=context).only("scope", "name", "aliases")
    postings_load(context_id=context.pk, target=Target.ENTITY, items=(
        (entity.pk, entity.scope, entity_text(entity)) for entity in _stream(entities)
    ))  # fmt: skip
    chunks = Chunk.objects.filter(context=context).values_list(
        "pk", "scope", "text", "document__title"
    )
    postings_load(context_id=context.pk, target=Target.CHUNK, items=(
        (pk, scope, chunk_index_text(title=title, text=text))
        for pk, scope, text, title in _stream(chunks)
    ))  # fmt: skip
    turns = Turn.objects.filter(context=context).values_list(
        "pk", "scope", "text", "speaker", "said_at"
    )
    postings_load(context_id=context.pk, target=Target.TURN, items=(
        (pk, scope, turn_index_text(text=text, speaker=speaker, said_at=said_at))
        for pk, scope, text, speaker, said_at in _stream(turns)
    ))  # fmt: skip


def memory_import_keys(context: Context) -> int:
    """The duplicate finder's blocking keys of every imported live entity, as the full
    scan's ``keys_write_all`` writes them, but a batch of entities at a time: that one
    holds the whole context's records and keys at once, and replaces keys an import's
    empty context does not have. Returns how many keys were written."""
    written = 0
    after = 0
    live = Entity.objects.filter(context=context, merged_into__isnull=True).order_by("pk")
    sql = f"COPY {DuplicateKey._meta.db_table} (context_id, entity_id, type, key) FROM STDIN"
    while ids := list(live.filter(pk__gt=after).values_list("pk", flat=True)[:KEY_BATCH]):
        after = ids[-1]
        rows = [
            (context.pk, record.id, record.type, key)
            for record in records_of(context.pk, ids).values()
            for key in blocking_keys(record)
        ]
        with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
            for row in rows:
                copy.write_row(row)
        written += len(rows)
    return written


def _stream(rows: models.QuerySet[Any, Any]) -> Iterator[Any]:
    """In id order (documents get ids in the order of their items), a fetch at a time."""
    return rows.order_by("pk").iterator(chunk_size=FETCH_ROWS)
