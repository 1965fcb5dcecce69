"""Reading a memory export's lines (``memory.services.transfer.format``) for an import.

Every line is checked — JSON, a known record type, the header first and the end line
last, each field one its kind has, of the shape its column takes, no NUL character — and
its row staged in a session-local table per line type, holding the exporting database's
ids. The rows go by COPY, a few thousand at a time, through a COPY kept open from one
batch to the next; progress is reported between two. The staged rows are written into
the context by ``import_rows.py``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

import psycopg
from django.db import DatabaseError, connection, models, transaction
from django.utils import timezone
from psycopg.types.json import Jsonb

from memory.kernel.errors import ValidationFailed
from memory.services.transfer.format import (
    FORMAT,
    FORMAT_VERSION,
    KIND_BY_NAME,
    KINDS,
    SKIPPED_COLUMNS,
    Kind,
)
from memory.services.transfer.import_index import ImportTexts

FLUSH_ROWS = 5_000  # rows of a kind held before they are sent
STREAM_ROWS = 50_000  # rows of a kind sent through one COPY (progress is told between two)

Progress = Callable[[int, int], None]


def staging_table(kind: Kind) -> str:
    """The session-local table a kind's lines are staged in."""
    return f"memory_import_{kind.name}"


class Staging:
    """Session-local staging tables, one per line type, holding rows as exported."""

    def __init__(self) -> None:
        self.created: list[str] = []  # every table to drop, the id maps' too
        self.buffers: dict[str, list[list[Any]]] = {}
        self.defaults: dict[str, tuple[Any, ...]] = {}
        self.texts = ImportTexts()
        self.stream = _CopyStream()

    def read(
        self,
        lines: Iterable[str],
        total: int,
        on_progress: Progress | None,
        counts: dict[str, int],
    ) -> tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any], int]:
        """Stage every line, counting the lines of each type in ``counts``; returns the
        header, the end line (None when the file has none), the lines of other records
        (the duplicate model), and how many lines were read."""
        with connection.cursor() as cursor:
            for kind in KINDS:
                table = staging_table(kind)
                cursor.execute(f"DROP TABLE IF EXISTS {table}")
                cursor.execute(
                    f"CREATE TEMP TABLE {table} AS "  # noqa: S608 - names from the models
                    f"SELECT * FROM {kind.model._meta.db_table} WITH NO DATA"
                )
                self.created.append(table)
        try:
            return self._read_lines(lines, total, on_progress, counts)
        except BaseException:
            self.stream.abort()  # the COPY open, if any, is given up with its rows
            raise

    def _read_lines(
        self,
        lines: Iterable[str],
        total: int,
        on_progress: Progress | None,
        counts: dict[str, int],
    ) -> tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any], int]:
        header: dict[str, Any] | None = None
        end: dict[str, Any] | None = None
        extras: dict[str, Any] = {}
        number = reported = 0
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            record = _parse(raw, number)
            type_ = record.pop("record")
            if number == 1 or header is None:
                if type_ != "header":
                    raise ValidationFailed(
                        "line 1 is not the header of a memory export", code="invalid_export"
                    )
                header = _check_header(record)
                continue
            if end is not None:
                raise ValidationFailed(
                    f"line {number}: a line after the end line", code="invalid_export"
                )
            if type_ == "end":
                end = record
            elif type_ == "duplicate_model":
                extras["duplicate_model"] = record.get("params")
            elif type_ in KIND_BY_NAME:
                self._add(KIND_BY_NAME[type_], record, number, "\\u0000" in raw)
                counts[type_] = counts.get(type_, 0) + 1
            else:
                raise ValidationFailed(
                    f"line {number}: unknown line type {str(type_)[:40]!r}", code="invalid_export"
                )
            # Progress may write to the database (a job's row): only between two COPYs.
            if on_progress is not None and number - reported >= 1_000 and self.stream.idle:
                on_progress(number, max(total, number))
                reported = number
        if header is None:
            raise ValidationFailed("the file is empty", code="invalid_export")
        for name in list(self.buffers):
            self._flush(KIND_BY_NAME[name])
        self.stream.close()
        if on_progress is not None:
            on_progress(number, max(total, number))
        return header, end, extras, number

    def _add(self, kind: Kind, record: dict[str, Any], number: int, nul: bool) -> None:
        """Stage one line's row. ``nul``: the line may hold a NUL character (JSON writes
        one only as an escape), so its texts are checked one by one."""
        plan = _plan(kind)
        missing = self._missing(kind)
        row = list(missing)
        position, scalar = plan.position, plan.scalar
        # Only the fields the line gives (a third of a fact's): the defaults are known good.
        for name, value in record.items():
            i = position.get(name)
            if i is None:
                if name in SKIPPED_COLUMNS:
                    continue
                raise ValidationFailed(
                    f"line {number}: {kind.name} has no field {name[:40]!r}",
                    code="invalid_export",
                )
            row[i] = value
            if scalar[i] and (type(value) is dict or type(value) is list):
                _wrong_shape(plan.fields[i], kind, number)  # a parsed line holds no other
        for i in plan.stamped:  # a time the row was written: now, when not known
            if row[i] is None:
                row[i] = missing[i]
        for i, nullable in plan.json:
            value = row[i]
            row[i] = None if value is None and nullable else Jsonb(value)
        for i in plan.arrays:
            row[i] = _array_cell(plan.fields[i], row[i], kind, number)
        if nul:
            for i in plan.scalars:
                _text_checked(row[i], plan.fields[i], kind, number)
        if self.texts.wants(kind):
            self.texts.add(kind, row)
        buffer = self.buffers.setdefault(kind.name, [])
        buffer.append(row)
        if len(buffer) >= FLUSH_ROWS:
            self._flush(kind)

    def _missing(self, kind: Kind) -> tuple[Any, ...]:
        """What each field of ``kind`` holds when a line leaves it out, worked out once
        per import: the defaults are constants (or empty lists and objects, which no
        row changes), and a stamped field's "now" is the import's."""
        missing = self.defaults.get(kind.name)
        if missing is None:
            missing = self.defaults[kind.name] = tuple(_default(f) for f in kind.fields())
        return missing

    def _flush(self, kind: Kind) -> None:
        rows = self.buffers.pop(kind.name, [])
        if rows:
            self.stream.write(kind, rows)

    def drop(self) -> None:
        """Drop every table staged or mapped, and stop the texts' thread."""
        self.texts.close()
        if self.created:
            with connection.cursor() as cursor:
                cursor.execute(f"DROP TABLE IF EXISTS {', '.join(self.created)}")
        self.created = []


