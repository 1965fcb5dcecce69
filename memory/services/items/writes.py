"""Writing items: puts and deletes of one batch in one transaction.

A put keeps the value exactly; its ``index`` paths choose the text that BM25 and the
vector rank (``memory.domain.item_paths``). Every put of a batch is checked — its
namespace, key, value and the caller's write grant on the namespace's scope — before
anything is written, so a refused batch writes nothing. Puts to the same item in one
batch: the last one wins.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import connection, transaction
from django.utils import timezone

from memory.domain.access import ContextAccess
from memory.domain.item_paths import text_at_paths
from memory.domain.namespaces import Namespace, namespace_scope
from memory.infra.embeddings import embed_texts, embedding_model_id
from memory.infra.pg_rows import json_text
from memory.infra.queueing import items_sweep_enqueue
from memory.kernel.errors import ValidationFailed
from memory.search.analyzer import analyze
from memory.search.bm25 import IndexItem, postings_delete, postings_replace
from memory.search.models import Target
from memory.services.items.extract import (
    extract_wanted,
    item_extract,
    item_extractions_take_back,
)

logger = logging.getLogger(__name__)

K = TypeVar("K")

MAX_TTL_MINUTES = 60.0 * 24 * 365 * 100
MAX_VALUE_DEPTH = 64


@dataclass(frozen=True)
class ItemPut:
    """One put; ``value`` None deletes the item. ``index``: the paths to index, or None
    (not indexed). ``ttl``: minutes until the item expires unless read, or None."""

    namespace: Namespace
    key: str
    value: dict[str, Any] | None
    index: list[str] | None = None
    ttl: float | None = None
    # Send the indexed text through ingest (memory.services.items.extract); None: as the
    # context's ``item_extract`` says.
    extract: bool | None = None


def value_validate(value: object) -> dict[str, Any] | None:
    """A put's value: a JSON object (kept exactly) or None (a delete)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValidationFailed(
            "value must be a JSON object, or null to delete the item", code="invalid_value"
        )
    _check_json(value, 0)
    return value


def _check_json(value: object, depth: int) -> None:
    # PostgreSQL's jsonb stores no NUL character, in a key or in text.
    if depth > MAX_VALUE_DEPTH:
        raise ValidationFailed(
            f"value is nested deeper than {MAX_VALUE_DEPTH} levels", code="invalid_value"
        )
    if isinstance(value, str):
        if "\x00" in value:
            raise ValidationFailed(
                "value text must not contain NUL characters", code="invalid_value"
            )
    elif isinstance(value, dict):
        for key, inner in value.items():
            _check_json(key, depth + 1)
            _check_json(inner, depth + 1)
    elif isinstance(value, list):
        for inner in value:
            _check_json(inner, depth + 1)
    elif isinstance(value, float) and value != value:  # NaN: not JSON
        raise ValidationFailed("value must be JSON (no NaN)", code="invalid_value")


def ttl_validate(ttl: object) -> float | None:
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl <= MAX_TTL_MINUTES:
        raise ValidationFailed(
            f"ttl must be a number of minutes above 0 and at most {MAX_TTL_MINUTES:.0f}",
            code="invalid_ttl",
        )
    return float(ttl)


def items_write(*, access: ContextAccess, puts: Sequence[ItemPut]) -> None:
    """Apply ``puts`` (validated by the caller) atomically, after checking the caller's
    write grant on every namespace.

    Set-based: one statement for the batch's deletes and one for its other puts, each
    returning what the rows held before (their extractions' run and turn, whether they
    were indexed), so what those extracted is taken back and stale postings dropped
    only when there are any. Puts of plain values over plain items — a store's usual write — need
    nothing else: their one statement is the whole write (``_plain_write``)."""
    for scope in {namespace_scope(put.namespace) for put in puts}:
        access.require_write(scope)
    last: dict[tuple[Namespace, str], ItemPut] = {}
    for put in puts:
        last.pop((put.namespace, put.key), None)  # the last put decides, in its place
        last[(put.namespace, put.key)] = put
    # One order for every writer: two batches touching the same items lock them alike.
    ordered = sorted(last.values(), key=lambda p: (p.namespace, p.key))
    writes = [p for p in ordered if p.value is not None]
    deletes = [p for p in ordered if p.value is None]
    if not _plain_write(access.context.pk, writes, deletes):
        _write(access, writes, deletes)
    ttls = [p.ttl for p in writes if p.ttl is not None]
    if ttls:
        items_sweep_enqueue(run_after=timezone.now() + dt.timedelta(minutes=min(ttls)))


def _plain_write(context_id: int, writes: Sequence[ItemPut], deletes: Sequence[ItemPut]) -> bool:
    """Write the puts as one statement, outside any transaction of ours (a BEGIN and a
    COMMIT are two round trips of a store's three), when that is the whole write: no
    delete, nothing to index or extract, and no item it overwrites with an extraction
    (run or turn) to take back or postings to drop — which the statement itself checks, writing
    nothing otherwise. False: not written, take the transactional way."""
    if deletes or not writes or any(p.index or p.extract for p in writes):
        return False
    return bool(_upsert(context_id, writes, {}, {}, plain=True))


