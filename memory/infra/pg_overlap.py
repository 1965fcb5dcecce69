"""Statements the server runs while Python goes on: inside an ``overlap_window`` a write
whose result no one reads is sent on a psycopg pipeline and not waited for; any other
statement first waits for those sent before it (docs/decisions/0112).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.db import connection, models


@dataclass
class _Overlap:
    """An open ``overlap_window``: the pipeline its overlapped statements were sent on,
    while some are outstanding."""

    pipeline: Any = None  # psycopg's Pipeline, entered
    sending: bool = False  # an overlapped statement is being executed


_overlap: ContextVar[_Overlap | None] = ContextVar("overlap", default=None)


@contextmanager
def overlap_window() -> Iterator[None]:
    """A stretch of a transaction in which ``execute_overlapped`` statements are sent
    without waiting for their results: the server runs each while Python prepares what
    comes next. Any other statement first waits for those sent before it (raising the
    first error among them, as Django raises it), then runs as it always does, so what
    the ORM reads of a statement (its rows, its row count) is unchanged. The window ends
    when every statement sent in it has run; open it inside the transaction's atomic
    block, never around a commit."""
    if _overlap.get() is not None:
        yield  # nested: the outer window goes on
        return
    state = _Overlap()
    token = _overlap.set(state)
    try:
        with connection.execute_wrapper(_wait_before_others):
            yield
        _overlap_end(state)
    except BaseException:
        _overlap_end(state, failing=True)
        raise
    finally:
        _overlap.reset(token)


def overlap_open() -> bool:
    """Whether an ``overlap_window`` is open: a writer splits its statements only then."""
    return _overlap.get() is not None


def execute_overlapped(sql: str, params: Sequence[Any]) -> None:
    """Execute a statement whose result no one reads (an insert, an update): inside an
    ``overlap_window`` it is sent, and runs while the caller goes on; elsewhere it runs
    as any statement does."""
    state = _overlap.get()
    if state is None:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
        return
    connection.ensure_connection()
    if state.pipeline is None:
        pipeline = connection.connection.pipeline()
        with connection.wrap_database_errors:
            pipeline.__enter__()
        state.pipeline = pipeline
    state.sending = True
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
    finally:
        state.sending = False


def foreign_keys_checked_per_statement(*tables: type[models.Model]) -> None:
    """For the rest of the transaction, check the foreign keys of these models' rows when
    each statement ends rather than at commit (``SET CONSTRAINTS … IMMEDIATE``; Django
    declares them deferred). For rows written by overlapped statements: their checks then
    run on the server while Python goes on, instead of in the commit, which nothing
    overlaps. Only for rows whose references exist when they are written."""
    names = [name for model in tables for name in _foreign_key_names(model._meta.db_table)]
    if names:
        execute_overlapped(
            "SET CONSTRAINTS " + ", ".join(_quoted(n) for n in names) + " IMMEDIATE", []
        )


@cache
def _foreign_key_names(table: str) -> tuple[str, ...]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'f'"
            " AND condeferrable ORDER BY conname",
            [table],
        )
        return tuple(str(row[0]) for row in cursor.fetchall())


def _quoted(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _wait_before_others(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
    state = _overlap.get()
    if state is not None and not state.sending:
        _overlap_end(state)
    return execute(sql, params, many, context)


def _overlap_end(state: _Overlap, *, failing: bool = False) -> None:
    """Wait for the statements sent so far and leave pipeline mode; their first error is
    raised (as Django's error) unless the caller is already failing."""
    pipeline, state.pipeline = state.pipeline, None
    if pipeline is None:
        return
    if failing:
        with suppress(Exception):  # the error on its way out is the one to report
            pipeline.__exit__(RuntimeError, RuntimeError("failing"), None)
        return
    with connection.wrap_database_errors:
        pipeline.__exit__(None, None, None)
