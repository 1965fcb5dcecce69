"""Reading item operations from request bodies and query strings, strictly: unknown
fields, wrong types and values out of range are refused with a 400 naming the op."""

from __future__ import annotations

from typing import Any

from memory.domain.item_paths import paths_validate
from memory.domain.namespaces import key_validate, namespace_validate
from memory.kernel.errors import ValidationFailed
from memory.selectors.items import (
    MAX_LIMIT,
    MAX_OFFSET,
    MAX_QUERY_CHARS,
    MatchCondition,
    filter_validate,
)
from memory.services.items.batch import GetOp, ListNamespacesOp, Op, SearchOp
from memory.services.items.writes import ItemPut, ttl_validate, value_validate

MAX_OPS = 10_000
DEFAULT_INDEX = ["$"]

_FIELDS = {
    "get": {"op", "namespace", "key", "refresh_ttl"},
    "put": {"op", "namespace", "key", "value", "index", "ttl", "extract"},
    "search": {"op", "namespace_prefix", "query", "filter", "limit", "offset", "refresh_ttl"},
    "list_namespaces": {"op", "match_conditions", "max_depth", "limit", "offset"},
}


def _refused(where: str, error: ValidationFailed) -> ValidationFailed:
    return ValidationFailed(f"{where}: {error.message}", code=error.code, details=error.details)


def ops_parse(raw: object) -> list[Op]:
    """The ``ops`` of a batch body."""
    if not isinstance(raw, dict) or set(raw) != {"ops"}:
        raise ValidationFailed("the body must be an object with one field, ops", code="invalid")
    ops = raw["ops"]
    if not isinstance(ops, list):
        raise ValidationFailed("ops must be a list of operations", code="invalid")
    if len(ops) > MAX_OPS:
        raise ValidationFailed(f"a batch holds at most {MAX_OPS} ops", code="too_many_ops")
    parsed: list[Op] = []
    for i, op in enumerate(ops):
        try:
            parsed.append(op_parse(op))
        except ValidationFailed as error:
            raise _refused(f"ops[{i}]", error) from None
    return parsed


def op_parse(op: object) -> Op:
    if not isinstance(op, dict) or not isinstance(op.get("op"), str) or op["op"] not in _FIELDS:
        raise ValidationFailed(
            "each op is an object whose op is get, put, search or list_namespaces",
            code="invalid_op",
        )
    kind = op["op"]
    unknown = sorted(set(op) - _FIELDS[kind])
    if unknown:
        raise ValidationFailed(f"unknown field {unknown[0]!r} in a {kind} op", code="invalid_op")
    if kind == "get":
        return GetOp(
            namespace=namespace_validate(op.get("namespace")),
            key=key_validate(op.get("key")),
            refresh_ttl=_bool(op, "refresh_ttl", True),
        )
    if kind == "put":
        return put_parse(op)
    if kind == "search":
        return SearchOp(
            namespace_prefix=namespace_validate(
                op.get("namespace_prefix", []), allow_empty=True, what="namespace_prefix"
            ),
            query=_query(op.get("query")),
            filter=filter_validate(op.get("filter")) or None,
            limit=_int(op, "limit", 10, 1, MAX_LIMIT),
            offset=_int(op, "offset", 0, 0, MAX_OFFSET),
            refresh_ttl=_bool(op, "refresh_ttl", True),
        )
    return ListNamespacesOp(
        match_conditions=_conditions(op.get("match_conditions")),
        max_depth=_int(op, "max_depth", None, 1, 100),
        limit=_int(op, "limit", 100, 1, MAX_LIMIT),
        offset=_int(op, "offset", 0, 0, MAX_OFFSET),
    )


def put_parse(op: dict[str, Any]) -> ItemPut:
    """A put from an op, or from the REST form's query string and body."""
    if "value" not in op:
        raise ValidationFailed("a put needs a value (null deletes the item)", code="invalid_value")
    index = op.get("index")
    return ItemPut(
        namespace=namespace_validate(op.get("namespace")),
        key=key_validate(op.get("key")),
        value=value_validate(op["value"]),
        index=paths_validate(DEFAULT_INDEX if index is None or index is True else index),
        ttl=ttl_validate(op.get("ttl")),
        extract=_maybe_bool(op, "extract"),
    )


def _query(query: object) -> str | None:
    if query is None:
        return None
    if not isinstance(query, str) or len(query) > MAX_QUERY_CHARS or "\x00" in query:
        raise ValidationFailed(
            f"query must be text of at most {MAX_QUERY_CHARS} characters", code="invalid_query"
        )
    return query


def _bool(op: dict[str, Any], name: str, default: bool) -> bool:
    value = _maybe_bool(op, name)
    return default if value is None else value


def _maybe_bool(op: dict[str, Any], name: str) -> bool | None:
    value = op.get(name)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise ValidationFailed(f"{name} must be true or false", code="invalid")
    return value


def _int(op: dict[str, Any], name: str, default: Any, low: int, high: int) -> Any:
    value = op.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationFailed(
            f"{name} must be a whole number from {low} to {high}", code=f"invalid_{name}"
        )
    return value


def _conditions(raw: object) -> tuple[MatchCondition, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > 10:
        raise ValidationFailed(
            "match_conditions must be a list of at most 10 conditions",
            code="invalid_match_conditions",
        )
    conditions = []
    for condition in raw:
        if (
            not isinstance(condition, dict)
            or set(condition) != {"match_type", "path"}
            or condition["match_type"] not in ("prefix", "suffix")
        ):
            raise ValidationFailed(
                'each match condition is {"match_type": "prefix" or "suffix", "path": [labels]}',
                code="invalid_match_conditions",
            )
        path = namespace_validate(condition["path"], what="a match condition's path")
        conditions.append(MatchCondition(condition["match_type"], path))
    return tuple(conditions)
