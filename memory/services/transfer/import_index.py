"""The indexes of an imported memory: search postings and blocking keys, in bulk.

Every fact, entity, chunk and turn of the context is new (an import only goes into an
empty context), so none has a search document yet: their postings are loaded in bulk
(memory/search/bm25_load.py), the texts made as the services' own indexing makes them
(memory/search/texts.py). Nor has any entity a blocking key: they are added a batch of
entities at a time.

Facts and entities, most of a memory, are analyzed from the file's own rows while the
connection writes them (``ImportTexts``): their rows are spooled to a temporary file as
the lines are read, and a thread analyzes them into a ``PostingsSpool`` — Python's part
on one core while PostgreSQL writes the rows on the other, where one would otherwise wait
for the other. A fact's text needs its subject's, object's and predicate's names, which
the thread holds (one name an entity) while it analyzes the facts. A file whose cells
are not of the types the rows will hold (a name given as a number, say: the text the row
holds is PostgreSQL's rendering of it) has its facts and entities read back once written
instead, as chunks and turns always are, through server-side cursors.
"""

from __future__ import annotations

import pickle
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, TypeVar

from django.db import connection, models

from memory.matching.blocking import blocking_keys
from memory.matching.records import records_of
from memory.matching.scoring import Record
from memory.models import Chunk, Context, Entity, Fact, Item, Turn
from memory.models.duplicate import DuplicateKey
from memory.search.bm25_load import PostingsSpool, postings_load, postings_load_spooled
from memory.search.models import Target
from memory.search.texts import (
    chunk_index_text,
    entity_text,
    entity_text_of,
    fact_text_of,
    turn_index_text,
)
from memory.services.transfer.format import Kind

T = TypeVar("T")

FETCH_ROWS = 5_000  # rows a fetch of the server-side cursors
KEY_BATCH = 5_000  # entities whose blocking keys are made and copied at a time
YIELD_EVERY = 32  # items a thread analyzes between two offers of the GIL (about 0.3 ms)


# The fields of each line type a fact's or an entity's text is made of, in this order.
SPOOLED_FIELDS: dict[str, tuple[str, ...]] = {
    "predicate": ("id", "name"),
    "entity": ("id", "scope", "name", "aliases"),
    "fact": ("id", "scope", "subject_id", "predicate_id", "object_id", "value_text"),
}
SPOOL_ROWS = 5_000  # rows pickled at a time


def _predicate_typed(cells: tuple[Any, ...]) -> bool:
    pk, name = cells
    return type(pk) is int and type(name) is str


def _entity_typed(cells: tuple[Any, ...]) -> bool:
    pk, scope, name, aliases = cells
    return (
        type(pk) is int
        and type(scope) is str
        and type(name) is str
        and type(aliases) is list
        and all(type(alias) is str for alias in aliases)
    )


def _fact_typed(cells: tuple[Any, ...]) -> bool:
    # Spelled out: this runs once a fact line, a million times in a large import.
    pk, scope, subject, predicate, obj, value_text = cells
    return (
        type(pk) is int
        and type(subject) is int
        and type(predicate) is int
        and (obj is None or type(obj) is int)
        and type(scope) is str
        and type(value_text) is str
    )


# Whether a spooled row's cells are what the written row will hold, by line type.
_TYPED: dict[str, Callable[[tuple[Any, ...]], bool]] = {
    "predicate": _predicate_typed,
    "entity": _entity_typed,
    "fact": _fact_typed,
}


