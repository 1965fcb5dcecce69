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

from memory.infra.pg_arrays import array_literal, int_array_literal
from memory.infra.pg_overlap import execute_overlapped
from memory.search.models import Target

# The column of ``search_searchdoc`` that names what a document indexes.
REF_COLUMN = {
    Target.CHUNK: "chunk_id",
    Target.FACT: "fact_id",
    Target.ENTITY: "entity_id",
    Target.TURN: "turn_id",
    Target.ITEM: "item_id",
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
            f"DELETE FROM search_searchdoc WHERE {REF_COLUMN[target]} = ANY(%s::bigint[])",  # noqa: S608
            [int_array_literal(ref_ids)],
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
    a delete per target that has indexed items, one statement for the terms of every
    target, then one per target for its documents and their postings."""
    batches = [b for b in batches if b.items]
    if not batches:
        return
    for batch in batches:
        postings_delete(
            target=batch.target,
            ref_ids=[i.ref_id for i in batch.items if i.ref_id not in batch.unindexed],
        )
    bags = [[Counter(item.terms) for item in batch.items] for batch in batches]
    wanted: set[tuple[str, str]] = set()
    for batch, of in zip(batches, bags, strict=True):
        target = batch.target.value  # (an enum's value is a property: read it once)
        wanted.update((target, term) for bag in of for term in bag)
    term_ids = _term_ids(context_id=context_id, wanted=sorted(wanted))
    for batch, of in zip(batches, bags, strict=True):
        _docs_and_postings(context_id, batch, of, term_ids[batch.target.value])


def _docs_and_postings(
    context_id: int, batch: IndexBatch, bags: list[Counter[str]], term_ids: dict[str, int]
) -> None:
    # Each document's term ids and their tfs travel as two array literals of its own:
    # the server unnests them into postings, so no flat list of every posting (its
    # document, term and tf: three arrays of some 20,000 numbers for a bulk turn) is
    # built and parsed, nor joined back to its document.
    doc_terms: list[str] = []
    doc_tfs: list[str] = []
    for bag in bags:
        doc_terms.append(int_array_literal([term_ids[term] for term in bag]))
        doc_tfs.append(int_array_literal(bag.values()))  # in the order of its terms
    # Nothing is read back: inside a write's overlap window, the server writes them
    # while the caller goes on.
    execute_overlapped(
        _DOCS_AND_POSTINGS_SQL.format(column=REF_COLUMN[batch.target]),
        [
            int_array_literal(item.ref_id for item in batch.items),
            array_literal(item.scope for item in batch.items),
            int_array_literal(sum(bag.values()) for bag in bags),
            array_literal(doc_terms),
            array_literal(doc_tfs),
            context_id,
            batch.target.value,
        ],
    )


# A target's documents and their postings in one statement: the postings are each new
# document's term ids and tfs unnested beside the document id the insert returns (no
# second round trip, no id mapping in Python). Postings go in key order: neighbouring
# rows land on the same primary-key leaf pages instead of one random page each. The
# statement-level triggers of both tables fire once, at its end, as they would for two
# statements. (One statement for several targets was measured slower: the postings
# then join their documents through the target as well.)
_DOCS_AND_POSTINGS_SQL = """
    WITH input AS MATERIALIZED (
        SELECT * FROM unnest(%s::bigint[], %s::text[], %s::int[], %s::text[], %s::text[])
            AS x(ref, scope, len, terms, tfs)
    ), docs AS (
        INSERT INTO search_searchdoc (context_id, target, {column}, scope, length, term_ids)
        SELECT %s, %s, input.ref, input.scope, input.len, input.terms::bigint[]
        FROM input
        RETURNING {column} AS ref, id, length, term_ids
    )
    INSERT INTO search_searchposting (term_id, doc_id, tf, dl)
    SELECT p.term_id, docs.id, p.tf, docs.length
    FROM docs
    JOIN input ON input.ref = docs.ref
    CROSS JOIN LATERAL unnest(docs.term_ids, input.tfs::int[]) AS p(term_id, tf)
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
        cursor.execute(_TERMS_SQL, [context_id, targets, texts, targets, texts, context_id])
        for target, text, pk in cursor.fetchall():
            found[target][text] = pk
        missing = [(t, text) for t, text in wanted if text not in found[t]]
        if missing:
            cursor.execute(
                _TERMS_READ_SQL,
                [
                    array_literal(t for t, _ in missing),
                    array_literal(text for _, text in missing),
                    context_id,
                ],
            )
            for target, text, pk in cursor.fetchall():
                found[target][text] = pk
    return found


# The new terms are inserted (returning their ids) and the existing ones read, each by a
# probe of the unique index (context, target, text); the rows the insert adds are
# invisible to those reads (one snapshot), so no term comes back twice. ``OFFSET 0``
# keeps each probe a probe: given ``text = ANY(…)`` per target, the planner of a young
# context (no statistics yet) scanned all of the context's terms of the target instead,
# 5 ms for a 20-fact run at 10,000 terms and growing (docs/decisions/0111).
_TERMS_READ_SQL = """
    SELECT w.target, w.text, t.id
    FROM unnest(%s::text[], %s::text[]) AS w(target, text)
    CROSS JOIN LATERAL (
        SELECT id FROM search_searchterm
        WHERE context_id = %s AND target = w.target AND text = w.text OFFSET 0
    ) t
"""
_TERMS_SQL = f"""
    WITH added AS (
        INSERT INTO search_searchterm (context_id, target, text)
        SELECT %s, w.target, w.text FROM unnest(%s::text[], %s::text[]) AS w(target, text)
        ON CONFLICT (context_id, target, text) DO NOTHING
        RETURNING target, text, id
    )
    SELECT target, text, id FROM added
    UNION ALL
    {_TERMS_READ_SQL}
"""  # noqa: S608 - constant text, values are parameters
