"""The records the duplicate comparators read: live entities with their keys, aliases,
attributes and identifiers, fetched in one statement per set of entities.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.db import connection

from memory.infra.pg import int_array_literal
from memory.matching.scoring import Record
from memory.models import Entity, EntityIdentifier

_RECORDS_SQL = f"""
    SELECT e.id, e.context_id, e.type, e.scope, e.normalized_key, e.alias_keys,
           e.attributes,
           (SELECT array_agg(i.kind || chr(31) || i.value)
            FROM {EntityIdentifier._meta.db_table} i WHERE i.entity_id = e.id),
           e.embedding IS NOT NULL, e.merged_into_id
    FROM {Entity._meta.db_table} e
"""  # noqa: S608 - table names from the models, values are parameters


def records_read(
    *, context_id: int | None = None, ids: Iterable[int] | None = None
) -> dict[int, tuple[int, Record]]:
    """Live entities as the comparators read them, with their context: those in ``ids``
    (of any context unless ``context_id``), or all of ``context_id``. One statement."""
    params: list[Any] = []
    if ids is None:
        sql = _RECORDS_SQL + " WHERE e.merged_into_id IS NULL"
        if context_id is not None:
            sql += " AND e.context_id = %s"
            params.append(context_id)
    else:
        ids = sorted(set(ids))
        if not ids:
            return {}  # a check whose entities block with no one: nothing to read
        # By id alone, the rows' context and merge checked as they are read: with either
        # condition beside ``id = ANY(…)``, the planner of a young table (no statistics
        # yet) scanned a partial index of the context's live entities for the ids instead
        # of reading them by key, 0.5 ms for 4 ids at 6,000 entities (docs/decisions/0111).
        # As a bigint[] literal: a list adapted by psycopg comes as smallint[] when the
        # ids are small, and ``bigint = ANY(smallint[])`` is a linear filter, not a hash
        # (47 ms for a re-estimate's 3,000 ids against 5 ms).
        sql = _RECORDS_SQL + " WHERE e.id = ANY(%s::bigint[])"
        params.append(int_array_literal(ids))
    out = {}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for row in cursor.fetchall():
            pk, context, type_, scope, key, alias_keys, attributes, idents, has_vector, into = row
            if into is not None or (context_id is not None and context != context_id):
                continue
            by_kind: dict[str, set[str]] = defaultdict(set)
            for pair in idents or ():
                kind, _, value = pair.partition(chr(31))
                by_kind[kind].add(value)
            record = Record(
                id=pk,
                type=type_,
                scope=scope,
                key=key,
                alias_keys=tuple(alias_keys),
                attributes=_attributes(attributes),
                identifiers={k: frozenset(v) for k, v in by_kind.items()},
                has_vector=has_vector,
            )
            out[pk] = (context, record)
    return out


def _attributes(raw: Any) -> dict[str, Any]:
    # Django has psycopg hand jsonb over as text (JSONField decodes it itself). Most
    # entities have none: no decoder for those.
    if raw is None or raw == "{}":
        return {}
    value = json.loads(raw) if isinstance(raw, str) else raw
    return value if isinstance(value, dict) else {}


def records_of(context_id: int, ids: Iterable[int] | None) -> dict[int, Record]:
    """``records_read`` of one context, without the context."""
    return {pk: r for pk, (_, r) in records_read(context_id=context_id, ids=ids).items()}
