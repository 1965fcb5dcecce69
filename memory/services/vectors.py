"""Vectors: what every searchable row's embedding is computed from and how it is written.

One pipeline for chunks, turns, facts, entities and keywords:

- ``vectors_compute(target, ids)`` embeds given rows now (a bulk writer that embeds its
  own rows, ``import_documents``, tests);
- ``embeddings_drain`` is what the worker runs: it gathers rows still without a vector
  (or with a stale one for ``reembed --all``) *across* documents, runs and targets into
  batches of ``EMBED_BATCH`` texts, makes one model call per batch and writes each
  target's vectors with one statement. A worker killed halfway leaves the rest without a
  vector, so the next drain — queued by the next write, or by the watchdog drain every
  running drain schedules (``memory.infra.queueing``) — simply carries on;
- ``embedding_backlog`` counts the rows still waiting, per target;
- ``vectors_refill`` is ``manage.py reembed``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from django.db import connection
from django.db.models import Exists, OuterRef, Q, QuerySet

from memory.infra.embeddings import embed_texts, embedding_model_id
from memory.infra.locks import EMBEDDING_DRAIN_LOCK, LockStrength, executor_lock, rows_lock_ordered
from memory.infra.transactions import transaction_retried
from memory.kernel.errors import ValidationFailed
from memory.models import Chunk, Context, Entity, Fact, Keyword, KeywordLink, Turn
from memory.search.models import FactVector
from memory.search.texts import (
    chunk_text_for_embedding,
    entity_embedding_text,
    fact_sentence,
    turn_embedding_text,
)

VectorTarget = Literal["chunks", "turns", "facts", "entities", "keywords"]
# Also the order a drain serves them in.
VECTOR_TARGETS: tuple[VectorTarget, ...] = ("chunks", "turns", "facts", "entities", "keywords")
# Texts per model call: the local model runs them in its own mini-batches of 64, so a
# bigger call costs nothing and amortises the row reads and the write statement.
EMBED_BATCH = 256
MAX_BATCH = 4096


def _target_check(target: str) -> None:
    if target not in VECTOR_TARGETS:
        raise ValidationFailed(
            f"target must be one of {', '.join(VECTOR_TARGETS)}", code="invalid_target"
        )


def vectors_to_embed(
    *, target: VectorTarget, context: Context | None = None, only_missing: bool = True
) -> QuerySet[Any]:
    """The rows of ``target`` (in ``context``, or in every context) without a vector — or,
    with ``only_missing=False``, every row that should have one: each chunk, turn, fact
    and keyword, and each live entity (a merged one is a redirect, never searched)."""
    _target_check(target)
    rows: QuerySet[Any]
    missing = Q(embedding__isnull=True)
    if target == "chunks":
        rows = Chunk.objects.all()
    elif target == "turns":
        rows = Turn.objects.all()
    elif target == "facts":
        rows, missing = Fact.objects.all(), Q(vector__isnull=True)  # FactVector holds them
    elif target == "entities":
        rows = Entity.objects.filter(merged_into__isnull=True)
    else:
        rows = Keyword.objects.all()
    if context is not None:
        rows = rows.filter(context=context)
    return rows.filter(missing) if only_missing else rows


def embedding_backlog(
    *, context: Context | None = None, visible: Q | None = None
) -> dict[str, int]:
    """Rows waiting for a vector, per target (one statement; partial indexes on the
    rows without a vector keep it cheap once the backlog is small). ``visible`` (a
    reader's ``Grants.read_q()``) counts only the rows it may see; a keyword counts when
    one of its links is visible."""
    parts: list[str] = []
    params: list[Any] = []
    for target in VECTOR_TARGETS:
        rows = vectors_to_embed(target=target, context=context)
        if visible is not None:
            if target == "keywords":
                links = KeywordLink.objects.filter(visible, keyword=OuterRef("pk"))
                rows = rows.filter(Exists(links))
            else:
                rows = rows.filter(visible)
        sql, target_params = rows.values("pk").query.sql_with_params()
        parts.append(f"(SELECT count(*) FROM ({sql}) AS waiting)")  # noqa: S608 - ORM SQL
        params += list(target_params)
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(parts), params)
        row = cursor.fetchone()
    return dict(zip(VECTOR_TARGETS, (int(n) for n in row), strict=True))


# --- texts and writes, per target ---------------------------------------------------------


def _texts(target: VectorTarget, ids: list[int]) -> list[tuple[int, str]]:
    """(id, text to embed) of the rows in ``ids`` that still exist, in ``ids`` order."""
    rows: dict[int, str]
    if target == "chunks":
        chunks = Chunk.objects.filter(pk__in=ids).select_related("document")
        rows = {
            c.pk: chunk_text_for_embedding(c) for c in chunks.only("pk", "text", "document__title")
        }
    elif target == "turns":
        turns = Turn.objects.filter(pk__in=ids).only("pk", "text", "speaker", "said_at")
        rows = {t.pk: turn_embedding_text(t) for t in turns}
    elif target == "facts":
        facts = Fact.objects.filter(pk__in=ids).select_related("subject", "predicate", "object")
        rows = {f.pk: fact_sentence(f) for f in facts}
    elif target == "entities":
        entities = Entity.objects.filter(pk__in=ids).only("pk", "name", "type", "aliases")
        rows = {e.pk: entity_embedding_text(e) for e in entities}
    else:
        rows = dict(Keyword.objects.filter(pk__in=ids).values_list("pk", "text"))
    return [(pk, rows[pk]) for pk in ids if pk in rows]


def _vector_literal(vector: list[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


_UPDATE_TABLES: dict[str, tuple[str, bool]] = {
    # target → (table, has an embedding_model column)
    "chunks": (Chunk._meta.db_table, True),
    "turns": (Turn._meta.db_table, True),
    "entities": (Entity._meta.db_table, True),
    "keywords": (Keyword._meta.db_table, False),
}


# The rows a vector write locks: the row that holds the vector, or for a fact (whose
# vector is a row of its own, FactVector, pointing at it) the fact, kept from a delete.
_LOCKED_ROWS: dict[VectorTarget, tuple[str, LockStrength]] = {
    "chunks": (Chunk._meta.db_table, "NO KEY UPDATE"),
    "turns": (Turn._meta.db_table, "NO KEY UPDATE"),
    "facts": (Fact._meta.db_table, "KEY SHARE"),
    "entities": (Entity._meta.db_table, "NO KEY UPDATE"),
    "keywords": (Keyword._meta.db_table, "NO KEY UPDATE"),
}


def _rows_held(target: VectorTarget, ids: list[int], *, skip_held: bool) -> set[int]:
    """Lock the rows a write of ``target``'s vectors touches, in ascending id order like
    every writer (docs/decisions/0119), and return the ids locked. ``skip_held``: rows
    another transaction holds are left out rather than waited for."""
    table, strength = _LOCKED_ROWS[target]
    rows = rows_lock_ordered(table, ids, strength=strength, skip_locked=skip_held)
    return {int(pk) for (pk,) in rows}


def _vectors_write(
    target: VectorTarget, ids: list[int], vectors: list[list[float]], *, skip_held: bool
) -> list[int]:
    """Write one target's vectors (the rows locked first, then one statement); returns
    the ids written."""
    held = _rows_held(target, ids, skip_held=skip_held) if ids else set()
    picked = [(pk, v) for pk, v in zip(ids, vectors, strict=True) if pk in held]
    if not picked:
        return []
    ids = [pk for pk, _ in picked]
    literals = [_vector_literal(v) for _, v in picked]
    model_id = embedding_model_id()
    with connection.cursor() as cursor:
        if target == "facts":
            cursor.execute(
                f"""
                INSERT INTO {FactVector._meta.db_table}
                    (fact_id, context_id, scope, embedding, embedding_model)
                SELECT f.id, f.context_id, f.scope, x.v::vector, %s
                FROM unnest(%s::bigint[], %s::text[]) AS x(id, v)
                JOIN {Fact._meta.db_table} f ON f.id = x.id
                ON CONFLICT (fact_id) DO UPDATE
                SET embedding = EXCLUDED.embedding, embedding_model = EXCLUDED.embedding_model
                """,  # noqa: S608 - table names from the models, values are parameters
                [model_id, ids, literals],
            )
        else:
            table, with_model = _UPDATE_TABLES[target]
            model_set = ", embedding_model = %s" if with_model else ""
            cursor.execute(
                f"""
                UPDATE {table} AS t SET embedding = x.v::vector{model_set}
                FROM unnest(%s::bigint[], %s::text[]) AS x(id, v)
                WHERE t.id = x.id
                """,  # noqa: S608 - table names from the models, values are parameters
                ([model_id] if with_model else []) + [ids, literals],
            )
    return ids  # each row is locked, so the statement wrote every one


def _embed_and_write(
    batch: list[tuple[VectorTarget, int, str]], *, skip_held: bool
) -> dict[VectorTarget, int]:
    """One model call for the whole batch, then one write per target; returns the rows
    written per target. ``skip_held`` (the worker's drain): rows a writer holds are left
    without their vector for a later drain, so the drain never waits on a request."""
    vectors = embed_texts([text for _, _, text in batch])
    return transaction_retried(
        lambda: _write_batch(batch, vectors, skip_held=skip_held), what="embedding write"
    )


def _write_batch(
    batch: list[tuple[VectorTarget, int, str]], vectors: list[list[float]], *, skip_held: bool
) -> dict[VectorTarget, int]:
    from memory.services.duplicates.finder import duplicates_check  # it reads no vector module

    written: dict[VectorTarget, list[int]] = {}
    for target in VECTOR_TARGETS:
        picked = [(pk, v) for (t, pk, _), v in zip(batch, vectors, strict=True) if t == target]
        written[target] = _vectors_write(
            target, [pk for pk, _ in picked], [v for _, v in picked], skip_held=skip_held
        )
    # An entity's embedding neighbours exist only now: check those entities again, once
    # for the batch, with their vectors (docs/decisions/0048). One passed over is checked
    # when a later drain writes its vector.
    duplicates_check(written["entities"])
    return {target: len(ids) for target, ids in written.items()}


def vectors_compute(
    target: VectorTarget,
    ids: list[int],
    *,
    batch_size: int = EMBED_BATCH,
    on_progress: Callable[[int], None] | None = None,
) -> int:
    """Embed the given rows of ``target`` now; returns how many vectors were written.
    ``on_progress(n)`` gets each batch's count. Rows deleted meanwhile are skipped."""
    _target_check(target)
    written = 0
    for start in range(0, len(ids), batch_size):
        texts = _texts(target, ids[start : start + batch_size])
        if texts:
            batch = [(target, pk, text) for pk, text in texts]
            written += sum(_embed_and_write(batch, skip_held=False).values())
        if on_progress is not None:
            on_progress(len(texts))
    return written


# --- the worker's drain -------------------------------------------------------------------


# A row a writer holds is looked at again after a short pause (a request holds its rows for
# milliseconds), a few times; then it is left to the next drain, so a drain never waits.
HELD_PASSES = 5
HELD_PAUSE_SECONDS = 0.2


@dataclass
class DrainReport:
    written: dict[VectorTarget, int] = field(
        default_factory=lambda: dict.fromkeys(VECTOR_TARGETS, 0)
    )
    model_calls: int = 0
    seconds: float = 0.0
    finished: bool = True  # False: stopped with rows still waiting (time budget, held rows)
    skipped: bool = False  # another drain holds the lock
    passed_over: int = 0  # rows left without a vector in the last pass: writers held them

    @property
    def total(self) -> int:
        return sum(self.written.values())


def _pending_batch(
    after: dict[VectorTarget, int], *, context: Context | None, size: int
) -> list[tuple[VectorTarget, int, str]]:
    """Up to ``size`` rows still without a vector, across targets (in drain order), each
    past the last one this drain took of its target."""
    batch: list[tuple[VectorTarget, int, str]] = []
    for target in VECTOR_TARGETS:
        room = size - len(batch)
        if room <= 0:
            break
        ids = list(
            vectors_to_embed(target=target, context=context)
            .filter(pk__gt=after[target])
            .order_by("pk")
            .values_list("pk", flat=True)[:room]
        )
        if not ids:
            continue
        after[target] = ids[-1]
        batch += [(target, pk, text) for pk, text in _texts(target, ids)]
    return batch


def embeddings_drain(
    *,
    context: Context | None = None,
    batch_size: int = EMBED_BATCH,
    seconds: float | None = None,
    on_progress: Callable[[DrainReport], None] | None = None,
) -> DrainReport:
    """Embed every row still without a vector, ``batch_size`` texts per model call.

    One drain at a time, whatever its context (an advisory lock; a second returns
    ``skipped``), so no row is embedded twice. A row a writer holds locked is passed over,
    never waited for, and looked at again in the next pass (``HELD_PASSES`` at most).
    Stops once nothing is waiting, or after the batch that passes ``seconds``, or with
    rows still held (``finished`` False for the last two). An embedder failure
    propagates: the batches before it stay written.
    """
    if not 1 <= batch_size <= MAX_BATCH:
        raise ValidationFailed(
            f"the batch size must be between 1 and {MAX_BATCH}", code="invalid_batch_size"
        )
    report = DrainReport()
    started = time.perf_counter()
    deadline = None if seconds is None else started + seconds
    held_passes = 0
    while True:
        with executor_lock(EMBEDDING_DRAIN_LOCK, 0) as held:
            if not held:
                report.skipped = True
                break
            if not _drain_pass(report, context, batch_size, deadline, on_progress):
                report.finished = not any(embedding_backlog(context=context).values())
                break
        if not any(embedding_backlog(context=context).values()):
            break
        # Rows committed while the lock was being released (refused by a drain that
        # found it held), or rows a writer held: look once more.
        if report.passed_over:
            held_passes += 1
            if held_passes >= HELD_PASSES:
                report.finished = False
                break
            time.sleep(HELD_PAUSE_SECONDS)
    report.seconds = time.perf_counter() - started
    return report


def _drain_pass(
    report: DrainReport,
    context: Context | None,
    batch_size: int,
    deadline: float | None,
    on_progress: Callable[[DrainReport], None] | None,
) -> bool:
    """One pass over the rows waiting now; False when it stopped at the deadline."""
    report.passed_over = 0
    after = dict.fromkeys(VECTOR_TARGETS, 0)
    while batch := _pending_batch(after, context=context, size=batch_size):
        written = _embed_and_write(batch, skip_held=True)
        report.model_calls += 1
        for target, count in written.items():
            report.written[target] += count
        report.passed_over += len(batch) - sum(written.values())
        if on_progress is not None:
            on_progress(report)
        if deadline is not None and time.perf_counter() >= deadline:
            return False
    return True


# --- manage.py reembed --------------------------------------------------------------------


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
    written, after = 0, 0
    while True:
        # By key from the last batch on: with --all every row stays a candidate, and
        # a row the embedder skipped (deleted meanwhile) is not read again.
        ids = list(
            rows.filter(pk__gt=after).order_by("pk").values_list("pk", flat=True)[:batch_size]
        )
        if not ids:
            return written
        written += vectors_compute(target, ids, batch_size=batch_size)
        after = ids[-1]
        if on_progress is not None:
            on_progress(written)