class _CopyStream:
    """The COPY into a kind's staging table, kept open from one batch of its rows to the
    next (up to ``STREAM_ROWS``): the server stores the rows sent while Python parses the
    lines that follow, where a COPY a batch would wait for it at the end of each."""

    def __init__(self) -> None:
        self.kind: Kind | None = None
        self.stack: contextlib.ExitStack | None = None
        self.copy: Any = None
        self.rows = 0

    @property
    def idle(self) -> bool:
        return self.stack is None

    def write(self, kind: Kind, rows: list[list[Any]]) -> None:
        if self.kind is not kind:
            self.close()
        try:
            if self.stack is None:
                self._open(kind)
            write_row = self.copy.write_row
            for row in rows:
                write_row(row)
        except (DatabaseError, psycopg.Error) as exc:  # COPY speaks psycopg's errors
            self.abort()
            raise _refused(kind, exc) from None
        self.rows += len(rows)
        if self.rows >= STREAM_ROWS:
            self.close()

    def close(self) -> None:
        """End the COPY: the server has stored every row sent, or says why not."""
        stack, kind = self.stack, self.kind
        self._forget()
        if stack is None or kind is None:
            return
        try:
            stack.close()  # a refusal rolls the COPY's savepoint back on its way out
        except (DatabaseError, psycopg.Error) as exc:
            raise _refused(kind, exc) from None

    def abort(self) -> None:
        """Give the open COPY up (its rows are not stored), for a failure elsewhere."""
        stack = self.stack
        self._forget()
        if stack is not None:
            with contextlib.suppress(Exception):
                stack.__exit__(ValidationFailed, ValidationFailed("the import stopped"), None)

    def _open(self, kind: Kind) -> None:
        columns = ", ".join(str(f.column) for f in kind.fields())
        stack = contextlib.ExitStack()
        try:
            stack.enter_context(transaction.atomic())
            cursor = stack.enter_context(connection.cursor())
            sql = f"COPY {staging_table(kind)} ({columns}) FROM STDIN"
            self.copy = stack.enter_context(cursor.cursor.copy(sql))
        except BaseException:
            stack.close()
            raise
        self.stack, self.kind, self.rows = stack, kind, 0

    def _forget(self) -> None:
        self.stack, self.kind, self.copy, self.rows = None, None, None, 0


