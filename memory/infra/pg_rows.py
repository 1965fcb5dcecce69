"""Plain statements for the write path's rows: bulk inserts of column arrays
(``INSERT … SELECT FROM unnest(%s::T[])``, each array one text literal, ``pg_arrays``),
ids taken from a model's sequence, and one row's insert, update and read without the
ORM's statement compilation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import orjson
from django.db import DEFAULT_DB_ALIAS, connection, connections, models

from memory.infra.pg_arrays import array_literal, is_constant, scalar_text
from memory.infra.pg_overlap import execute_overlapped

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
        if position > 0 and not db_type.endswith("[]") and is_constant(values):
            selected.append(f"%s::{db_type}")
            scalars.append(scalar_text(values[0]))
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


def instances_build(
    model: type[models.Model], field_names: Sequence[str], rows: Sequence[Sequence[object]]
) -> list[Any]:
    """Instances of ``model`` from rows of the named fields' columns in that order (the
    primary key among them), as ``.only(*field_names)`` builds them: each value through
    its field's ``from_db_value``."""
    # ``from_db`` takes a subset of the fields in the model's order, whatever the select's.
    order = [f.attname for f in model._meta.concrete_fields]
    given = sorted(range(len(field_names)), key=lambda i: order.index(field_names[i]))
    fields = [model._meta.get_field(field_names[i]) for i in given]
    return [_from_row(model, fields, [row[i] for i in given]) for row in rows]


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
