"""Pairs proposed by nearness rather than by a shared blocking key: embedding neighbours
(through the HNSW index) and neighbours in name order (edit distance, in the full scan);
and the cosine similarity of given pairs, for the comparators.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from django.db import connection
from rapidfuzz import fuzz

from memory.infra.pg import int_array_literal
from memory.matching.blocking import Pair, pair_of
from memory.matching.scoring import Record
from memory.models import Entity

NEIGHBOURS = 5  # embedding neighbours asked per entity
SCAN_EF_SEARCH = 20  # HNSW candidate list per neighbour query in the scan (§47)
EDIT_DISTANCE_MIN = 88.0  # rapidfuzz ratio, 0–100, for the scan's name-order window
WINDOW = 6  # that window

_NEIGHBOURS_SQL = f"""
    SELECT e.id, n.id, 1 - n.distance
    FROM {Entity._meta.db_table} e
    CROSS JOIN LATERAL (
        SELECT c.id, c.embedding <=> e.embedding AS distance
        FROM {Entity._meta.db_table} c
        WHERE c.context_id = e.context_id AND c.type = e.type AND c.id <> e.id
          AND c.merged_into_id IS NULL AND c.embedding IS NOT NULL
        ORDER BY c.embedding <=> e.embedding
        LIMIT %s
    ) n
    WHERE e.context_id = %s AND e.merged_into_id IS NULL AND e.embedding IS NOT NULL
"""  # noqa: S608 - table names from the models, values are parameters


def embedding_neighbours(context_id: int, ids: list[int]) -> dict[Pair, float]:
    """Each given entity's nearest same-type neighbours through the HNSW index, with
    their cosine similarity (the session's ``hnsw.ef_search``)."""
    found: dict[Pair, float] = {}
    if not ids:
        return found
    with connection.cursor() as cursor:
        cursor.execute(
            _NEIGHBOURS_SQL + " AND e.id = ANY(%s::bigint[])",
            [NEIGHBOURS, context_id, int_array_literal(ids)],
        )
        for a, b, similarity in cursor.fetchall():
            found[pair_of(a, b)] = float(similarity)
    return found


def embedding_neighbours_all(context_id: int, *, chunk: int = 5_000) -> dict[Pair, float]:
    """``embedding_neighbours`` of every live entity of the context, ``chunk`` entities a
    statement, with a short HNSW candidate list: the scan asks 5 neighbours of each of
    100k entities, and the list's length is what each query costs (§47)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM {Entity._meta.db_table} WHERE context_id = %s "  # noqa: S608
            "AND merged_into_id IS NULL AND embedding IS NOT NULL ORDER BY id",
            [context_id],
        )
        ids = [row[0] for row in cursor.fetchall()]
        cursor.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(SCAN_EF_SEARCH)])
    found: dict[Pair, float] = {}
    for start in range(0, len(ids), chunk):
        found.update(embedding_neighbours(context_id, ids[start : start + chunk]))
    return found


def vector_pairs(records: dict[int, Record], pairs: Iterable[Pair]) -> list[Pair]:
    """The pairs whose two entities may both have a vector (no cosine for the others:
    no statement to ask for them)."""
    return [
        (a, b)
        for a, b in pairs
        if not (
            (a in records and records[a].has_vector is False)
            or (b in records and records[b].has_vector is False)
        )
    ]


def cosines(pairs: list[Pair]) -> dict[Pair, float]:
    """Cosine similarity of each pair whose two entities both have a vector."""
    out: dict[Pair, float] = {}
    with connection.cursor() as cursor:
        for start in range(0, len(pairs), 20_000):
            chunk = pairs[start : start + 20_000]
            cursor.execute(
                f"""
                SELECT p.a, p.b, 1 - (x.embedding <=> y.embedding)
                FROM unnest(%s::bigint[], %s::bigint[]) AS p(a, b)
                JOIN {Entity._meta.db_table} x ON x.id = p.a
                JOIN {Entity._meta.db_table} y ON y.id = p.b
                WHERE x.embedding IS NOT NULL AND y.embedding IS NOT NULL
                """,  # noqa: S608 - table names from the models, values are parameters
                [[a for a, _ in chunk], [b for _, b in chunk]],
            )
            out.update({(a, b): float(c) for a, b, c in cursor.fetchall()})
    return out


def edit_distance_pairs(records: Iterable[Record]) -> set[Pair]:
    """Neighbours in name order (and reversed-name order, for slips at either end)."""
    found: set[Pair] = set()
    by_type: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        by_type[record.type].append(record)
    for typed in by_type.values():
        for order in (lambda r: r.key, lambda r: r.key[::-1]):
            ranked = sorted(typed, key=order)
            for i, record in enumerate(ranked):
                for other in ranked[i + 1 : i + 1 + WINDOW]:
                    if fuzz.ratio(record.key, other.key) >= EDIT_DISTANCE_MIN:
                        found.add(pair_of(record.id, other.id))
    return found
