"""Small bridges between the ORM and the search module's hand-written SQL."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import EmptyResultSet, FullResultSet
from django.db import connection, models
from django.db.models import Q
from django.db.models.sql import Query


def q_where_sql(model: type[models.Model], q: Q) -> tuple[str, list[Any]]:
    """Compile ``q`` (e.g. ``Grants.read_q()``) to a WHERE fragment over ``model``'s table.

    Columns come out qualified by the table name (``"search_searchdoc"."scope"``), so
    the raw query must refer to the table by its own name. Compiling the same Q the ORM
    uses keeps one definition of "visible" for every read path.
    """
    if not q:
        return "TRUE", []
    query = Query(model)
    where = query.build_where(q)
    compiler = query.get_compiler(connection=connection)
    try:
        sql, params = where.as_sql(compiler, connection)
    except EmptyResultSet:  # e.g. no grant at all: nothing is visible
        return "FALSE", []
    except FullResultSet:
        return "TRUE", []
    return f"({sql})" if sql else "TRUE", list(params)
