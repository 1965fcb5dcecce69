"""PostgreSQL array literals for bulk statements (``INSERT … SELECT FROM unnest(%s::T[])``).

psycopg adapts a Python list element by element in Python: for the tens of thousands of
values of a bulk ingest (fact columns, posting lists) that cost more than PostgreSQL's
own work (benchmarks/ingest_throughput.py). Sending each array as one text literal,
which the server parses with the ``::T[]`` cast, does the same in a string join.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import date, datetime
from functools import cache
from typing import Any

import orjson
from django.db import DEFAULT_DB_ALIAS, connection, connections, models


def _element(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, int):
        return str(int(value))  # int(), so an IntegerChoices member prints as its number
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, datetime | date):
        return f'"{value.isoformat()}"'
    return '"' + _escape(str(value)) + '"'


def array_literal(values: Iterable[object]) -> str:
    """``{1,NULL,"a \\"b\\""}``: the text form of a one-dimensional array of scalars.

    Elements are quoted (so commas, braces, spaces and the word NULL stay data) and
    ``None`` is SQL NULL. Cast it on the server: ``%s::bigint[]``, ``%s::text[]``.
    """
    items = values if isinstance(values, list | tuple) else list(values)
    # Columns are nearly always of one plain type: one string join then, rather than a
    # type check per element (``type() is``, so bools, enum members and str subclasses
    # still take the general path and print as they do there).
    kinds = set(map(type, items))
    if kinds == {str}:
        body = '","'.join(items)  # type: ignore[arg-type]
        if "\\" in body or '"' in body:
            body = '","'.join(_escape(v) for v in items)  # type: ignore[arg-type]
        return '{"' + body + '"}'
    if kinds == {int}:
        return "{" + ",".join(map(str, items)) + "}"
    if kinds == {float}:
        return "{" + ",".join(map(repr, items)) + "}"
    # One type besides NULLs (an optional column, a column of choices): one formatter
    # for every element, chosen once, writing what ``_element`` writes.
    plain = kinds - {type(None)}
    kind = next(iter(plain)) if len(plain) == 1 else None
    if kind is int or kind is float:
        number = str if kind is int else repr
        return "{" + ",".join("NULL" if v is None else number(v) for v in items) + "}"
    if kind is not None and issubclass(kind, str):
        return "{" + ",".join("NULL" if v is None else f'"{_escape(str(v))}"' for v in items) + "}"
    if kind is datetime or kind is date:
        return "{" + ",".join("NULL" if v is None else f'"{v.isoformat()}"' for v in items) + "}"  # type: ignore[union-attr]
    return "{" + ",".join(_element(v) for v in items) + "}"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def int_array_literal(values: Iterable[int]) -> str:
    """The fast path for integer arrays (posting lists): no per-element type checks."""
    return "{" + ",".join(map(str, values)) + "}"


_SEQUENCES: dict[str, str] = {}  # table → its id sequence, looked up once per process


def next_ids(model: type[models.Model], count: int) -> list[int]:
    """``count`` new primary keys from ``model``'s sequence (so rows inserted together can
    point at each other, and the caller knows each row's id without RETURNING order)."""
    table = model._meta.db_table
    with connection.cursor() as cursor:
        sequence = _SEQUENCES.get(table)
        if sequence is None:
            cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [table])
            sequence = _SEQUENCES[table] = str(cursor.fetchone()[0])
        # nextval, not a range taken by hand: concurrent writers still get distinct ids.
        cursor.execute(
            "SELECT nextval(%s::regclass) FROM generate_series(1, %s)", [sequence, count]
        )
        return [int(r[0]) for r in cursor.fetchall()]


@cache
def _columns(model: type[models.Model]) -> list[tuple[Any, str, str]]:
    """The model's concrete fields with their columns and database types, worked out
    once per process: a foreign key's type is its target's, which builds a field each
    time it is asked (a millisecond of a small run's inserts)."""
    return [
        (f, str(f.column), str(f.db_type(connection) or "")) for f in model._meta.concrete_fields
    ]


def _cast(db_type: str) -> tuple[str, str]:
    """How a column travels: the array type it is sent as, and the cast back per row.

    jsonb goes as text (its JSON), and an array column as text (its own literal) cast
    back row by row: ``unnest`` of a two-dimensional array would flatten it.
    """
    if db_type == "jsonb":
        return "text[]", "::jsonb"
    if db_type.endswith("[]"):
        return "text[]", f"::{db_type}"
    return f"{db_type}[]", ""


