"""Reading items: get by key, search under a namespace prefix, list namespaces.

Every read sees only items whose namespace's scope the caller's grants read, and never
an expired item (whether or not the sweep has reclaimed it). A search with a query ranks
the indexed items by the project's hybrid search — BM25 and vector, fused by reciprocal
rank — and then lists the other matching items, unscored, newest first.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import BooleanField, ExpressionWrapper, FloatField, Q, QuerySet, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Now
from pgvector.django import CosineDistance

from memory.domain.access import ContextAccess
from memory.domain.namespaces import Namespace, namespace_scope
from memory.infra.embeddings import embed_for_request
from memory.infra.pg_rows import instances_build, json_text
from memory.kernel.errors import ValidationFailed
from memory.models import Item
from memory.search.bm25 import bm25_rank, corpus_visible_sql
from memory.search.fusion import rrf_fuse
from memory.search.models import Target
from memory.search.sql import q_where_sql
from memory.search.vector import vector_rank

MAX_LIMIT = 1000
MAX_OFFSET = 100_000
MAX_FILTER_FIELDS = 20
MAX_QUERY_CHARS = 2000
_OPERATORS = {"$eq": "=", "$ne": "<>", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_ITEM_FIELDS = ("id", "namespace", "key", "value", "created_at", "updated_at", "expires_at")


@dataclass(frozen=True)
class ItemHit:
    item: Item
    score: float | None


@dataclass(frozen=True)
class MatchCondition:
    match_type: str  # "prefix" | "suffix"
    path: Namespace


def _live() -> Q:
    return Q(expires_at__isnull=True) | Q(expires_at__gt=Now())


def namespace_prefix_q(prefix: Namespace) -> Q:
    """Items in ``prefix`` or below it, label by label (the scope index answers it)."""
    if not prefix:
        return Q()
    scope = namespace_scope(prefix)
    return Q(scope=scope) | Q(scope__startswith=scope + "/")


def items_visible(access: ContextAccess) -> QuerySet[Item]:
    """The live items of the context whose namespace the caller's grants read."""
    return Item.objects.filter(access.grants.read_q("scope"), context=access.context).filter(
        _live()
    )


# The live, visible items among (namespace, key) pairs: one probe of item_unique each
# (``OFFSET 0`` keeps it one whatever a young table's statistics suggest).
_GET_SQL = f"""
SELECT i.* FROM jsonb_to_recordset(%s::jsonb) AS r(ns jsonb, key text)
CROSS JOIN LATERAL (
    SELECT {", ".join(_ITEM_FIELDS)} FROM memory_item
    WHERE context_id = %s AND key = r.key
        AND namespace = ARRAY(SELECT jsonb_array_elements_text(r.ns))
        AND (expires_at IS NULL OR expires_at > now()) AND {{visible}}
    OFFSET 0
) i
"""  # noqa: S608 - column names from the model


def items_get(
    *, access: ContextAccess, refs: Sequence[tuple[Namespace, str]]
) -> dict[tuple[Namespace, str], Item]:
    """The live, visible items among ``refs`` by (namespace, key).

    A store's get is the API's most frequent call: one plain statement, no ORM
    compilation; the grants' filter is the one the ORM reads use (``q_where_sql``)."""
    if not refs:
        return {}
    wanted = json_text([{"ns": list(ns), "key": key} for ns, key in dict.fromkeys(refs)])
    visible, params = q_where_sql(Item, access.grants.read_q("scope"))
    with connection.cursor() as cursor:
        cursor.execute(_GET_SQL.format(visible=visible), [wanted, access.context.pk, *params])
        rows = cursor.fetchall()
    items: list[Item] = instances_build(Item, _ITEM_FIELDS, rows)
    return {(tuple(item.namespace), item.key): item for item in items}


def filter_validate(spec: object) -> dict[str, Any]:
    """A filter on value fields: ``{field: value}`` (exact match) or ``{field: {"$op":
    value}}`` with ``$eq $ne $gt $gte $lt $lte``."""
    if spec is None:
        return {}
    if not isinstance(spec, dict):
        raise ValidationFailed("filter must be an object of value fields", code="invalid_filter")
    if len(spec) > MAX_FILTER_FIELDS:
        raise ValidationFailed(
            f"filter names at most {MAX_FILTER_FIELDS} fields", code="invalid_filter"
        )
    for field, condition in spec.items():
        if not field or "\x00" in field:
            raise ValidationFailed("filter fields must be non-empty text", code="invalid_filter")
        if _is_operators(condition):
            unknown = sorted(set(condition) - set(_OPERATORS))
            if unknown:
                raise ValidationFailed(
                    f"unknown filter operator {unknown[0]!r} on {field!r}; use "
                    + ", ".join(_OPERATORS),
                    code="invalid_filter",
                )
        _check_no_nul(condition)
    return spec


def _check_no_nul(value: object) -> None:
    if "\x00" in json.dumps(value):
        raise ValidationFailed("filter values must not contain NUL", code="invalid_filter")


def _is_operators(condition: object) -> bool:
    return (
        isinstance(condition, dict)
        and bool(condition)
        and all(isinstance(k, str) and k.startswith("$") for k in condition)
    )


