"""Bulk-loading BM25 postings for items that are not indexed yet (a memory import).

``postings_replace`` (bm25_postings.py) re-indexes a batch of items in a few statements
per batch: it deletes their old documents first and looks their terms up batch by batch,
which is what a writer changing live items needs. A whole corpus arriving at once needs
neither. Here the analyzed items are copied (COPY) into two session-local staging tables
as they are read; the postings are joined to their term ids once the corpus's new terms
are in, and three INSERT … SELECT statements write the terms, the search documents and
their postings. The triggers of search/models.py run once per
statement: the corpus statistics and each term's df and bounds come out exactly as
``postings_replace`` would leave them.

A caller whose transaction writes with triggers off (a restore, memory/infra/restore_writes.py)
gets the triggers' work done here set-based: the corpus statistics, as
``search_doc_inserted`` adds them, the documents' foreign keys, and each term's df and
bounds, as ``search_postings_inserted`` adds one statement's postings — computed from the
staged postings in the statement that adds the corpus's terms, instead of an update of
every term the postings name once they are written.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from typing import IO, Any

from django.db import connection

from memory.infra.restore_writes import (
    foreign_keys_check,
    replica_role_on,
    serial_sequence,
    triggers_firing,
)
from memory.search.analyzer import analyze
from memory.search.bm25_postings import REF_COLUMN
from memory.search.models import SearchDoc, Target

# Items analyzed and copied per COPY statement (the rows come from a server-side cursor
# of the same connection, which cannot fetch while a COPY is open).
COPY_BATCH = 5_000
# Distinct words whose terms are remembered; past this the memo starts again (a corpus of
# unique codes would otherwise keep every one of them).
MEMO_WORDS = 50_000

_DOCS = "bm25_load_docs"
_POSTINGS = "bm25_load_postings"
_IDS = "bm25_load_ids"
# The documents' insert trigger whose work ``_documents_checked`` does when triggers are off:
# (table, trigger, md5 of its function's source), as memory/infra/restore_writes.py reads them.
DOCUMENTS_TRIGGER = ("search_searchdoc", "search_doc_inserted", "5795a20ff80c2a66525d869464ed5df5")
# The postings' insert trigger (search migration 0003) whose work ``_terms_counted`` does.
POSTINGS_TRIGGER = (
    "search_searchposting",
    "search_postings_inserted",
    "8d0f0ddf127e5a8122032450c4991f7c",
)


class WordTerms:
    """``analyze`` one word at a time, remembering each word's terms.

    ``analyze`` treats every whitespace-separated word on its own (the blank and class
    passes, the stop list and the stemmer all work per word), so the terms of a text are
    its words' terms in order. Corpora repeat their words: a word is analyzed once.
    """

    def __init__(self) -> None:
        self.memo: dict[str, list[str]] = {}

    def terms(self, text: str) -> list[str]:
        out: list[str] = []
        memo = self.memo
        for word in text.lower().split():
            terms = memo.get(word)
            if terms is None:
                if len(memo) >= MEMO_WORDS:
                    memo.clear()
                terms = memo[word] = analyze(word)
            out.extend(terms)
        return out


def postings_load(*, context_id: int, target: Target, items: Iterable[tuple[int, str, str]]) -> int:
    """Index ``items`` (id, scope, text), none of which has a search document yet, in the
    caller's transaction. Returns how many were indexed."""
    # A failure leaves the staging tables to the caller's rollback, which drops them:
    # they are created in its transaction (and dropped first, should an earlier call
    # outside a transaction have left them).
    _staging_create()
    count = _stage(items)
    if count:
        _write(context_id, target)
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {_DOCS}, {_POSTINGS}, {_IDS}")
    return count


class PostingsSpool:
    """Items analyzed ahead of their load, into two temporary files in COPY's text
    format (the documents, the postings), so that the analysis needs no database
    connection: a restore analyzes its texts in a thread while its connection writes
    the rows (memory/services/transfer/import_index.py). Memory stays flat: a batch of
    rows at a time is held, the rest is on disk."""

    def __init__(self) -> None:
        self.analyzer = WordTerms()
        # Closed by close(): the files outlive the analysis, until the load.
        self.docs: IO[str] = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115
        self.postings: IO[str] = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115
        self.count = 0
        self._docs: list[str] = []
        self._postings: list[str] = []

    def add(self, ref: int, scope: str, text: str) -> None:
        terms = self.analyzer.terms(text)
        length = len(terms)
        self._docs.append(f"{ref}\t{_copy_field(scope)}\t{length}\n")
        bag: dict[str, int] = {}
        for term in terms:
            bag[term] = bag.get(term, 0) + 1
        prefix, suffix = f"{ref}\t", f"\t{length}\n"
        self._postings.extend([f"{prefix}{term}\t{tf}{suffix}" for term, tf in bag.items()])
        self.count += 1
        if len(self._docs) >= COPY_BATCH:
            self._spill()

    def _spill(self) -> None:
        self.docs.write("".join(self._docs))
        self.postings.write(_copy_text("".join(self._postings)))
        self._docs, self._postings = [], []

    def finish(self) -> None:
        """Write what is held and rewind the files for the load."""
        self._spill()
        self.analyzer = WordTerms()  # its memo is not needed any more
        for spooled in (self.docs, self.postings):
            spooled.flush()
            spooled.seek(0)

    def close(self) -> None:
        self.docs.close()
        self.postings.close()