def _write(access: ContextAccess, writes: Sequence[ItemPut], deletes: Sequence[ItemPut]) -> None:
    texts = {(p.namespace, p.key): text_at_paths(p.value, p.index) for p in writes if p.index}
    vectors = _vectors(texts)
    with transaction.atomic():
        gone = _delete(access.context.pk, deletes) if deletes else []
        written = _upsert(access.context.pk, writes, texts, vectors) if writes else []
        extractions = [row.old_extraction for row in (*gone, *written) if row.old_extraction]
        if extractions:
            item_extractions_take_back(access=access, extractions=extractions)
        ids = {row.ref: row.item_id for row in written}
        for put in writes:
            text = texts.get((put.namespace, put.key), "")
            if extract_wanted(access=access, asked=put.extract) and text.strip():
                item_extract(
                    access=access,
                    item_id=ids[(put.namespace, put.key)],
                    scope=namespace_scope(put.namespace),
                    key=put.key,
                    text=text,
                )


def _vectors(texts: dict[K, str]) -> dict[K, str]:
    """The embeddings of the indexed texts, as pgvector literals. A down embedder leaves
    the items without a vector (BM25 still finds them) rather than refusing the write."""
    wanted = [(ref, text) for ref, text in texts.items() if text.strip()]
    if not wanted:
        return {}
    try:
        embedded = embed_texts([text for _, text in wanted])
    except Exception as exc:
        logger.warning("items stored without vectors: %s: %s", type(exc).__name__, exc)
        return {}
    return {
        ref: "[" + ",".join(f"{x:.7g}" for x in vector) + "]"
        for (ref, _), vector in zip(wanted, embedded, strict=True)
    }


VECTOR_BATCH = 256  # items embedded at a time by items_vectors_fill


def items_vectors_fill(*, context_id: int) -> int:
    """Embed the context's indexed items that have no vector (those of a memory import),
    a batch at a time, and queue the sweep for the earliest expiry among them; returns
    how many were embedded. A down embedder leaves them as it found them, as a put does."""
    done, after = 0, 0
    while True:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT id, text FROM memory_item WHERE context_id = %s AND id > %s "
                "AND embedding IS NULL AND text <> '' ORDER BY id LIMIT %s",
                [context_id, after, VECTOR_BATCH],
            )
            rows = cursor.fetchall()
        if not rows:
            break
        after = rows[-1][0]
        vectors = _vectors(dict(rows))
        if not vectors:
            break
        with connection.cursor() as cursor:
            cursor.executemany(
                "UPDATE memory_item SET embedding = %s::vector, embedding_model = %s WHERE id = %s",
                [(vector, embedding_model_id(), pk) for pk, vector in vectors.items()],
            )
        done += len(vectors)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT min(expires_at) FROM memory_item WHERE context_id = %s", [context_id]
        )
        (first_expiry,) = cursor.fetchone()
    if first_expiry is not None:
        items_sweep_enqueue(run_after=first_expiry)
    return done


@dataclass(frozen=True)
class _Written:
    """A row a put wrote or deleted, and what it held before."""

    item_id: int
    ref: tuple[Namespace, str]
    # The extraction (run, turn) of the value it replaced, to take back; None if none.
    old_extraction: tuple[int | None, int | None] | None
    was_indexed: bool  # the value it replaced had text, so postings may be left


# The deleted rows with their old extractions (run, turn) and whether they had text
# (postings), in one statement. Each (namespace, key) is a probe of item_unique
# (``OFFSET 0`` keeps it one: a young table's statistics let the planner scan the whole
# context instead).
_DELETE = """
DELETE FROM memory_item WHERE id = ANY(ARRAY(
    SELECT i.id FROM jsonb_to_recordset(%s::jsonb) AS r(ns jsonb, key text)
    CROSS JOIN LATERAL (
        SELECT id FROM memory_item
        WHERE context_id = %s AND key = r.key
            AND namespace = ARRAY(SELECT jsonb_array_elements_text(r.ns))
        OFFSET 0
    ) i
))
RETURNING id, namespace, key, run_id, turn_id, text <> ''
"""


def _extraction(run_id: int | None, turn_id: int | None) -> tuple[int | None, int | None] | None:
    return (run_id, turn_id) if run_id is not None or turn_id is not None else None


def _delete(context_id: int, deletes: Sequence[ItemPut]) -> list[_Written]:
    rows = json_text([{"ns": list(p.namespace), "key": p.key} for p in deletes])
    with connection.cursor() as cursor:
        cursor.execute(_DELETE, [rows, context_id])
        gone = [
            _Written(item_id, (tuple(namespace), key), _extraction(run_id, turn_id), had_text)
            for item_id, namespace, key, run_id, turn_id, had_text in cursor.fetchall()
        ]
    postings_delete(target=Target.ITEM, ref_ids=[row.item_id for row in gone if row.was_indexed])
    return gone


