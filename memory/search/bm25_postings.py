"""BM25 postings: what indexing writes (documents, the term dictionary, posting lists).

The triggers of migrations 0002 and 0003 keep the corpus statistics (``SearchStats``)
and each term's df, max_tf and min_dl as postings come and go; ranking
(bm25_scoring.py) reads them.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from django.db import connection

from memory.pg import array_literal, int_array_literal
from memory.search.models import Target

# The column of ``search_searchdoc`` that names what a document indexes.
REF_COLUMN = {
    Target.CHUNK: "chunk_id",
    Target.FACT: "fact_id",
    Target.ENTITY: "entity_id",
    Target.TURN: "turn_id",
}


@dataclass(frozen=True)
class IndexItem:
    """One chunk, fact or entity to index: its id, scope and analyzed terms."""

    ref_id: int
    scope: str
    terms: list[str]


def postings_delete(*, target: Target, ref_ids: Sequence[int]) -> None:
    """Drop items from the index (the trigger removes postings and updates statistics)."""
    if not ref_ids:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM search_searchdoc WHERE {REF_COLUMN[target]} = ANY(%s)",  # noqa: S608
            [list(ref_ids)],
        )


@dataclass(frozen=True)
class IndexBatch:
    """Items of one target to (re-)index; ``unindexed``: the ids among them that have
    never been indexed (rows inserted in this transaction), whose old postings need no
    delete."""

    target: Target
    items: Sequence[IndexItem]
    unindexed: Collection[int] = ()


def postings_replace(
    *,
    context_id: int,
    target: Target,
    items: Sequence[IndexItem],
    unindexed: Collection[int] = (),
) -> None:
    """(Re-)index ``items`` in the caller's transaction: old postings out, new ones in.

    ``unindexed``: ids among them that have never been indexed (rows inserted in this
    transaction), whose old postings need no delete. Naming an indexed one by mistake
    fails loudly: its second document breaks the unique reference."""
    postings_replace_batches(context_id=context_id, batches=[IndexBatch(target, items, unindexed)])


def postings_replace_batches(*, context_id: int, batches: Sequence[IndexBatch]) -> None:
    """``postings_replace`` of several targets at once (a write's facts and entities):
    a delete per target that has indexed items, then one statement for the terms of
    every target and one for every document and posting."""
    batches = [b for b in batches if b.items]
    if not batches:
        return
    for batch in batches:
        postings_delete(
            target=batch.target,
            ref_ids=[i.ref_id for i in batch.items if i.ref_id not in batch.unindexed],
        )
    bags = [[Counter(item.terms) for item in batch.items] for batch in batches]
    term_ids = _term_ids(
        context_id=context_id,
        wanted=sorted(
            {
                (batch.target.value, term)
                for batch, of in zip(batches, bags, strict=True)
                for bag in of
                for term in bag
            }
        ),
    )
    doc_targets: list[str] = []
    doc_refs: list[int] = []
    doc_scopes: list[str] = []
    doc_lengths: list[int] = []
    doc_terms: list[str] = []
    doc_keys: list[int] = []  # a posting's document: its position among the documents
    terms: list[int] = []
    tfs: list[int] = []
    for batch, of in zip(batches, bags, strict=True):
        ids = term_ids[batch.target.value]
        for item, bag in zip(batch.items, of, strict=True):
            position = len(doc_refs)
            doc_targets.append(batch.target.value)
            doc_refs.append(item.ref_id)
            doc_scopes.append(item.scope)
            doc_lengths.append(sum(bag.values()))
            doc_terms.append(int_array_literal(ids[t] for t in bag))
            for term, tf in bag.items():
                doc_keys.append(position)
                terms.append(ids[term])
                tfs.append(tf)
    columns = sorted({REF_COLUMN[batch.target] for batch in batches})
    with connection.cursor() as cursor:
        cursor.execute(
            _DOCS_AND_POSTINGS_SQL.format(
                columns=", ".join(columns),
                refs=", ".join("CASE WHEN x.target = %s THEN x.ref END" for _ in columns),
                returned=f"COALESCE({', '.join(columns)})" if len(columns) > 1 else columns[0],
            ),
            [
                array_literal(doc_targets),
                int_array_literal(doc_refs),
                array_literal(doc_scopes),
                int_array_literal(doc_lengths),
                array_literal(doc_terms),
                context_id,
                *[_TARGET_OF_COLUMN[c] for c in columns],
                int_array_literal(doc_keys),
                int_array_literal(terms),
                int_array_literal(tfs),
            ],
        )


_TARGET_OF_COLUMN = {column: target.value for target, column in REF_COLUMN.items()}

# The documents and their postings in one statement: the postings join the document ids
# the insert returns (by the document's position in the statement's arrays, kept
# through the target and reference the insert returns), so they need no second round
# trip and no id mapping in Python. Postings go in key order: neighbouring rows land on
# the same primary-key leaf pages instead of one random page each. The statement-level
# triggers of both tables fire once, at its end, as they would for two statements.
_DOCS_AND_POSTINGS_SQL = """
    WITH x AS (
        SELECT x.*, x.n - 1 AS position
        FROM unnest(%s::text[], %s::bigint[], %s::text[], %s::int[], %s::text[])
            WITH ORDINALITY AS x(target, ref, scope, len, terms, n)
    ), docs AS (
        INSERT INTO search_searchdoc (context_id, target, {columns}, scope, length, term_ids)
        SELECT %s, x.target, {refs}, x.scope, x.len, x.terms::bigint[]
        FROM x
        RETURNING target, {returned} AS ref, id, length
    )
    INSERT INTO search_searchposting (term_id, doc_id, tf, dl)
    SELECT p.term_id, docs.id, p.tf, docs.length
    FROM unnest(%s::int[], %s::bigint[], %s::int[]) AS p(position, term_id, tf)
    JOIN x ON x.position = p.position
    JOIN docs ON docs.target = x.target AND docs.ref = x.ref
    ORDER BY p.term_id, docs.id
"""


def _term_ids(*, context_id: int, wanted: list[tuple[str, str]]) -> dict[str, dict[str, int]]:
    """Ids of the ``(target, text)`` terms in the corpus dictionary, adding the new ones;
    target → text → id.

    Sorted inserts keep two writers adding overlapping new terms from deadlocking. One
    statement inserts the new terms (returning their ids) and reads the others; a term
    a concurrent writer committed while the insert skipped it as a conflict is outside
    that statement's snapshot, and is read by a second statement (a fresh snapshot),
    sent only then.
    """
    found: dict[str, dict[str, int]] = defaultdict(dict)
    if not wanted:
        return found
    targets = array_literal(t for t, _ in wanted)
    texts = array_literal(text for _, text in wanted)
    with connection.cursor() as cursor:
        cursor.execute(_TERMS_SQL, [targets, texts, context_id, context_id])
        for target, text, pk in cursor.fetchall():
            found[target][text] = pk
        missing = [(t, text) for t, text in wanted if text not in found[t]]
        if missing:
            cursor.execute(
                """
                SELECT t.target, t.text, t.id
                FROM unnest(%s::text[], %s::text[]) AS w(target, text)
                JOIN search_searchterm t
                  ON t.context_id = %s AND t.target = w.target AND t.text = w.text
                """,
                [
                    array_literal(t for t, _ in missing),
                    array_literal(text for _, text in missing),
                    context_id,
                ],
            )
            for target, text, pk in cursor.fetchall():
                found[target][text] = pk
    return found


# The rows the insert adds are invisible to the read beside it (one snapshot), so the
# two halves never return a term twice.
_TERMS_SQL = """
    WITH w AS (
        SELECT * FROM unnest(%s::text[], %s::text[]) AS w(target, text)
    ), added AS (
        INSERT INTO search_searchterm (context_id, target, text)
        SELECT %s, w.target, w.text FROM w
        ON CONFLICT (context_id, target, text) DO NOTHING
        RETURNING target, text, id
    )
    SELECT target, text, id FROM added
    UNION ALL
    SELECT t.target, t.text, t.id
    FROM w JOIN search_searchterm t
      ON t.context_id = %s AND t.target = w.target AND t.text = w.text
"""