def postings_load_spooled(
    *, context_id: int, target: Target, spool: PostingsSpool, refs: str | None = None
) -> int:
    """``postings_load`` of items already analyzed into ``spool`` (finished). ``refs``
    names a table ``(id, new_id)`` through which the spooled refs become the items' ids
    (a restore's map from the file's ids to the rows'), or None when they already are."""
    _staging_create()
    with connection.cursor() as cursor:
        for table, columns, spooled in (
            (_DOCS, "ref, scope, length", spool.docs),
            (_POSTINGS, "ref, term, tf, dl", spool.postings),
        ):
            with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                while block := spooled.read(1 << 20):
                    copy.write(block)
    if spool.count:
        _write(context_id, target, refs)
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {_DOCS}, {_POSTINGS}, {_IDS}")
    return spool.count


def _staging_create() -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {_DOCS}, {_POSTINGS}, {_IDS}")
        # Each document takes its id now, from the documents' own sequence, so postings
        # can name it without a join back through the item's column. The sequence is
        # named by oid: ``nextval(pg_get_serial_sequence(…))`` looked it up again for
        # every row (a stable function is not folded into a constant).
        sequence = serial_sequence("search_searchdoc")
        cursor.execute(
            f"""
            CREATE TEMP TABLE {_DOCS} (
                ref bigint NOT NULL,
                scope text NOT NULL,
                length integer NOT NULL,
                doc_id bigint NOT NULL DEFAULT nextval({sequence}::regclass)
            )
            """
        )
        # The document's length beside each posting: the terms' bounds take its minimum.
        cursor.execute(
            f"CREATE TEMP TABLE {_POSTINGS} (ref bigint NOT NULL, term text NOT NULL, "
            "tf integer NOT NULL, dl integer NOT NULL)"
        )


def _stage(items: Iterable[tuple[int, str, str]]) -> int:
    analyzer = WordTerms()
    count = 0
    batch: list[tuple[int, str, str]] = []
    for item in items:
        batch.append(item)
        if len(batch) >= COPY_BATCH:
            count += _copy(batch, analyzer)
            batch = []
    if batch:
        count += _copy(batch, analyzer)
    return count


def _copy(batch: list[tuple[int, str, str]], analyzer: WordTerms) -> int:
    docs = []
    postings: list[str] = []  # COPY's text format, written by hand: most of the rows are these
    for ref, scope, text in batch:
        terms = analyzer.terms(text)
        docs.append((ref, scope, len(terms)))
        bag: dict[str, int] = {}
        for term in terms:
            bag[term] = bag.get(term, 0) + 1
        prefix, suffix = f"{ref}\t", f"\t{len(terms)}\n"
        postings.extend([f"{prefix}{term}\t{tf}{suffix}" for term, tf in bag.items()])
    with connection.cursor() as cursor:
        with cursor.cursor.copy(f"COPY {_DOCS} (ref, scope, length) FROM STDIN") as copy:
            for doc in docs:
                copy.write_row(doc)
        with cursor.cursor.copy(f"COPY {_POSTINGS} (ref, term, tf, dl) FROM STDIN") as copy:
            copy.write(_copy_text("".join(postings)))
    return len(batch)


def _copy_field(text: str) -> str:
    """One text field in COPY's text format."""
    if "\\" in text or "\t" in text or "\n" in text or "\r" in text:
        text = text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
        text = text.replace("\r", "\\r")
    return text


def _copy_text(rows: str) -> str:
    """Postings rows in COPY's text format: terms hold no whitespace (the analyzer splits
    on it) and ids and counts are digits, so a backslash is the one character to escape,
    and it is escaped in the whole batch at once."""
    return rows.replace("\\", "\\\\") if "\\" in rows else rows


