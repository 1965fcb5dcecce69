"""An import's rows written with triggers off where the database allows it, and checked
set-based instead (memory/infra/restore_writes.py; decision 0099).

The rows of every kind, their search documents, the corpus's terms, the postings and the
entities' blocking keys are written under
``session_replication_role = replica``; then each table's foreign keys are checked with
one anti-join over the rows written, and the one ordinary insert trigger of those tables
outside the search index, the predicate usage log of ``memory_fact``, is replaced by the
same aggregate over the context's facts (they are all this import's: the context was
empty). The search documents' and postings' own trigger work (the corpus statistics,
each term's df and bounds) is done by ``postings_load`` (memory/search/bm25_load.py).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from django.db import connection

from memory.infra.restore_writes import (
    foreign_keys_check,
    insert_triggers,
    replica_role_enter,
    triggers_firing,
)
from memory.search.bm25_load import DOCUMENTS_TRIGGER, POSTINGS_TRIGGER
from memory.services.transfer.format import Kind

# (table, trigger, md5 of its function's source) of the insert trigger replaced by
# ``_usage_written``: migration 0003's ``memory_fact_usage_insert``.
USAGE_TRIGGER = ("memory_fact", "memory_fact_usage_insert", "b4cd59e1919b5d63e45e9fc66e4ab89d")
REPLACED_TRIGGERS = frozenset({USAGE_TRIGGER, DOCUMENTS_TRIGGER, POSTINGS_TRIGGER})
# Written with the rows: the search index's documents, terms and postings, the blocking keys.
INDEX_TABLES = (
    "search_searchdoc",
    "search_searchterm",
    "search_searchposting",
    "memory_duplicatekey",
)


def restore_triggers_off(kinds: Iterable[Kind]) -> str | None:
    """Turn triggers off for the rest of the caller's transaction. Returns why not (and
    changes nothing) when an insert trigger of the tables written is not one this module
    replaces, or the database role may not set the replication role."""
    tables = [kind.model._meta.db_table for kind in kinds] + list(INDEX_TABLES)
    found = insert_triggers(tables)
    if found != REPLACED_TRIGGERS:
        changed = sorted(f"{table}.{name}" for table, name, _ in found ^ REPLACED_TRIGGERS)
        return (
            "rows checked one by one: the insert triggers "
            f"{', '.join(changed)} are not the ones the set-based checks replace"
        )
    if not replica_role_enter():
        return "rows checked one by one: the database role may not set session_replication_role"
    return None


def restore_rows_checked(
    context_id: int, written: Iterable[tuple[Kind, str, Collection[tuple[str, str]]]]
) -> None:
    """After the rows of every kind are written with triggers off: their foreign keys
    and the usage log. ``written`` gives each kind with a query of its new ids and the
    keys its rows keep by construction, (column, referenced table): only the others the
    catalog lists — none, unless a migration adds one the import does not write — are
    looked up."""
    for kind, new_ids, kept in written:
        foreign_keys_check(kind.model._meta.db_table, new_ids, guaranteed=kept)
    _usage_written(context_id)


# The blocking keys' references kept by construction: the import writes each key with
# its context's id (held locked) and the id of an entity it read from the context's rows
# in its own transaction (memory_import_index.ImportKeys).
KEYS_KEPT = frozenset({("context_id", "memory_context"), ("entity_id", "memory_entity")})


def restore_keys_checked(context_id: int) -> None:
    """The foreign keys of the blocking keys written with triggers off (the context's:
    it had none before), but for those kept by construction (``KEYS_KEPT``)."""
    foreign_keys_check(
        "memory_duplicatekey",
        "SELECT id FROM memory_duplicatekey WHERE context_id = %s",
        [context_id],
        guaranteed=KEYS_KEPT,
    )


def _usage_written(context_id: int) -> None:
    """``memory_fact_usage_insert`` over the import's facts, as one statement inserting
    them all would have fired it (the usage log's own triggers, if any, firing)."""
    with triggers_firing(), connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO memory_predicateusage
                (context_id, scope, kind, predicate_id, used, live, last_used_at)
            SELECT context_id, scope, kind, predicate_id,
                   coalesce(sum(observed_count) FILTER (WHERE status <> 'retracted'), 0),
                   coalesce(sum(observed_count) FILTER (WHERE status = 'current'), 0),
                   max(last_seen_at)
            FROM memory_fact WHERE context_id = %s
            GROUP BY context_id, scope, kind, predicate_id
            """,
            [context_id],
        )
