"""Rows written by a restore without per-row trigger work, checked set-based instead.

A memory import (memory/services/transfer/importer.py) writes rows that only its own
transaction can see, into an empty context it holds locked, every reference remapped
through its staging tables. PostgreSQL would check each foreign key of each of those
rows with a per-row constraint trigger at commit: an index probe and a row lock a
reference, nine references on a fact. Under ``session_replication_role = replica``
neither constraint triggers nor ordinary triggers fire for the rows written (CHECK, NOT
NULL and unique constraints still hold); what they would have done is done here once
per table instead:

- every foreign key of a table written, read from the catalog (so a key a migration adds
  is checked without a change here), by one anti-join over the rows written
  (``foreign_keys_check``) — save the keys whose values the writer took from rows it
  knows to exist (its own id maps, the context it holds locked), which it names;
- each ordinary insert trigger by its writer's set-based equivalent, which is allowed
  only while the trigger is the one that equivalent was written for: its name and a hash
  of its function's source (``insert_triggers``). A trigger added or changed later sends
  the import back to the per-row path until its equivalent is updated.

Setting the role takes superuser (or, from PostgreSQL 15, ``GRANT SET ON PARAMETER
session_replication_role``); without it ``replica_role_enter`` changes nothing and says
so, and the caller writes row by row as before. Decision 0099.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator, Sequence
from typing import Any

from django.db import DatabaseError, connection, transaction


def replica_role_enter() -> bool:
    """Switch the current transaction to ``replica``; False (nothing changed) where the
    role may not. Only inside a transaction: the setting ends with it."""
    assert connection.in_atomic_block, "the replica role is set for one transaction"
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL session_replication_role = replica")
    except DatabaseError:  # insufficient privilege: the savepoint undid the attempt
        return False
    return True


def replica_role_leave() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL session_replication_role = origin")


def replica_role_on() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SHOW session_replication_role")
        row = cursor.fetchone()
    return row is not None and row[0] == "replica"


@contextlib.contextmanager
def triggers_firing() -> Iterator[None]:
    """Triggers fire for the statements of the block, whatever the role around it."""
    if not replica_role_on():
        yield
        return
    replica_role_leave()
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL session_replication_role = replica")


def insert_triggers(tables: Sequence[str]) -> set[tuple[str, str, str]]:
    """(table, trigger, md5 of its function's source) of every ordinary trigger on
    INSERT into ``tables`` that is not disabled, whichever role it fires in (constraint
    triggers excluded: foreign keys are checked by ``foreign_keys_check``)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.relname, t.tgname, md5(p.prosrc)
            FROM pg_trigger t
            JOIN pg_class c ON c.oid = t.tgrelid
            JOIN pg_proc p ON p.oid = t.tgfoid
            WHERE c.relname = ANY(%s) AND c.relnamespace = to_regnamespace(current_schema())
              AND NOT t.tgisinternal AND t.tgconstraint = 0
              AND t.tgenabled <> 'D'  -- replica-only and always-firing ones too
              AND t.tgtype & 4 <> 0  -- TRIGGER_TYPE_INSERT
            """,
            [list(tables)],
        )
        return {(table, name, digest) for table, name, digest in cursor.fetchall()}


class ForeignKeyBroken(Exception):
    """A row written with triggers off names a row that does not exist: the transaction
    must not commit (the per-row check would have stopped it at commit)."""


def foreign_keys_check(
    table: str,
    written: str,
    params: Sequence[Any] = (),
    *,
    guaranteed: Collection[tuple[str, str]] = (),
) -> None:
    """Raise ``ForeignKeyBroken`` naming the first foreign key of ``table`` that a row
    written breaks. ``written`` is a query of the written rows' ids. One statement for
    all of the table's keys, driven by those ids (the table may hold many other rows):
    each new row is read once and each of its references looked up in its target's
    primary key.

    ``guaranteed`` names single-column keys, as (column, referenced table), whose values
    the writer took from rows of that table it knows to exist in its transaction (its own
    id maps, a locked row): those are not looked up. Any other key the catalog lists,
    one a migration adds included, still is."""
    keys = [
        (columns, target, target_columns)
        for columns, target, target_columns in _foreign_keys(table)
        if not (
            len(columns) == 1 and target_columns == ["id"] and (columns[0], target) in guaranteed
        )
    ]
    if not keys:
        return
    joins: list[str] = []
    broken: list[str] = []
    for n, (columns, target, target_columns) in enumerate(keys):
        on = " AND ".join(
            f"k{n}.{tc} = r.{c}" for c, tc in zip(columns, target_columns, strict=True)
        )
        joins.append(f"LEFT JOIN {target} k{n} ON {on}")
        present = " AND ".join(f"r.{c} IS NOT NULL" for c in columns)
        broken.append(f"({present} AND k{n}.{target_columns[0]} IS NULL)")
    flags = ", ".join(broken)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT r.id, {flags}
            FROM ({written}) w (id) JOIN {table} r ON r.id = w.id {" ".join(joins)}
            WHERE {" OR ".join(broken)}
            LIMIT 1
            """,  # noqa: S608 - names from the catalog, the written rows' query the caller's
            list(params),
        )
        row = cursor.fetchone()
    if row is not None:
        columns, target, _ = keys[list(row[1:]).index(True)]
        raise ForeignKeyBroken(f"{table} {row[0]}: {', '.join(columns)} names no row of {target}")


def _foreign_keys(table: str) -> list[tuple[list[str], str, list[str]]]:
    """(columns, referenced table, referenced columns) of each foreign key of ``table``."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT (SELECT array_agg(a.attname ORDER BY k.n)
                    FROM unnest(c.conkey) WITH ORDINALITY k(attnum, n)
                    JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum),
                   c.confrelid::regclass::text,
                   (SELECT array_agg(a.attname ORDER BY k.n)
                    FROM unnest(c.confkey) WITH ORDINALITY k(attnum, n)
                    JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.attnum)
            FROM pg_constraint c
            WHERE c.contype = 'f' AND c.conrelid = %s::regclass
            ORDER BY c.conname
            """,
            [table],
        )
        return [(list(cols), target, list(tcols)) for cols, target, tcols in cursor.fetchall()]


def serial_sequence(table: str) -> int:
    """The oid of ``table``'s id sequence, for ``nextval({oid}::regclass)`` in a statement
    that numbers many rows: ``nextval(pg_get_serial_sequence(…))`` looks the sequence up
    again for every row (a stable function, not folded into a constant), which costs
    several times the ``nextval`` itself."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')::regclass::oid", [table])
        row = cursor.fetchone()
    assert row is not None and row[0] is not None, f"{table} has no id sequence"
    return int(row[0])