def _write(context_id: int, target: Target, refs: str | None = None) -> None:
    column = REF_COLUMN[target]
    # The staged refs as the items' ids: as they are, or through the caller's map.
    ref, mapped = ("m.new_id", f"JOIN {refs} m ON m.id = d.ref") if refs else ("d.ref", "")
    triggers_off = replica_role_on()
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {_DOCS}")
        cursor.execute(f"ANALYZE {_POSTINGS}")
        # The corpus's terms, in sorted order as postings_replace adds them (two writers
        # adding overlapping terms then take their row locks in one order).
        if triggers_off:
            _terms_counted(cursor, context_id, target)
        else:
            cursor.execute(
                f"""
                INSERT INTO search_searchterm (context_id, target, text)
                SELECT %s, %s, term FROM (SELECT DISTINCT term FROM {_POSTINGS}) t ORDER BY term
                ON CONFLICT (context_id, target, text) DO NOTHING
                """,  # noqa: S608 - the staging tables' own names
                [context_id, target.value],
            )
        cursor.execute(
            f"""
            CREATE TEMP TABLE {_IDS} AS
            SELECT p.ref, p.tf, t.id AS term_id
            FROM {_POSTINGS} p
            JOIN search_searchterm t
              ON t.context_id = %s AND t.target = %s AND t.text = p.term
            """,  # noqa: S608 - the staging tables' own names
            [context_id, target.value],
        )
        cursor.execute(
            f"""
            INSERT INTO search_searchdoc (id, context_id, target, {column}, scope, length,
                                          term_ids)
            SELECT d.doc_id, %s, %s, {ref}, d.scope, d.length,
                   coalesce(i.term_ids, '{{}}')
            FROM {_DOCS} d {mapped}
            LEFT JOIN (SELECT ref, array_agg(term_id) AS term_ids
                       FROM {_IDS} GROUP BY ref) i ON i.ref = d.ref
            ORDER BY d.doc_id
            """,  # noqa: S608 - the staging tables' own names, the item's column
            [context_id, target.value],
        )
        if triggers_off:
            _documents_checked(cursor, context_id, target, mapped=refs is not None)
        # In the primary key's order: the index is written left to right. With triggers
        # off, the terms' df and bounds are already counted (``_terms_counted``).
        cursor.execute(
            f"""
            INSERT INTO search_searchposting (term_id, doc_id, tf, dl)
            SELECT i.term_id, d.doc_id, i.tf, d.length
            FROM {_IDS} i JOIN {_DOCS} d ON d.ref = i.ref
            ORDER BY i.term_id, d.doc_id
            """  # noqa: S608 - the staging tables' own names
        )


def _terms_counted(cursor: Any, context_id: int, target: Target) -> None:
    """The corpus's terms with what ``search_postings_inserted`` adds for the staged
    postings: each term's df grows by its postings, its largest tf and shortest document
    (``min_dl`` taken afresh by a term no document holds any more) — one aggregate over
    the staged postings, written with the terms, not an update of each term afterwards."""
    cursor.execute(
        f"""
        INSERT INTO search_searchterm AS t (context_id, target, text, df, max_tf, min_dl)
        SELECT %s, %s, term, count(*), max(tf), min(dl)
        FROM {_POSTINGS} GROUP BY term ORDER BY term
        ON CONFLICT (context_id, target, text) DO UPDATE
        SET df = t.df + EXCLUDED.df,
            max_tf = greatest(t.max_tf, EXCLUDED.max_tf),
            min_dl = CASE WHEN t.df = 0 THEN EXCLUDED.min_dl
                          ELSE least(t.min_dl, EXCLUDED.min_dl) END
        """,  # noqa: S608 - the staging table's own name
        [context_id, target.value],
    )


def _document_keys() -> frozenset[tuple[str, str]]:
    """A search document's references, as (column, referenced table): its context and
    the one item it indexes (the others it leaves NULL)."""
    return frozenset(
        (str(f.column), f.related_model._meta.db_table)
        for f in SearchDoc._meta.concrete_fields
        if f.is_relation and f.related_model is not None
    )


def _documents_checked(cursor: Any, context_id: int, target: Target, mapped: bool) -> None:
    """What the documents' triggers do when they fire: the corpus statistics (as
    ``search_doc_inserted`` adds one statement's documents, with the statistics' own
    triggers firing) and the foreign keys of the documents and of the corpus's terms.
    ``mapped``: the documents' items came through the caller's id map (a restore's map
    of the rows it wrote, in a context it holds locked), so the documents' references
    are kept by construction and only keys a migration may add are looked up."""
    with triggers_firing():
        cursor.execute(
            f"""
            INSERT INTO search_searchstats AS s (context_id, target, doc_count, total_length)
            SELECT %s, %s, count(*), sum(length) FROM {_DOCS}
            ON CONFLICT (context_id, target) DO UPDATE
            SET doc_count = s.doc_count + EXCLUDED.doc_count,
                total_length = s.total_length + EXCLUDED.total_length
            """,  # noqa: S608 - the staging table's own name
            [context_id, target.value],
        )
    foreign_keys_check(
        "search_searchdoc",
        f"SELECT doc_id FROM {_DOCS}",  # noqa: S608 - the staging table's own name
        guaranteed=_document_keys() if mapped else (),
    )
    foreign_keys_check(
        "search_searchterm",
        "SELECT id FROM search_searchterm WHERE context_id = %s AND target = %s",
        [context_id, target.value],
    )
