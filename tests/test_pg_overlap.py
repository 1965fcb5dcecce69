"""The overlap window: statements sent without waiting, and everything else as before."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import IntegrityError, connection, transaction

from memory.infra.pg_overlap import (
    execute_overlapped,
    foreign_keys_checked_per_statement,
    overlap_window,
)
from memory.models import Context, DuplicateKey

pytestmark = pytest.mark.django_db


@pytest.fixture
def table() -> Iterator[str]:
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE overlap_probe (id int PRIMARY KEY, v int NOT NULL)")
    yield "overlap_probe"
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS overlap_probe")


def _rows(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table}")  # noqa: S608
        return int(cursor.fetchone()[0])


def _in_pipeline() -> bool:
    return connection.connection is not None and connection.connection._pipeline is not None


def test_overlapped_statements_run_in_order_and_reads_see_them(table: str) -> None:
    with transaction.atomic(), overlap_window():
        for start in range(0, 300, 100):
            execute_overlapped(
                f"INSERT INTO {table} SELECT g, g FROM generate_series(%s, %s) g",  # noqa: S608
                [start + 1, start + 100],
            )
        assert _in_pipeline()  # sent, not waited for
        with connection.cursor() as cursor:  # any other statement waits for them first
            cursor.execute(f"SELECT count(*), sum(v) FROM {table}")  # noqa: S608
            assert cursor.fetchone() == (300, sum(range(1, 301)))
        assert not _in_pipeline()
    assert not _in_pipeline()


def test_the_orm_reads_its_row_counts_inside_a_window(context: Context) -> None:
    with transaction.atomic(), overlap_window():
        execute_overlapped(
            "UPDATE memory_context SET name = name || '!' WHERE id = %s", [context.pk]
        )
        # The ORM decides by the row count (an update that touched nothing inserts).
        assert Context.objects.filter(pk=context.pk).update(description="seen") == 1
        assert Context.objects.filter(pk=-1).update(description="none") == 0
        context.description = "saved"
        context.save(update_fields=["description"])
    context.refresh_from_db()
    assert context.name.endswith("!") and context.description == "saved"


def test_an_overlapped_statement_that_fails_raises_djangos_error_and_writes_nothing(
    table: str,
) -> None:
    with pytest.raises(IntegrityError), transaction.atomic(), overlap_window():
        execute_overlapped(f"INSERT INTO {table} VALUES (1, 1)", [])  # noqa: S608
        execute_overlapped(f"INSERT INTO {table} VALUES (1, 2)", [])  # noqa: S608 - clash
        execute_overlapped(f"INSERT INTO {table} VALUES (2, 2)", [])  # noqa: S608
    assert not _in_pipeline()
    assert _rows(table) == 0


def test_a_failure_in_the_window_leaves_the_connection_usable(table: str) -> None:
    with pytest.raises(ZeroDivisionError), transaction.atomic(), overlap_window():
        execute_overlapped(f"INSERT INTO {table} VALUES (1, 1)", [])  # noqa: S608
        _ = 1 / 0
    assert not _in_pipeline()
    assert _rows(table) == 0  # rolled back with its transaction


def test_outside_a_window_an_overlapped_statement_runs_at_once(table: str) -> None:
    execute_overlapped(f"INSERT INTO {table} VALUES (7, 7)", [])  # noqa: S608
    assert not _in_pipeline()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT v FROM {table}")  # noqa: S608
        assert cursor.fetchone() == (7,)


def test_keys_checked_per_statement_refuse_a_dangling_row_at_once(context: Context) -> None:
    insert = (
        "INSERT INTO memory_duplicatekey (context_id, entity_id, type, key) "
        "VALUES (%s, -1, 'person', 'w:nobody')"
    )
    with transaction.atomic():  # deferred, as Django declares them: the commit would refuse
        sid = transaction.savepoint()
        with connection.cursor() as cursor:
            cursor.execute(insert, [context.pk])  # accepted for now
        transaction.savepoint_rollback(sid)
        foreign_keys_checked_per_statement(DuplicateKey)
        with pytest.raises(IntegrityError), connection.cursor() as cursor:
            cursor.execute(insert, [context.pk])  # refused by the statement itself
        transaction.set_rollback(True)
    assert not DuplicateKey.objects.filter(entity_id=-1).exists()
