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

A caller whose transaction writes with triggers off (a restore, memory/restore_writes.py)
gets the triggers' work done here set-based: the corpus statistics, as
``search_doc_inserted`` adds them, the documents' foreign keys, and each term's df and
bounds, as ``search_postings_inserted`` adds one statement's postings — computed from the
staged postings in the statement that adds the corpus's terms, instead of an update of
every term the postings name once they are written.

Items analyzed ahead into a ``PostingsSpool`` (a restore's facts and entities) come with
their terms numbered and counted: the load copies the terms, one row each, and postings
that name them by number, so no statement groups or joins the postings by their texts.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from typing import IO, Any

from django.db import connection

from memory.restore_writes import (
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

# Terms a spooled corpus may number (``PostingsSpool``): about 50 MB of vocabulary.
VOCABULARY_TERMS = 500_000

_DOCS = "bm25_load_docs"
_POSTINGS = "bm25_load_postings"
_IDS = "bm25_load_ids"
_NUMBERED = "bm25_load_numbered"  # a spool's postings: (ref, term number, tf, dl)
_TERMS = "bm25_load_terms"  # a spool's terms: (number, text)
_TERM_IDS = "bm25_load_term_ids"


def _docs_table() -> str:
    """Each document takes its id as it is staged, from the documents' own sequence
    (named by oid: a look-up by name would run again for every row), so postings can
    name it without a join back through the item's column."""
    sequence = serial_sequence("search_searchdoc")
    return (
        f"CREATE TEMP TABLE {_DOCS} (ref bigint NOT NULL, scope text NOT NULL, "
        f"length integer NOT NULL, doc_id bigint NOT NULL DEFAULT nextval({sequence}::regclass))"
    )


# The documents' insert trigger whose work ``_documents_checked`` does when triggers are off:
# (table, trigger, md5 of its function's source), as memory/restore_writes.py reads them.
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


class VocabularyFull(Exception):
    """A spooled corpus has more distinct terms than ``VOCABULARY_TERMS``."""


class PostingsSpool:
    """Items analyzed ahead of their load, into temporary files in COPY's text format,
    so that the analysis needs no database connection: a restore analyzes its texts in a
    thread while its connection writes the rows (memory/services/memory_import_index.py).

    Each distinct term gets a number as it is first met: the postings file holds
    numbers, not texts, and the terms file one line a term, so the load groups and joins
    the postings by integers instead of by their texts. A batch of documents is held at
    a time, the rest is on disk; the vocabulary is held until ``finish`` (about 100
    bytes a distinct term), and a corpus whose vocabulary outgrows ``VOCABULARY_TERMS``
    raises ``VocabularyFull`` (its caller reads the items back instead)."""

    def __init__(self) -> None:
        # Closed by close(): the files outlive the analysis, until the load.
        self.docs: IO[str] = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115
        self.postings: IO[str] = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115
        self.terms: IO[str] = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115
        self.count = 0
        self._docs: list[str] = []
        self._postings: list[str] = []
        # Each term's number, as the text it is written with.
        self._numbers: dict[str, str] = {}
        # Each word's terms' numbers: a word is analyzed and numbered once (``WordTerms``).
        self._memo: dict[str, list[str]] = {}

    def _numbered(self, text: str) -> list[str]:
        """The numbers of ``text``'s terms, in order (``WordTerms.terms``, numbered)."""
        out: list[str] = []
        memo = self._memo
        for word in text.lower().split():
            numbered = memo.get(word)
            if numbered is None:
                if len(memo) >= MEMO_WORDS:
                    memo.clear()
                numbered = memo[word] = [self._number(term) for term in analyze(word)]
            out.extend(numbered)
        return out

    def _number(self, term: str) -> str:
        numbers = self._numbers
        number = numbers.get(term)
        if number is None:
            if len(numbers) >= VOCABULARY_TERMS:
                raise VocabularyFull(f"more than {VOCABULARY_TERMS} distinct terms")
            number = numbers[term] = str(len(numbers))
        return number

    def add(self, ref: int, scope: str, text: str) -> None:
        terms = self._numbered(text)
        length = len(terms)
        self._docs.append(f"{ref}\t{_copy_field(scope)}\t{length}\n")
        bag: dict[str, int] = {}
        for term in terms:
            bag[term] = bag.get(term, 0) + 1
        prefix, suffix = f"{ref}\t", f"\t{length}\n"
        self._postings.extend([f"{prefix}{number}\t{tf}{suffix}" for number, tf in bag.items()])
        self.count += 1
        if len(self._docs) >= COPY_BATCH:
            self._spill()

    def _spill(self) -> None:
        self.docs.write("".join(self._docs))
        self.postings.write("".join(self._postings))  # digits and tabs only
        self._docs, self._postings = [], []

    def finish(self) -> None:
        """Write what is held and the terms, and rewind the files for the load."""
        self._spill()
        lines: list[str] = []
        for term, number in self._numbers.items():
            lines.append(f"{number}\t{_copy_field(term)}\n")
            if len(lines) >= COPY_BATCH:
                self.terms.write("".join(lines))
                lines = []
        self.terms.write("".join(lines))
        # Neither the memo nor the vocabulary is needed any more.
        self._memo, self._numbers = {}, {}
        for spooled in (self.docs, self.postings, self.terms):
            spooled.flush()
            spooled.seek(0)

    def close(self) -> None:
        self.docs.close()
        self.postings.close()
        self.terms.close()


def postings_load_spooled(
    *, context_id: int, target: Target, spool: PostingsSpool, refs: str | None = None
) -> int:
    """``postings_load`` of items already analyzed into ``spool`` (finished). ``refs``
    names a table ``(id, new_id)`` through which the spooled refs become the items' ids
    (a restore's map from the file's ids to the rows'), or None when they already are."""
    _numbered_create()
    with connection.cursor() as cursor:
        for table, columns, spooled in (
            (_DOCS, "ref, scope, length", spool.docs),
            (_NUMBERED, "ref, number, tf, dl", spool.postings),
            (_TERMS, "number, text", spool.terms),
        ):
            with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                while block := spooled.read(1 << 20):
                    copy.write(block)
    if spool.count:
        _write_numbered(context_id, target, refs)
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {_DOCS}, {_NUMBERED}, {_TERMS}, {_TERM_IDS}")
    return spool.count


def _numbered_create() -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {_DOCS}, {_NUMBERED}, {_TERMS}, {_TERM_IDS}")
        cursor.execute(_docs_table())
        cursor.execute(
            f"CREATE TEMP TABLE {_NUMBERED} (ref bigint NOT NULL, number integer NOT NULL, "
            "tf integer NOT NULL, dl integer NOT NULL)"
        )
        cursor.execute(f"CREATE TEMP TABLE {_TERMS} (number integer NOT NULL, text text NOT NULL)")


def _write_numbered(context_id: int, target: Target, refs: str | None) -> None:
    """``_write`` for spooled items: the postings name their terms by number."""
    column = REF_COLUMN[target]
    ref, mapped = ("m.new_id", f"JOIN {refs} m ON m.id = d.ref") if refs else ("d.ref", "")
    triggers_off = replica_role_on()
    corpus: list[Any] = [context_id, target.value]
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {_DOCS}")
        cursor.execute(f"ANALYZE {_NUMBERED}")
        cursor.execute(f"ANALYZE {_TERMS}")
        if triggers_off:
            # What ``search_postings_inserted`` adds for these postings (``_terms_counted``).
            cursor.execute(
                f"""
                INSERT INTO search_searchterm AS t (context_id, target, text, df, max_tf, min_dl)
                SELECT %s, %s, s.text, c.df, c.max_tf, c.min_dl
                FROM {_TERMS} s
                JOIN (SELECT number, count(*) AS df, max(tf) AS max_tf, min(dl) AS min_dl
                      FROM {_NUMBERED} GROUP BY number) c ON c.number = s.number
                ORDER BY s.text
                ON CONFLICT (context_id, target, text) DO UPDATE
                SET df = t.df + EXCLUDED.df,
                    max_tf = greatest(t.max_tf, EXCLUDED.max_tf),
                    min_dl = CASE WHEN t.df = 0 THEN EXCLUDED.min_dl
                                  ELSE least(t.min_dl, EXCLUDED.min_dl) END
                """,  # noqa: S608 - the staging table's own name
                corpus,
            )
        else:
            cursor.execute(
                f"""
                INSERT INTO search_searchterm (context_id, target, text)
                SELECT %s, %s, text FROM {_TERMS} ORDER BY text
                ON CONFLICT (context_id, target, text) DO NOTHING
                """,  # noqa: S608 - the staging table's own name
                corpus,
            )
        cursor.execute(
            f"""
            CREATE TEMP TABLE {_TERM_IDS} AS
            SELECT s.number, t.id AS term_id
            FROM {_TERMS} s
            JOIN search_searchterm t ON t.context_id = %s AND t.target = %s AND t.text = s.text
            """,  # noqa: S608 - the staging tables' own names
            corpus,
        )
        cursor.execute(f"ANALYZE {_TERM_IDS}")
        cursor.execute(
            f"""
            INSERT INTO search_searchdoc (id, context_id, target, {column}, scope, length,
                                          term_ids)
            SELECT d.doc_id, %s, %s, {ref}, d.scope, d.length,
                   coalesce(i.term_ids, '{{}}')
            FROM {_DOCS} d {mapped}
            LEFT JOIN (SELECT p.ref, array_agg(n.term_id) AS term_ids
                       FROM {_NUMBERED} p JOIN {_TERM_IDS} n ON n.number = p.number
                       GROUP BY p.ref) i ON i.ref = d.ref
            ORDER BY d.doc_id
            """,  # noqa: S608 - the staging tables' own names, the item's column
            corpus,
        )
        if triggers_off:
            _documents_checked(cursor, context_id, target, mapped=refs is not None)
        cursor.execute(
            f"""
            INSERT INTO search_searchposting (term_id, doc_id, tf, dl)
            SELECT n.term_id, d.doc_id, p.tf, p.dl
            FROM {_NUMBERED} p
            JOIN {_TERM_IDS} n ON n.number = p.number
            JOIN {_DOCS} d ON d.ref = p.ref
            ORDER BY n.term_id, d.doc_id
            """  # noqa: S608 - the staging tables' own names
        )


def _staging_create() -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {_DOCS}, {_POSTINGS}, {_IDS}")
        cursor.execute(_docs_table())
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


def _write(context_id: int, target: Target) -> None:
    column = REF_COLUMN[target]
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
            SELECT d.doc_id, %s, %s, d.ref, d.scope, d.length,
                   coalesce(i.term_ids, '{{}}')
            FROM {_DOCS} d
            LEFT JOIN (SELECT ref, array_agg(term_id) AS term_ids
                       FROM {_IDS} GROUP BY ref) i ON i.ref = d.ref
            ORDER BY d.doc_id
            """,  # noqa: S608 - the staging tables' own names, the item's column
            [context_id, target.value],
        )
        if triggers_off:
            _documents_checked(cursor, context_id, target, mapped=False)
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