class ImportTexts:
    """The rows of an import's facts, entities and predicates, as staged, kept in
    temporary files and analyzed into postings by a thread (see the module docstring)."""

    def __init__(self) -> None:
        self.files: dict[str, IO[bytes]] = {}
        self.held: dict[str, list[tuple[Any, ...]]] = {}
        self.positions: dict[str, list[int]] = {}
        self.spools: dict[Target, PostingsSpool] = {}
        self.thread: threading.Thread | None = None
        self.failure: BaseException | None = None
        # False once a row is not as its written row will be: read back instead.
        self.usable = True

    def wants(self, kind: Kind) -> bool:
        return kind.name in SPOOLED_FIELDS

    def add(self, kind: Kind, row: list[Any]) -> None:
        """One staged row (its cells in the order of ``kind.fields()``)."""
        if not self.usable:
            return
        positions = self.positions.get(kind.name)
        if positions is None:
            names = [f.attname for f in kind.fields()]
            wanted = SPOOLED_FIELDS[kind.name]
            positions = self.positions[kind.name] = [names.index(n) for n in wanted]
        cells = tuple([row[i] for i in positions])
        if not _TYPED[kind.name](cells):
            self.usable = False
            return
        held = self.held.setdefault(kind.name, [])
        held.append(cells)
        if len(held) >= SPOOL_ROWS:
            self._spill(kind.name)

    def _spill(self, name: str) -> None:
        rows = self.held.pop(name, [])
        if rows:
            if name not in self.files:
                # Closed by close(), which the import calls whatever happens.
                self.files[name] = tempfile.TemporaryFile()  # noqa: SIM115
            pickle.dump(rows, self.files[name], protocol=pickle.HIGHEST_PROTOCOL)

    def start(self) -> None:
        """Analyze every row read, in a thread (it touches no database connection)."""
        if not self.usable:
            return
        for name in list(self.held):
            self._spill(name)
        self.thread = threading.Thread(target=self._run, name="import-texts", daemon=True)
        self.thread.start()

    def spooled(self) -> dict[Target, PostingsSpool] | None:
        """Wait for the analysis; the facts' and entities' spools, ready to load, or None
        when they are to be read back (a row not as written, a reference the file does
        not hold — the import refuses the file before this is asked)."""
        if self.thread is not None:
            self.thread.join()
            self.thread = None
        if not self.usable or self.failure is not None:
            return None
        return self.spools

    def close(self) -> None:
        if self.thread is not None:
            self.thread.join()
            self.thread = None
        for spooled in self.files.values():
            spooled.close()
        for spool in self.spools.values():
            spool.close()

    def _rows(self, name: str) -> Iterator[tuple[Any, ...]]:
        spooled = self.files.get(name)
        if spooled is None:
            return
        spooled.seek(0)
        while True:
            try:
                rows = pickle.load(spooled)  # noqa: S301 - this import's own file
            except EOFError:
                return
            yield from rows

    def _run(self) -> None:
        try:
            self._analyze()
        except Exception as exc:  # the facts and entities are read back instead
            self.failure = exc

    def _analyze(self) -> None:
        predicates = dict(self._rows("predicate"))
        names: dict[int, str] = {}
        entities = self.spools[Target.ENTITY] = PostingsSpool()
        for pk, scope, name, aliases in _yielding(self._rows("entity")):
            names[pk] = name
            entities.add(pk, scope, entity_text_of(name=name, aliases=aliases))
        entities.finish()
        facts = self.spools[Target.FACT] = PostingsSpool()
        for pk, scope, subject, predicate, obj, value_text in _yielding(self._rows("fact")):
            text = fact_text_of(
                subject=names[subject],
                predicate=predicates[predicate],
                obj=names[obj] if obj is not None else value_text,
            )
            facts.add(pk, scope, text)
        facts.finish()


def memory_import_index(context: Context, texts: ImportTexts, refs: dict[Target, str]) -> bool:
    """Search postings of every imported fact, entity, chunk, turn and item, in bulk:
    none of them is indexed yet (the context was empty). ``texts`` holds the facts' and
    entities' postings, analyzed from the file's rows under the file's ids; ``refs``
    names each one's map from those ids to the rows'. Returns whether those were used
    (False: the facts and entities were read back)."""
    spools = texts.spooled()
    if spools is None:
        _facts_and_entities_read_back(context)
    else:
        for target, spool in spools.items():
            postings_load_spooled(
                context_id=context.pk, target=target, spool=spool, refs=refs[target]
            )
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
    # An item's indexed text is kept on its row, as its put selected it.
    items = Item.objects.filter(context=context).exclude(text="").values_list("pk", "scope", "text")
    postings_load(context_id=context.pk, target=Target.ITEM, items=_stream(items))
    return spools is not None