def _refused(kind: Kind, exc: Exception) -> ValidationFailed:
    return ValidationFailed(f"{kind.name} lines: {error_first_line(exc)}", code="invalid_export")


def error_first_line(exc: Exception) -> str:
    """A database error's first line, as a refusal quotes it."""
    return str(exc).strip().split("\n", 1)[0][:300]


def _parse(raw: str, number: int) -> dict[str, Any]:
    try:
        record = json.loads(raw)
    except json.JSONDecodeError as exc:
        # The text stops before the record closes (inside a string, or after a value).
        if exc.msg.startswith("Unterminated string") or exc.pos >= len(raw.rstrip()):
            raise ValidationFailed(
                f"line {number} stops mid-record: the file looks cut short. Export the "
                "memory again and import the whole file",
                code="invalid_export",
            ) from None
        raise ValidationFailed(f"line {number} is not JSON", code="invalid_export") from None
    except ValueError:
        raise ValidationFailed(f"line {number} is not JSON", code="invalid_export") from None
    if not isinstance(record, dict) or not isinstance(record.get("record"), str):
        raise ValidationFailed(
            f"line {number}: each line is an object naming its record type",
            code="invalid_export",
        )
    return record


def _check_header(record: dict[str, Any]) -> dict[str, Any]:
    if record.get("format") != FORMAT:
        raise ValidationFailed("the header does not name a memory export", code="invalid_export")
    if record.get("version") != FORMAT_VERSION:
        raise ValidationFailed(
            f"export format version {record.get('version')!r}; this server reads {FORMAT_VERSION}",
            code="invalid_export",
        )
    return record


def _stamped(f: models.Field) -> bool:
    return bool(getattr(f, "auto_now_add", False) or getattr(f, "auto_now", False))


def _default(f: models.Field) -> Any:
    if f.has_default():
        return f.get_default()
    if f.null:
        return None
    if _stamped(f):
        return timezone.now().isoformat()
    if isinstance(f, (models.CharField, models.TextField)):
        return ""
    return None


_SCALARS = (str, int, float, bool)


@dataclass(frozen=True)
class _Plan:
    """How a line type's values become COPY cells (worked out once per type): the
    positions of the cells each check applies to."""

    fields: tuple[models.Field, ...]
    position: dict[str, int]  # each field's cell, by the name a line gives it
    scalar: tuple[bool, ...]  # by cell: whether it takes neither JSON nor an array
    stamped: tuple[int, ...]  # NOT NULL creation and change times: null means now
    json: tuple[tuple[int, bool], ...]  # with whether the field takes SQL NULL
    arrays: tuple[int, ...]
    scalars: tuple[int, ...]


@cache
def _plan(kind: Kind) -> _Plan:
    fields = tuple(kind.fields())
    json, arrays, scalars = [], [], []
    for i, f in enumerate(fields):
        if isinstance(f, models.JSONField):
            json.append((i, f.null))
        elif f.get_internal_type() == "ArrayField":
            arrays.append(i)
        else:
            scalars.append(i)
    return _Plan(
        fields=fields,
        position={f.attname: i for i, f in enumerate(fields)},
        scalar=tuple(i in scalars for i in range(len(fields))),
        stamped=tuple(i for i, f in enumerate(fields) if not f.null and _stamped(f)),
        json=tuple(json),
        arrays=tuple(arrays),
        scalars=tuple(scalars),
    )


def _array_cell(f: models.Field, value: Any, kind: Kind, number: int) -> Any:
    if isinstance(value, list) and all(isinstance(v, _SCALARS) for v in value):
        return [_text_checked(v, f, kind, number) for v in value]
    return _wrong_shape(f, kind, number)


def _wrong_shape(f: models.Field, kind: Kind, number: int) -> Any:
    raise ValidationFailed(
        f"line {number}: {kind.name}.{f.attname} has a value of the wrong shape",
        code="invalid_export",
    )


def _text_checked(value: Any, f: models.Field, kind: Kind, number: int) -> Any:
    if isinstance(value, str) and "\x00" in value:
        raise ValidationFailed(
            f"line {number}: {kind.name}.{f.attname} holds a NUL character",
            code="invalid_export",
        )
    return value
