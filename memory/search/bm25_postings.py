"""BM25 postings: what indexing writes (documents, the term dictionary, posting lists).

The triggers of migrations 0002 and 0003 keep the corpus statistics (``SearchStats``)
and each term's df, max_tf and min_dl as postings come and go; ranking
(bm25_scoring.py) reads them.
"""

from __future__ import annotations

from collections import Counter
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
    if not items:
        return
    postings_delete(
        target=target, ref_ids=[item.ref_id for item in items if item.ref_id not in unindexed]
    )
    bags = [Counter(item.terms) for item in items]
    term_ids = _term_ids(
        context_id=context_id, target=target, terms=sorted({t for bag in bags for t in bag})
    )
    refs: list[int] = []
    terms: list[int] = []
    tfs: list[int] = []
    for item, bag in zip(items, bags, strict=True):
        for term, tf in bag.items():
            refs.append(item.ref_id)
            terms.append(term_ids[term])
            tfs.append(tf)
    with connection.cursor() as cursor:
        cursor.execute(
            _DOCS_AND_POSTINGS_SQL.format(column=REF_COLUMN[target]),
            [
                context_id,
                target.value,
                int_array_literal(item.ref_id for item in items),
                array_literal(item.scope for item in items),
                int_array_literal(sum(bag.values()) for bag in bags),
                array_literal(int_array_literal(term_ids[t] for t in bag) for bag in bags),
                int_array_literal(refs),
                int_array_literal(terms),
                int_array_literal(tfs),
            ],
        )


# The documents and their postings in one statement: the postings join the document ids
# the insert returns, so they need no second round trip (and no id mapping in Python).
# Postings go in key order: neighbouring rows land on the same primary-key leaf pages
# instead of one random page each. The statement-level triggers of both tables fire
# once, at its end, as they would for two statements.
_DOCS_AND_POSTINGS_SQL = """
    WITH docs AS (
        INSERT INTO search_searchdoc (context_id, target, {column}, scope, length, term_ids)
        SELECT %s, %s, x.ref, x.scope, x.len, x.terms::bigint[]
        FROM unnest(%s::bigint[], %s::text[], %s::int[], %s::text[])
            AS x(ref, scope, len, terms)
        RETURNING {column} AS ref, id, length
    )
    INSERT INTO search_searchposting (term_id, doc_id, tf, dl)
    SELECT p.term_id, docs.id, p.tf, docs.length
    FROM unnest(%s::bigint[], %s::bigint[], %s::int[]) AS p(ref, term_id, tf)
    JOIN docs ON docs.ref = p.ref
    ORDER BY p.term_id, docs.id
"""


def _term_ids(*, context_id: int, target: Target, terms: list[str]) -> dict[str, int]:
    """Ids of ``terms`` in the corpus dictionary, adding the new ones.

    Sorted inserts keep two writers adding overlapping new terms from deadlocking.
    The ids are read by a second statement: its fresh snapshot also sees terms that a
    concurrent writer committed while the insert skipped them as conflicts.
    """
    if not terms:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO search_searchterm (context_id, target, text)
            SELECT %s, %s, unnest(%s::text[])
            ON CONFLICT (context_id, target, text) DO NOTHING
            """,
            [context_id, target.value, terms],
        )
        cursor.execute(
            """
            SELECT text, id FROM search_searchterm
            WHERE context_id = %s AND target = %s AND text = ANY(%s)
            """,
            [context_id, target.value, terms],
        )
        return dict(cursor.fetchall())
