"""Sharding by context with Citus, on paper (docs/DEPLOY.md "Sharding by context"): the
rules each table would have to meet, checked against the migrated schema. The tables
that do not meet them yet are listed, and their count is the one DEPLOY states."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.db import connection

# Small, read everywhere, joined by every distributed table: copied to every node.
REFERENCE = {
    "memory_context",
    "auth_user",
    "auth_group",
    "auth_permission",
    "auth_user_groups",
    "auth_user_user_permissions",
    "auth_group_permissions",
    "django_content_type",
}
# Kept on the coordinator only: nothing distributed refers to them.
COORDINATOR = {
    "django_migrations",
    "django_session",
    "django_admin_log",
    "django_tasks_database_dbtaskresult",
    "memory_cache",
}
DEPLOY = Path(__file__).resolve().parent.parent / "docs" / "DEPLOY.md"

TABLES_SQL = """
SELECT c.oid, c.relname,
       (SELECT a.attnum FROM pg_attribute a
        WHERE a.attrelid = c.oid AND a.attname = 'context_id' AND NOT a.attisdropped)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
"""
UNIQUE_SQL = """
SELECT i.indrelid, ci.relname, i.indkey::int2[]
FROM pg_index i JOIN pg_class ci ON ci.oid = i.indexrelid
WHERE i.indisunique
"""
FOREIGN_SQL = """
SELECT conrelid, conname, conkey, confrelid, confkey FROM pg_constraint WHERE contype = 'f'
"""


def citus_gaps() -> dict[str, list[str]]:
    """Each table's unmet rules: a distributed table (every other project table) has a
    ``context_id``, every unique index of it (the primary key too) includes it, and its
    foreign keys go to reference tables or, with ``context_id`` in both sides'
    columns, to a distributed table."""
    with connection.cursor() as cursor:
        cursor.execute(TABLES_SQL)
        tables = {oid: (name, ctx) for oid, name, ctx in cursor.fetchall()}
        cursor.execute(UNIQUE_SQL)
        uniques = cursor.fetchall()
        cursor.execute(FOREIGN_SQL)
        foreign = cursor.fetchall()
    distributed = {oid for oid, (name, _) in tables.items() if name not in REFERENCE | COORDINATOR}
    gaps: dict[str, list[str]] = {}

    def gap(oid: int, text: str) -> None:
        gaps.setdefault(tables[oid][0], []).append(text)

    for oid in sorted(distributed, key=lambda o: tables[o][0]):
        if tables[oid][1] is None:
            gap(oid, "no context_id column")
    for table, index, columns in uniques:
        ctx = tables.get(table, ("", None))[1]
        if table in distributed and ctx is not None and ctx not in columns:
            gap(table, f"unique index {index} without context_id")
    for table, name, columns, target, target_columns in foreign:
        if table not in distributed or tables[target][0] in REFERENCE:
            continue
        if target not in distributed:
            gap(table, f"foreign key {name} to coordinator table {tables[target][0]}")
            continue
        ctx, target_ctx = tables[table][1], tables[target][1]
        if ctx not in columns or target_ctx not in target_columns:
            gap(table, f"foreign key {name} to {tables[target][0]} without context_id")
    return gaps


@pytest.mark.django_db
def test_the_gap_to_sharding_by_context_is_the_number_deploy_states() -> None:
    gaps = citus_gaps()
    stated = re.search(r"(\d+) tables do not meet these rules yet", DEPLOY.read_text())
    assert stated, "DEPLOY.md states how many tables do not meet the Citus rules"
    listing = "\n".join(f"{table}: {'; '.join(why)}" for table, why in sorted(gaps.items()))
    assert len(gaps) == int(stated.group(1)), f"{len(gaps)} tables now:\n{listing}"


@pytest.mark.django_db
def test_every_table_is_classified() -> None:
    with connection.cursor() as cursor:
        cursor.execute(TABLES_SQL)
        names = {name for _, name, _ in cursor.fetchall()}
    assert names >= REFERENCE
    assert (COORDINATOR - {"memory_cache"}) <= names  # the cache table is optional
