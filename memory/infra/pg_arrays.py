"""PostgreSQL array literals for bulk statements (``INSERT … SELECT FROM unnest(%s::T[])``).

psycopg adapts a Python list element by element in Python: for the tens of thousands of
values of a bulk ingest (fact columns, posting lists) that cost more than PostgreSQL's
own work (benchmarks/ingest_throughput.py). Sending each array as one text literal,
which the server parses with the ``::T[]`` cast, does the same in a string join; a value
the same in every row travels as its own text (``%s::T``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime


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


def is_constant(values: list[object]) -> bool:
    """Whether a column holds one and the same scalar in every row (then it travels as
    that one value, ``scalar_text``, rather than as an array of copies)."""
    first = values[0]
    return (
        type(first) in _SCALAR_TYPES
        and values.count(first) == len(values)
        and len(set(map(type, values))) == 1  # 1 == True == 1.0: one type, too
    )


# Types whose one value travels as its text and is cast by the server, as in an array.
_SCALAR_TYPES = (type(None), bool, int, float, str, datetime, date)


def scalar_text(value: object) -> str | None:
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