def items_delete_ids(ids: Sequence[int]) -> None:
    """Delete items by id with their search postings (in the caller's transaction)."""
    if not ids:
        return
    postings_delete(target=Target.ITEM, ref_ids=ids)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM memory_item WHERE id = ANY(%s)", [list(ids)])


# Every put of a batch in one statement. ``old`` locks the items about to be overwritten
# (FOR UPDATE waits for a concurrent writer and reads its committed row), one probe of
# item_unique each, in the puts' order, and keeps what they held; the insert's InitPlan
# (the count over ``old``) makes it run to the end first: sub-statements of one WITH
# share a snapshot and would otherwise run in any order. The count is also the plain
# write's check: of the old items, at most the last parameter may have a run, a turn or
# text (0: none, else nothing is written). The outer join hands each written row its old
# extraction (run, turn) and whether it was indexed.
_UPSERT = """
WITH r AS MATERIALIZED (
    SELECT ARRAY(SELECT jsonb_array_elements_text(x.ns)) AS namespace, x.*
    FROM ROWS FROM (jsonb_to_recordset(%s::jsonb) AS (ns jsonb, scope text, key text,
        value jsonb, idx jsonb, text text, vec text, model text, ttl float8))
        WITH ORDINALITY AS x(ns, scope, key, value, idx, text, vec, model, ttl, n)
), old AS MATERIALIZED (
    SELECT i.id, i.run_id, i.turn_id, i.had_text
    FROM r CROSS JOIN LATERAL (
        SELECT id, run_id, turn_id, text <> '' AS had_text FROM memory_item
        WHERE context_id = %s AND namespace = r.namespace AND key = r.key
        FOR UPDATE
    ) i
    ORDER BY r.n
), written AS (
    INSERT INTO memory_item (context_id, namespace, scope, key, value, index, text,
        embedding, embedding_model, ttl_minutes, expires_at, created_at, updated_at)
    SELECT %s, r.namespace, r.scope, r.key, r.value, r.idx, r.text, r.vec::vector,
        r.model, r.ttl,
        CASE WHEN r.ttl IS NULL THEN NULL ELSE now() + make_interval(secs => r.ttl * 60) END,
        now(), now()
    FROM r
    WHERE (SELECT count(*) FILTER (
        WHERE run_id IS NOT NULL OR turn_id IS NOT NULL OR had_text
    ) FROM old) <= %s
    ORDER BY r.n
    ON CONFLICT (context_id, namespace, key) DO UPDATE SET
        value = EXCLUDED.value, index = EXCLUDED.index, text = EXCLUDED.text,
        embedding = EXCLUDED.embedding, embedding_model = EXCLUDED.embedding_model,
        ttl_minutes = EXCLUDED.ttl_minutes, expires_at = EXCLUDED.expires_at,
        run_id = NULL, turn_id = NULL, updated_at = now()
    RETURNING id, xmax = 0 AS inserted, namespace, key
)
SELECT written.id, written.inserted, written.namespace, written.key, old.run_id, old.turn_id,
    coalesce(old.had_text, false)
FROM written LEFT JOIN old ON old.id = written.id
"""


def _upsert(
    context_id: int,
    writes: Sequence[ItemPut],
    texts: dict[tuple[Namespace, str], str],
    vectors: dict[tuple[Namespace, str], str],
    *,
    plain: bool = False,
) -> list[_Written]:
    """Insert or overwrite the items, and (re-)index the ones with text. ``plain``: only
    if no item overwritten has an extraction run or text (else nothing, and [])."""
    model = embedding_model_id() if vectors else ""
    rows = [
        {
            "ns": list(p.namespace),
            "scope": namespace_scope(p.namespace),
            "key": p.key,
            "value": p.value,
            "idx": p.index,
            "text": texts.get((p.namespace, p.key), ""),
            "vec": vectors.get((p.namespace, p.key)),
            "model": model if (p.namespace, p.key) in vectors else "",
            "ttl": p.ttl,
        }
        for p in writes
    ]
    with connection.cursor() as cursor:
        limit = 0 if plain else len(rows)
        cursor.execute(_UPSERT, [json_text(rows), context_id, context_id, limit])
        returned = cursor.fetchall()
    written: list[_Written] = []
    indexed: list[IndexItem] = []
    inserted: list[int] = []
    unindex: list[int] = []
    for item_id, was_inserted, namespace, key, old_run, old_turn, had_text in returned:
        ref = (tuple(namespace), key)
        written.append(_Written(item_id, ref, _extraction(old_run, old_turn), had_text))
        terms = analyze(texts[ref]) if ref in texts else []
        if terms:
            indexed.append(IndexItem(ref_id=item_id, scope=namespace_scope(ref[0]), terms=terms))
            if was_inserted or not had_text:
                inserted.append(item_id)  # nothing indexed under it yet
        elif had_text:
            unindex.append(item_id)
    postings_delete(target=Target.ITEM, ref_ids=unindex)
    postings_replace(context_id=context_id, target=Target.ITEM, items=indexed, unindexed=inserted)
    return written