def rows_insert(
    model: type[models.Model],
    rows: Sequence[Mapping[str, object]],
    *,
    skip_conflicts: bool = False,
    overlap: bool = False,
) -> set[int] | None:
    """Insert ``rows`` (column name → value, every concrete column, ``id`` included) with
    one ``INSERT … SELECT FROM unnest(column arrays)``: a parameter per column instead of
    one per value. jsonb values are given as JSON text, array columns as lists.

    A column that holds one value in every row (a batch's context, scope, run, source,
    time) goes as that one value rather than an array of copies: its literal is built
    and parsed once, not once per row. The first column (the id) always goes as an array.

    ``skip_conflicts``: rows that would break a unique constraint are left out
    (``ON CONFLICT DO NOTHING``) instead of failing the statement; returns then the ids
    of the rows inserted. ``overlap``: sent with ``execute_overlapped`` (not with
    ``skip_conflicts``, whose ids are read).
    """
    if not rows:
        return set() if skip_conflicts else None
    fields = [(column, db_type) for _, column, db_type in _columns(model)]
    columns = [c for c, _ in fields]
    # A column added to the model must be given a value by the caller: fail loudly.
    if list(rows[0]) != columns:
        raise ValueError(f"{model.__name__} rows must give exactly the columns {columns}")
    arrays, unnested, selected, params, scalars = [], [], [], [], []
    for position, (column, db_type) in enumerate(fields):
        values = [row[column] for row in rows]
        if position > 0 and not db_type.endswith("[]") and _constant(values):
            selected.append(f"%s::{db_type}")
            scalars.append(_scalar_text(values[0]))
            continue
        array_type, row_cast = _cast(db_type)
        arrays.append(f"%s::{array_type}")
        unnested.append(column)
        selected.append(f"u.{column}{row_cast}")
        if db_type.endswith("[]"):
            values = [None if v is None else array_literal(v) for v in values]  # type: ignore[arg-type]
        params.append(array_literal(values))
    conflicts = f" ON CONFLICT DO NOTHING RETURNING {columns[0]}" if skip_conflicts else ""
    sql = (
        f"INSERT INTO {model._meta.db_table} ({', '.join(columns)}) "  # noqa: S608  (names from the model)
        f"SELECT {', '.join(selected)} "
        f"FROM unnest({', '.join(arrays)}) AS u({', '.join(unnested)})" + conflicts
    )
    bound: list[Any] = [*scalars, *params]  # placeholders in order: SELECT, then FROM
    if overlap and not skip_conflicts:
        execute_overlapped(sql, bound)
        return None
    with connection.cursor() as cursor:
        cursor.execute(sql, bound)
        return {int(row[0]) for row in cursor.fetchall()} if skip_conflicts else None


# --- statements the server runs while Python goes on -------------------------------------


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


def _constant(values: list[object]) -> bool:
    first = values[0]
    return (
        type(first) in _SCALAR_TYPES
        and values.count(first) == len(values)
        and len(set(map(type, values))) == 1  # 1 == True == 1.0: one type, too
    )


# Types whose one value travels as its text and is cast by the server, as in an array.
_SCALAR_TYPES = (type(None), bool, int, float, str, datetime, date)


