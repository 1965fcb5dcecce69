"""Blocking for duplicate detection: which pairs of entities are worth comparing.

Every live entity keeps a few keys in DuplicateKey (``blocking_keys``: its words in any
order, its bigrams, its sounds, its consonants, each word's sound, its identifiers, dates
and codes among its attributes). Two entities of one type sharing a key that few
entities hold (``block_limit``) are a blocked pair, as are embedding neighbours and, in
the full scan, neighbours in name order (edit distance; both ``matching/neighbours.py``).
Across types only one pairing: an untyped entity (``other``) and a typed one with the
same words in their names (``cross_types``; the model weighs the type difference).
100k entities never need 10^10 comparisons. The records the comparators read are
fetched by ``matching/records.py``.
"""

from __future__ import annotations

import io
from collections import defaultdict
from dataclasses import dataclass

import jellyfish
from django.db import connection

from memory.infra.pg_arrays import array_literal, int_array_literal
from memory.infra.pg_overlap import execute_overlapped
from memory.matching.scoring import (
    UNTYPED,
    Record,
    consonant_key,
    parse_date,
    sorted_tokens,
    sound_key,
)
from memory.models.duplicate import DuplicateKey
from memory.models.entity import ENTITY_TYPES

MAX_BLOCK = 40  # a larger block is a common word, date or code, not a duplicate signal
# One word's sound, or the consonants alone, are weaker keys than the whole name's
# sounds: their blocks are kept smaller (at 100k planted entities, 40 would propose
# 440k pairs for 390 true ones).
MAX_WORD_BLOCK = 12
RARE_WORD = 5  # a word at most this many entities of a type have tells names apart (§46)
ONLY_THEM = 2  # a consonant key only a pair holds (docs/decisions/0046)
# Which blocking key found a pair, by its prefix (listed as the pair's methods).
KEY_METHODS = {
    "w": "fingerprint",
    "g": "ngram",
    "s": "phonetic",
    "t": "word_sound",
    "k": "consonants",
    "i": "identifier",
    "d": "date",
    "c": "code",
}

Pair = tuple[int, int]
Rare = dict[str, set[str]]  # type → its rare keys (``is_rare``)
TYPED = tuple(t for t in ENTITY_TYPES if t != UNTYPED)


def pair_of(a: int, b: int) -> Pair:
    return (a, b) if a < b else (b, a)


def _ngram_fingerprint(key: str, n: int = 2) -> str:
    compact = key.replace(" ", "")
    return "".join(sorted({compact[i : i + n] for i in range(max(len(compact) - n + 1, 1))}))


def blocking_keys(record: Record) -> set[str]:
    """The keys an entity is filed under (each at most 200 characters)."""
    keys: set[str] = set()
    for name in (record.key, *record.alias_keys):
        if not name:
            continue
        keys.add("w:" + sorted_tokens(name))
        if len(name.replace(" ", "")) >= 5:  # short names share bigrams by chance
            keys.add("g:" + _ngram_fingerprint(name))
        keys.add("s:" + sound_key(name))
        keys.add("k:" + consonant_key(name))
        for token in set(name.split()):
            if len(token) >= 3:
                keys.add("t:" + jellyfish.metaphone(token))
    for kind, values in record.identifiers.items():
        keys.update(f"i:{kind}:{value}" for value in values)
    for attr, value in record.attributes.items():
        text = str(value).strip() if isinstance(value, (str, int)) else ""
        if (day := parse_date(text)) is not None:
            keys.add("d:" + day.isoformat())
        elif 3 <= len(text) <= 20 and text.isdigit():
            keys.add(f"c:{attr[:60]}:{text}")
    return {k[:200] for k in keys}


def block_limit(key: str) -> int:
    return MAX_WORD_BLOCK if key[0] in "tk" else MAX_BLOCK


def cross_types(type_: str, key: str) -> tuple[str, ...]:
    """The other types whose holders of ``key`` an entity of ``type_`` pairs with: an
    untyped entity's words in any order (``w:``) block with every typed entity's, a typed
    entity's with the untyped ones' — "Hannah Ortiz" written without a type and the person
    of that name (docs/decisions/0125). No other key crosses types."""
    if not key.startswith("w:"):
        return ()
    return TYPED if type_ == UNTYPED else (UNTYPED,)


def is_rare(key: str, holders: int) -> bool:
    """Whether a key tells the names of its holders apart (``name_level``'s ``rare``)."""
    return (key.startswith("t:") and holders <= RARE_WORD) or (
        key.startswith("k:") and holders <= ONLY_THEM
    )


# --- keys ---------------------------------------------------------------------------------


def keys_write_all(context_id: int, records: dict[int, Record]) -> int:
    """Replace every key of the context (the full scan): one DELETE and one COPY."""
    buffer = io.StringIO()
    rows = 0
    for r in records.values():
        for key in blocking_keys(r):
            buffer.write(f"{context_id}\t{r.id}\t{_copy_text(r.type)}\t{_copy_text(key)}\n")
            rows += 1
    table = DuplicateKey._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table} WHERE context_id = %s", [context_id])  # noqa: S608
        with cursor.cursor.copy(
            f"COPY {table} (context_id, entity_id, type, key) FROM STDIN"
        ) as copy:
            copy.write(buffer.getvalue())
    return rows