def _filtered(rows: QuerySet[Item], spec: dict[str, Any]) -> QuerySet[Item]:
    for field, condition in spec.items():
        ops = condition.items() if _is_operators(condition) else [("$eq", condition)]
        for op, operand in ops:
            sql = _OPERATORS[op]
            literal = json.dumps(operand)
            if op == "$eq":
                expr = "(value -> %s) = %s::jsonb"
                params: list[Any] = [field, literal]
            elif op == "$ne":
                expr = "(value -> %s) IS DISTINCT FROM %s::jsonb"
                params = [field, literal]
            else:  # ordered comparisons compare like with like (numbers, text, ...)
                expr = (
                    f"(jsonb_typeof(value -> %s) = jsonb_typeof(%s::jsonb) "
                    f"AND (value -> %s) {sql} %s::jsonb)"
                )
                params = [field, literal, field, literal]
            # The SQL is one of the fixed texts above; field and operand are parameters.
            rows = rows.filter(RawSQL(expr, params, output_field=BooleanField()))  # noqa: S611
    return rows


def items_search(
    *,
    access: ContextAccess,
    namespace_prefix: Namespace,
    query: str | None = None,
    filter: dict[str, Any] | None = None,
    limit: int = 10,
    offset: int = 0,
) -> list[ItemHit]:
    """Items under ``namespace_prefix`` (label by label) matching ``filter``: ranked by
    ``query`` when there is one, else newest first."""
    rows = _filtered(
        items_visible(access).filter(namespace_prefix_q(namespace_prefix)), filter or {}
    )
    rows = rows.only(*_ITEM_FIELDS)
    if not (query and query.strip()):
        page = rows.order_by("-updated_at", "-id")[offset : offset + limit]
        return [ItemHit(item, None) for item in page]
    ranked = _ranked(access, namespace_prefix, rows, query, depth=offset + limit)
    hits = ranked[offset : offset + limit]
    if len(hits) < limit:  # then the matching items that are not indexed, newest first
        rest_offset = max(0, offset - len(ranked))
        rest = rows.exclude(pk__in=[h.item.pk for h in ranked]).order_by("-updated_at", "-id")
        hits += [ItemHit(i, None) for i in rest[rest_offset : rest_offset + limit - len(hits)]]
    return hits


def _ranked(
    access: ContextAccess,
    prefix: Namespace,
    rows: QuerySet[Item],
    query: str,
    *,
    depth: int,
) -> list[ItemHit]:
    """The indexed items among ``rows`` ranked for ``query``: BM25 and vector rankings
    of the visible corpus under the prefix, fused; candidates are read past ``depth``
    so that the filter and the expiry, applied after, still leave enough.

    Ranked by the fusion, each scored by its vector's cosine similarity to the query's
    (1 − cosine distance, the score LangGraph's PostgresStore reports): a fused score
    says only where an item stands among the others — one item alone scores the same for
    any query — while the similarity says how near it is to this one. An item stored
    without a vector (the embedder was down) that BM25 found scores None."""
    visible = access.grants.read_q("scope") & namespace_prefix_q(prefix)
    candidates = min(max(depth * 3, depth + 50), 3 * MAX_LIMIT)
    bm25 = bm25_rank(
        context_id=access.context.pk,
        target=Target.ITEM,
        query=query,
        visible_sql=corpus_visible_sql(visible),
        limit=candidates,
    )
    (vector,) = embed_for_request([query], hint="search without a query still works")
    nearest = vector_rank(
        context_id=access.context.pk,
        target=Target.ITEM,
        embedding=vector,
        visible=visible & _live(),
        limit=candidates,
    )
    fused = rrf_fuse([[h.ref_id for h in bm25], [h.ref_id for h in nearest]])
    similarity = ExpressionWrapper(
        Value(1.0) - CosineDistance("embedding", vector), output_field=FloatField()
    )
    found = {
        item.pk: item for item in rows.filter(pk__in=list(fused)).annotate(similarity=similarity)
    }
    order = sorted(found, key=lambda pk: (-fused[pk], pk))
    return [ItemHit(found[pk], found[pk].similarity) for pk in order]


def namespaces_list(
    *,
    access: ContextAccess,
    conditions: Sequence[MatchCondition] = (),
    max_depth: int | None = None,
    limit: int = 100,
    offset: int = 0,
) -> list[Namespace]:
    """The distinct namespaces of live visible items matching every condition, cut to
    ``max_depth`` labels, in order."""
    where, params = q_where_sql(Item, access.grants.read_q("scope") & _live())
    clauses: list[str] = []
    args: list[Any] = []
    for condition in conditions:
        n = len(condition.path)
        if condition.match_type == "prefix" and all(label != "*" for label in condition.path):
            # A literal prefix is a scope prefix: the index on scope answers it.
            scope = namespace_scope(condition.path)
            clauses.append("(scope = %s OR scope LIKE %s)")
            args += [scope, _like_literal(scope) + "/%"]
            continue
        clauses.append("cardinality(namespace) >= %s")
        args.append(n)
        for i, label in enumerate(condition.path, start=1):
            if label == "*":
                continue
            if condition.match_type == "prefix":
                clauses.append("namespace[%s] = %s")
                args += [i, label]
            else:
                clauses.append("namespace[cardinality(namespace) - %s + %s] = %s")
                args += [n, i, label]
    cut = "namespace[1:%s]" if max_depth is not None else "namespace"
    cut_args = [max_depth] if max_depth is not None else []
    sql = (
        f"SELECT DISTINCT {cut} AS ns FROM memory_item WHERE context_id = %s AND {where} "  # noqa: S608
        + "".join(f" AND {c}" for c in clauses)
        + " ORDER BY ns LIMIT %s OFFSET %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*cut_args, access.context.pk, *params, *args, limit, offset])
        return [tuple(row[0]) for row in cursor.fetchall()]


def _like_literal(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