def _facts_and_entities_read_back(context: Context) -> None:
    # Not analyzed with the other tables when the texts were to be analyzed ahead; the
    # read below joins the facts to their entities and predicate.
    with connection.cursor() as cursor:
        cursor.execute(
            f"ANALYZE {Fact._meta.db_table} (id, context_id, subject_id, predicate_id, object_id)"
        )
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


class ImportKeys:
    """The duplicate finder's blocking keys of every imported live entity, as the full
    scan's ``keys_write_all`` writes them, but a batch of entities at a time: that one
    holds the whole context's records and keys at once, and replaces keys an import's
    empty context does not have.

    ``begin`` reads the first batch's records and makes their keys in a thread (Python
    only) while the connection loads the search postings; ``write`` writes them and the
    other batches', each batch's keys made in the thread while the connection reads the
    next batch's records and copies the batch before. An import of up to ``KEY_BATCH``
    live entities makes all of its keys while the postings load."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self.after = 0
        self.thread: threading.Thread | None = None
        self.ahead: list[tuple[int, int, str, str]] = []
        self.failure: BaseException | None = None

    def begin(self) -> bool:
        """Read the next batch's records and make their keys in a thread; False when
        every batch has been read."""
        ids = self._next_ids()
        if not ids:
            return False
        records = records_of(self.context.pk, ids)
        self.thread = threading.Thread(
            target=self._make_ahead, args=(records,), name="import-keys", daemon=True
        )
        self.thread.start()
        return True

    def write(self) -> int:
        """Write every live entity's keys; returns how many were written."""
        written = 0
        while True:
            self._join()
            if self.failure is not None:
                raise self.failure  # as it would have been raised without the thread
            rows, self.ahead = self.ahead, []
            more = self.begin()  # the next batch's keys are made while these are copied
            written += self._copy(rows)
            if not more:
                return written

    def close(self) -> None:
        self._join()

    def _join(self) -> None:
        if self.thread is not None:
            self.thread.join()
            self.thread = None

    def _make_ahead(self, records: dict[int, Record]) -> None:
        try:
            self.ahead = self._rows(_yielding(records.values()))
        except Exception as exc:  # handed to the connection's thread by write()
            self.failure = exc

    def _next_ids(self) -> list[int]:
        live = Entity.objects.filter(context=self.context, merged_into__isnull=True)
        ids = list(
            live.filter(pk__gt=self.after).order_by("pk").values_list("pk", flat=True)[:KEY_BATCH]
        )
        if ids:
            self.after = ids[-1]
        return ids

    def _rows(self, records: Iterable[Record]) -> list[tuple[int, int, str, str]]:
        context_id = self.context.pk
        return [
            (context_id, record.id, record.type, key)
            for record in records
            for key in blocking_keys(record)
        ]

    def _copy(self, rows: list[tuple[int, int, str, str]]) -> int:
        if not rows:
            return 0
        sql = f"COPY {DuplicateKey._meta.db_table} (context_id, entity_id, type, key) FROM STDIN"
        with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
            for row in rows:
                copy.write_row(row)
        return len(rows)


def _yielding(items: Iterable[T]) -> Iterator[T]:
    """``items``, for a thread working beside the connection's: the GIL is offered every
    ``YIELD_EVERY`` items. A thread that never blocks keeps it for the interpreter's
    switch interval (5 ms) each time the connection's thread wakes to read a result,
    which cost several milliseconds a statement (measured: 100 one-millisecond
    statements took 0.8–1.2 s beside a busy thread, 0.23 s beside one that yields)."""
    for n, item in enumerate(items):
        if n % YIELD_EVERY == 0:
            time.sleep(0)
        yield item


def _stream(rows: models.QuerySet[Any, Any]) -> Iterator[Any]:
    """In id order (documents get ids in the order of their items), a fetch at a time."""
    return rows.order_by("pk").iterator(chunk_size=FETCH_ROWS)