def _copy_text(value: str) -> str:
    return (
        value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    )


@dataclass(frozen=True)
class KeysRewrite:
    """The stored blocking keys of a check's entities, to replace: those of
    ``entity_ids`` go, ``rows`` come."""

    context_id: int
    entity_ids: list[int]
    rows: list[tuple[int, str, str]]  # (entity, type, key)


def keys_and_holders(
    context_id: int, records: dict[int, Record]
) -> tuple[dict[Pair, set[str]], Rare, KeysRewrite]:
    """These entities' blocked pairs and the rare keys among theirs, from their keys and
    the other entities holding each (one read: what these entities held before is
    filtered out), and the rewrite of their stored keys for ``keys_rewrite``."""
    mine_keys = {pk: blocking_keys(r) for pk, r in records.items()}
    wanted = sorted(
        {
            (t, k)
            for pk, keys in mine_keys.items()
            for k in keys
            for t in (records[pk].type, *cross_types(records[pk].type, k))
        }
    )
    mine = sorted(records)
    holders: dict[tuple[str, str], set[int]] = defaultdict(set)
    # Arrays go as their text literals: psycopg adapting thousands of keys element by
    # element cost more than the statement.
    with connection.cursor() as cursor:
        cursor.execute(
            _HOLDERS_SQL,
            [
                array_literal(t for t, _ in wanted),
                array_literal(k for _, k in wanted),
                context_id,
                int_array_literal(mine),
                MAX_BLOCK + 1,
            ],
        )
        for type_, key, entity_id in cursor.fetchall():
            holders[(type_, key)].add(entity_id)
    rows = [(pk, records[pk].type, k) for pk, keys in mine_keys.items() for k in keys]
    rewrite = KeysRewrite(context_id, mine, rows)
    return (*_blocked_pairs(records, mine_keys, holders), rewrite)


def keys_rewrite(rewrite: KeysRewrite) -> None:
    """Replace the stored keys (one statement). Nothing is read back: in an ingest's
    overlap window the server writes them while the write goes on (decision 0112)."""
    execute_overlapped(
        _REWRITE_SQL,
        [
            int_array_literal(rewrite.entity_ids),
            rewrite.context_id,
            int_array_literal(pk for pk, _, _ in rewrite.rows),
            array_literal(t for _, t, _ in rewrite.rows),
            array_literal(k for _, _, k in rewrite.rows),
        ],
    )


def keys_holders(context_id: int, records: dict[int, Record]) -> tuple[dict[Pair, set[str]], Rare]:
    """``keys_and_holders`` without the rewrite, for entities whose stored keys
    are current (a re-estimate's sample): one read, no rows written. Their keys are
    read as stored, not derived again from their names (a re-estimate's 3,000 sampled
    names cost more to key in Python than the read)."""
    mine = int_array_literal(sorted(records))
    mine_keys: dict[int, set[str]] = defaultdict(set)
    holders: dict[tuple[str, str], set[int]] = defaultdict(set)
    with connection.cursor() as cursor:
        cursor.execute(_STORED_HOLDERS_SQL, [context_id, mine, context_id, mine, MAX_BLOCK + 1])
        for own, entity_id, type_, key in cursor.fetchall():
            if not own:
                holders[(type_, key)].add(entity_id)
            elif entity_id in records and records[entity_id].type == type_:
                mine_keys[entity_id].update(key.split(chr(31)))  # one row an entity
    return _blocked_pairs(records, mine_keys, holders)


# Up to ``limit`` holders of the key ``q`` other than the given entities.
_OTHER_HOLDERS = f"""CROSS JOIN LATERAL (
        SELECT k.entity_id FROM {DuplicateKey._meta.db_table} k
        WHERE k.context_id = %s AND k.type = q.type AND k.key = q.key
          AND NOT k.entity_id = ANY(%s::bigint[])
        LIMIT %s
    ) h"""  # noqa: S608 - table names from the models, values are parameters

# These entities' stored keys (joined by chr(31), one row an entity), then up to
# ``limit`` other holders of each distinct one: what ``_HOLDERS_SQL`` reads for keys
# computed in Python. Text, not arrays: a re-estimate's 30,000 keys parse as 3,000
# strings split on the client.
_STORED_HOLDERS_SQL = f"""
    WITH mine AS (
        SELECT entity_id, type, key FROM {DuplicateKey._meta.db_table}
        WHERE context_id = %s AND entity_id = ANY(%s::bigint[])
    )
    SELECT true, entity_id, type, string_agg(key, chr(31)) FROM mine GROUP BY entity_id, type
    UNION ALL
    SELECT false, h.entity_id, q.type, q.key
    FROM (SELECT DISTINCT type, key FROM mine) q
    {_OTHER_HOLDERS}
"""  # noqa: S608 - table names from the models, values are parameters