def _scalar_text(value: object) -> str | None:
    """A value as the text the server casts (``%s::T``), written as ``_element`` writes
    it inside an array literal, unquoted."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)


# orjson writes what ``json.dumps`` writes for the values a model stores (dicts with
# non-string keys included); what it would write differently it refuses instead
# (datetimes, dataclasses; integers beyond 64 bits), and those go to ``json.dumps``.
_ORJSON_OPTIONS = (
    orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
)


def json_text(value: object, encoder: type[json.JSONEncoder] | None = None) -> str:
    """``json.dumps(value, cls=encoder)``, an order of magnitude faster for the plain
    values of a run's payload and result (half a megabyte for a bulk turn: 15 ms with
    ``json``, under 2 with orjson). A custom encoder always goes through ``json``."""
    if encoder is None:
        try:
            return orjson.dumps(value, option=_ORJSON_OPTIONS).decode()
        except TypeError:
            pass  # refused: json's own rules decide (and raise what they raise)
    return json.dumps(value, cls=encoder)


def _prep_save(field: Any, obj: models.Model, *, add: bool) -> Any:
    """What ``save()`` sends for ``field`` of ``obj``; JSON as text (see ``json_text``)."""
    value = field.pre_save(obj, add=add)
    if isinstance(field, models.JSONField) and value is not None:
        return json_text(value, field.encoder)
    return field.get_db_prep_save(value, connection)


def instances_insert(
    objs: Sequence[models.Model], *, skip_conflicts: bool = False
) -> list[models.Model]:
    """``bulk_create`` for the hot paths: ids from the sequence, one unnest insert.
    Returns the instances inserted: all of them, or with ``skip_conflicts`` those that
    broke no unique constraint (``rows_insert``; the others are left unsaved).

    Like ``bulk_create`` it sends no signals; unlike it, the cost does not grow with the
    number of values bound one by one. ``auto_now``/defaults apply through ``pre_save``.
    """
    if not objs:
        return []
    model = type(objs[0])
    for obj, pk in zip(objs, next_ids(model, len(objs)), strict=True):
        obj.pk = pk
    fields = [
        (field, column, isinstance(field, models.JSONField), db_type.endswith("[]"))
        for field, column, db_type in _columns(model)
    ]
    db = connections[DEFAULT_DB_ALIAS]  # not the proxy: it looks the wrapper up per use
    rows = []
    for obj in objs:
        row: dict[str, object] = {}
        for field, column, is_json, is_array in fields:
            value = field.pre_save(obj, add=True)
            if is_json:
                row[column] = None if value is None else json_text(value, field.encoder)
            elif is_array:
                row[column] = value  # a list: rows_insert writes its literal
            else:
                row[column] = field.get_db_prep_save(value, db)
        rows.append(row)
    inserted = rows_insert(model, rows, skip_conflicts=skip_conflicts)
    saved = [obj for obj in objs if inserted is None or obj.pk in inserted]
    for obj in saved:
        obj._state.adding = False
        obj._state.db = connection.alias
    return saved


def instance_insert(obj: models.Model) -> None:
    """``obj.save()`` of a new row, for the hot paths: one ``INSERT … RETURNING`` of its
    id, without the ORM's statement compilation. Values go through the fields' own
    ``pre_save`` and ``get_db_prep_save``, as ``save()`` sends them; no signals are sent
    (none are connected to the project's models)."""
    model = type(obj)
    meta = model._meta
    fields = [f for f in meta.concrete_fields if not (f.primary_key and obj.pk is None)]
    values = [_prep_save(f, obj, add=True) for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {meta.db_table} ({', '.join(str(f.column) for f in fields)}) "  # noqa: S608  (names from the model)
            f"VALUES ({', '.join(['%s'] * len(fields))}) RETURNING {meta.pk.column}",
            values,
        )
        row = cursor.fetchone()
    obj.pk = row[0]
    obj._state.adding = False
    obj._state.db = connection.alias


def instance_update(obj: models.Model, field_names: Sequence[str]) -> None:
    """``obj.save(update_fields=field_names)`` for the hot paths: one plain ``UPDATE`` of
    those columns (through each field's ``pre_save`` and ``get_db_prep_save``, as
    ``save()`` would), without the ORM's statement compilation; no signals."""
    meta = type(obj)._meta
    fields = [meta.get_field(name) for name in field_names]
    values = [_prep_save(f, obj, add=False) for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {meta.db_table} SET "  # noqa: S608  (names from the model)
            + ", ".join(f"{f.column} = %s" for f in fields)  # type: ignore[union-attr]
            + f" WHERE {meta.pk.column} = %s",
            [*values, obj.pk],
        )


@dataclass(frozen=True)
class InstanceSelect:
    """What ``instance_read`` selects: a model's columns (alias ``t0``) and those of the
    forward foreign keys named, joined; ``build`` makes the instances of one row."""

    model: type[models.Model]
    parts: list[tuple[Any, type[models.Model], str]]
    columns: str  # the select list
    joins: str  # LEFT JOINs onto t0

    def build(self, row: Sequence[object]) -> models.Model | None:
        """The instance of ``row``, or None when its primary key is null (an outer join
        that found no row)."""
        built: list[models.Model | None] = []
        offset = 0
        for _, m, _ in self.parts:
            fields = m._meta.concrete_fields
            values = row[offset : offset + len(fields)]
            offset += len(fields)
            built.append(_from_row(m, fields, values))
        main = built[0]
        if main is None:
            return None
        for (link, _, _), instance in zip(self.parts[1:], built[1:], strict=True):
            link.set_cached_value(main, instance)
        return main


@cache
def instance_select(model: type[models.Model], related: tuple[str, ...] = ()) -> InstanceSelect:
    """The select of ``model`` as ``t0`` with the forward foreign keys ``related`` joined
    (worked out once per process)."""
    parts: list[tuple[Any, type[models.Model], str]] = [(None, model, "t0")]
    joins = []
    for position, name in enumerate(related, start=1):
        link = model._meta.get_field(name)
        target: type[models.Model] = link.related_model  # type: ignore[assignment]
        alias = f"t{position}"
        joins.append(
            f"LEFT JOIN {target._meta.db_table} {alias} "
            f"ON {alias}.{target._meta.pk.column} = t0.{link.column}"  # type: ignore[union-attr]
        )
        parts.append((link, target, alias))
    columns = [
        f"{alias}.{field.column}" for _, m, alias in parts for field in m._meta.concrete_fields
    ]
    return InstanceSelect(model, parts, ", ".join(columns), " ".join(joins))


def instance_read(
    model: type[models.Model], pk: int, *, related: Sequence[str] = ()
) -> models.Model | None:
    """``model.objects.select_related(*related).filter(pk=pk).first()`` for the hot
    paths: one plain statement that joins the forward foreign keys named, the instances
    built with each field's own ``from_db_value``, as the ORM builds them."""
    select = instance_select(model, tuple(related))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {select.columns} FROM {model._meta.db_table} t0 {select.joins} "  # noqa: S608  (names from the models)
            f"WHERE t0.{model._meta.pk.column} = %s",
            [pk],
        )
        row = cursor.fetchone()
    return None if row is None else select.build(row)


def _from_row(
    model: type[models.Model], fields: Sequence[Any], values: Sequence[object]
) -> models.Model | None:
    if values[[f.primary_key for f in fields].index(True)] is None:
        return None  # a null foreign key: nothing joined
    converted = [
        f.from_db_value(v, None, connection) if hasattr(f, "from_db_value") else v
        for f, v in zip(fields, values, strict=True)
    ]
    return model.from_db(connection.alias, [f.attname for f in fields], converted)