_HOLDERS_SQL = f"""
    SELECT q.type, q.key, h.entity_id
    FROM unnest(%s::text[], %s::text[]) AS q(type, key)
    {_OTHER_HOLDERS}
"""  # noqa: S608 - table names from the models, values are parameters

# The old keys go by entity alone (ids are unique across contexts), each entity's found
# by a probe of the entity index and deleted by its row address: with the context in the
# condition, or with ``entity_id = ANY(…)`` left to the planner, a young table (no
# statistics yet) was read whole for them, a cost that grows with the table
# (docs/decisions/0111). ``OFFSET 0`` keeps each probe a probe.
_REWRITE_SQL = f"""
    WITH gone AS (
        DELETE FROM {DuplicateKey._meta.db_table} WHERE ctid = ANY(ARRAY(
            SELECT k.ctid FROM unnest(%s::bigint[]) AS w(entity_id)
            CROSS JOIN LATERAL (
                SELECT ctid FROM {DuplicateKey._meta.db_table}
                WHERE entity_id = w.entity_id OFFSET 0
            ) k
        ))
    )
    INSERT INTO {DuplicateKey._meta.db_table} (context_id, entity_id, type, key)
    SELECT %s, x.entity_id, x.type, x.key
    FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS x(entity_id, type, key)
"""  # noqa: S608 - table names from the models, values are parameters


def _blocked_pairs(
    records: dict[int, Record],
    mine_keys: dict[int, set[str]],
    holders: dict[tuple[str, str], set[int]],
) -> tuple[dict[Pair, set[str]], Rare]:
    """The blocked pairs of ``records`` and the rare keys among theirs, from each
    record's keys and the other entities holding each key."""
    for pk, keys in mine_keys.items():  # these entities among themselves
        type_ = records[pk].type
        for key in keys:
            holders[(type_, key)].add(pk)
    found: dict[Pair, set[str]] = defaultdict(set)
    rare: Rare = defaultdict(set)
    for (type_, key), members in holders.items():
        if key[0] in "tk" and is_rare(key, len(members)):
            rare[type_].add(key)
    for pk, keys in mine_keys.items():
        type_ = records[pk].type
        for key in keys:
            for other_type in cross_types(type_, key):
                across = holders.get((other_type, key), ())
                if len(across) <= block_limit(key):
                    for other in across:
                        found[pair_of(pk, other)].add(KEY_METHODS[key[0]])
            members = holders[(type_, key)]
            # Most keys are held by one entity alone: no pair, nothing more to look at.
            if len(members) < 2 or len(members) > block_limit(key):
                continue
            method = KEY_METHODS[key[0]]
            for other in members:
                if other != pk:
                    found[pair_of(pk, other)].add(method)
    return found, rare


def rare_keys(context_id: int, records: dict[int, Record]) -> Rare:
    """The rare keys among these entities' keys, from the stored keys (one statement)."""
    wanted = sorted({(r.type, k) for r in records.values() for k in blocking_keys(r)})
    wanted = [(t, k) for t, k in wanted if k[0] in "tk"]
    if not wanted:
        return {}
    sql = f"""
        SELECT q.type, q.key, count(h.entity_id)
        FROM unnest(%s::text[], %s::text[]) AS q(type, key)
        CROSS JOIN LATERAL (
            SELECT k.entity_id FROM {DuplicateKey._meta.db_table} k
            WHERE k.context_id = %s AND k.type = q.type AND k.key = q.key
            LIMIT %s
        ) h
        GROUP BY q.type, q.key
    """  # noqa: S608 - table names from the models, values are parameters
    rare: Rare = defaultdict(set)
    with connection.cursor() as cursor:
        types, keys = [t for t, _ in wanted], [k for _, k in wanted]
        cursor.execute(sql, [types, keys, context_id, MAX_BLOCK + 1])
        for type_, key, holders in cursor.fetchall():
            if is_rare(key, holders):
                rare[type_].add(key)
    return rare


def blocks_of(records: dict[int, Record]) -> tuple[dict[Pair, set[str]], Rare]:
    """Every blocked pair among ``records`` and their rare keys, in memory (the scan)."""
    blocks: dict[tuple[str, str], list[int]] = defaultdict(list)
    for record in records.values():
        for key in blocking_keys(record):
            blocks[(record.type, key)].append(record.id)
    proposed: dict[Pair, set[str]] = defaultdict(set)
    rare: Rare = defaultdict(set)
    for (type_, key), members in blocks.items():
        if is_rare(key, len(members)):
            rare[type_].add(key)
        if 1 < len(members) <= block_limit(key):
            members.sort()
            for i, a in enumerate(members):
                for b in members[i + 1 :]:
                    proposed[(a, b)].add(KEY_METHODS[key[0]])
        if type_ != UNTYPED or len(members) > block_limit(key):
            continue
        for other_type in cross_types(type_, key):
            typed = blocks.get((other_type, key), ())
            if len(typed) <= block_limit(key):
                for a in members:
                    for b in typed:
                        proposed[pair_of(a, b)].add(KEY_METHODS[key[0]])
    return proposed, rare
