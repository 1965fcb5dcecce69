"""Property constraints of registry predicates (the shape of each, and its validation).

A constraint states a rule the facts of one predicate should keep, after Wikidata's
property constraints: ``{"type", "status", "exceptions", …its parameters}``. ``status``
is ``mandatory`` or ``suggestion``; ``exceptions`` are entity ids whose facts the rule
does not judge. Writes that break a rule are kept and reported, never refused
(selectors/constraints.py computes the report).

This module is pure: it cleans what a registry edit sends and says which constraint can
apply to which predicate kind. Whether a regular expression also compiles in PostgreSQL
and whether a named predicate exists are checked by the registry service.
"""

from __future__ import annotations

import math
import re
from datetime import date
from typing import Any, NoReturn

from memory.domain.predicate_names import predicate_check_text, predicate_normalize
from memory.kernel.errors import ValidationFailed
from memory.models import ENTITY_TYPES

CONSTRAINT_TYPES: tuple[str, ...] = (
    "single_value",
    "format",
    "subject_type",
    "value_type",
    "allowed_values",
    "range",
    "symmetric",
    "inverse",
    "distinct_values",
    "conflicts_with",
    "requires",
)
CONSTRAINT_STATUSES: tuple[str, ...] = ("mandatory", "suggestion")
# The parameters each type takes (besides type, status and exceptions).
CONSTRAINT_PARAMETERS: dict[str, tuple[str, ...]] = {
    "single_value": (),
    "format": ("pattern",),
    "subject_type": ("types",),
    "value_type": ("types",),
    "allowed_values": ("values",),
    "range": ("min", "max"),
    "symmetric": (),
    "inverse": ("predicate",),
    "distinct_values": (),
    "conflicts_with": ("predicate",),
    "requires": ("predicate",),
}
# Types that judge the object entity of a relation, and types that judge a value.
RELATION_ONLY = frozenset({"value_type", "symmetric", "inverse"})
ATTRIBUTE_ONLY = frozenset({"format", "range"})
# Types whose rule names another predicate.
NAMES_PREDICATE = frozenset({"inverse", "conflicts_with", "requires"})

MAX_CONSTRAINTS = len(CONSTRAINT_TYPES)
MAX_EXCEPTIONS = 1000
MAX_VALUES = 200
MAX_PATTERN = 500
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")


def constraints_clean(value: Any) -> list[dict[str, Any]]:
    """The constraints as stored: each checked, parameters normalized, keys in one order.

    Raises ValidationFailed ("invalid_constraint") naming the constraint and what is wrong.
    """
    if not isinstance(value, list | tuple):
        _invalid(None, "constraints must be a list of objects")
    if len(value) > MAX_CONSTRAINTS:
        _invalid(None, f"at most {MAX_CONSTRAINTS} constraints (one of each type)")
    cleaned: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, raw in enumerate(value):
        constraint = _clean_one(index, raw)
        if constraint["type"] in seen:
            _invalid(index, f"a second {constraint['type']} constraint: one of each type")
        seen.add(constraint["type"])
        cleaned.append(constraint)
    return cleaned


def constraints_check_kind(constraints: list[dict[str, Any]], *, name: str, kind: str) -> None:
    """Refuse a constraint that cannot apply to a predicate of ``kind``."""
    for index, constraint in enumerate(constraints):
        ctype = constraint["type"]
        if ctype in RELATION_ONLY and kind != "relation":
            _invalid(
                index,
                f"{ctype} judges the object entity of a relation; {name!r} is {kind}, not relation",
            )
        if ctype in ATTRIBUTE_ONLY and kind != "attribute":
            _invalid(index, f"{ctype} judges the value of an attribute; {name!r} is {kind}")
        if ctype == "allowed_values":
            _check_values_for_kind(index, constraint["values"], kind)
        if ctype in NAMES_PREDICATE and constraint["predicate"] == name:
            hint = " (use symmetric)" if ctype == "inverse" else ""
            _invalid(index, f"{ctype} names {name!r} itself{hint}")


def constraint_get(constraints: list[dict[str, Any]], ctype: str) -> dict[str, Any] | None:
    return next((c for c in constraints if c["type"] == ctype), None)


def _clean_one(index: int, raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        _invalid(index, "each constraint is an object with a type")
    ctype = raw.get("type")
    if ctype not in CONSTRAINT_TYPES:
        _invalid(index, f"type must be one of {', '.join(CONSTRAINT_TYPES)}")
    allowed = {"type", "status", "exceptions", *CONSTRAINT_PARAMETERS[ctype]}
    unknown = sorted(set(raw) - allowed)
    if unknown:
        _invalid(index, f"{ctype} takes no {', '.join(unknown)}")
    status = raw.get("status", "mandatory")
    if status not in CONSTRAINT_STATUSES:
        _invalid(index, "status must be mandatory or suggestion")
    cleaned: dict[str, Any] = {"type": ctype, "status": status}
    cleaned.update(_PARAMETER_CLEANERS[ctype](index, raw))
    cleaned["exceptions"] = _exceptions(index, raw.get("exceptions", []))
    return cleaned


def _exceptions(index: int, value: Any) -> list[int]:
    if not isinstance(value, list) or len(value) > MAX_EXCEPTIONS:
        _invalid(index, f"exceptions must be a list of at most {MAX_EXCEPTIONS} entity ids")
    if any(type(v) is not int or v < 1 for v in value):
        _invalid(index, "exceptions are entity ids (whole numbers of 1 or more)")
    return sorted(set(value))


def _no_parameters(index: int, raw: dict[str, Any]) -> dict[str, Any]:
    return {}


def _pattern(index: int, raw: dict[str, Any]) -> dict[str, Any]:
    pattern = raw.get("pattern")
    if not isinstance(pattern, str) or not pattern or len(pattern) > MAX_PATTERN:
        _invalid(
            index, f"format needs a pattern: a regular expression of 1 to {MAX_PATTERN} characters"
        )
    try:
        re.compile(pattern)
    except re.error as exc:
        _invalid(index, f"pattern is not a valid regular expression: {exc}")
    if "\x00" in pattern:
        _invalid(index, "pattern holds a NUL character")
    return {"pattern": pattern}


def _types(index: int, raw: dict[str, Any]) -> dict[str, Any]:
    types = raw.get("types")
    if not isinstance(types, list) or not types or any(t not in ENTITY_TYPES for t in types):
        _invalid(
            index, f"types must be a non-empty list of entity types from {', '.join(ENTITY_TYPES)}"
        )
    return {"types": list(dict.fromkeys(types))}


def _values(index: int, raw: dict[str, Any]) -> dict[str, Any]:
    values = raw.get("values")
    if not isinstance(values, list) or not values or len(values) > MAX_VALUES:
        _invalid(index, f"allowed_values needs values: a list of 1 to {MAX_VALUES} values")
    for value in values:
        if isinstance(value, float) and not math.isfinite(value):
            _invalid(index, "values must be finite numbers, text or true/false")
        if not isinstance(value, str | int | float | bool):
            _invalid(index, "values are text, numbers, true/false, or entity ids")
        if isinstance(value, str) and len(value) > 500:
            _invalid(index, "a value of at most 500 characters")
    unique: list[Any] = []
    for value in values:
        if not any(type(value) is type(u) and value == u for u in unique):
            unique.append(value)
    return {"values": unique}


def _range(index: int, raw: dict[str, Any]) -> dict[str, Any]:
    bounds = {k: raw[k] for k in ("min", "max") if raw.get(k) is not None}
    if not bounds:
        _invalid(index, "range needs min, max or both")
    kinds = {_bound_kind(index, v) for v in bounds.values()}
    if len(kinds) > 1:
        _invalid(index, "min and max must both be numbers or both dates (YYYY-MM-DD)")
    if len(bounds) == 2 and bounds["min"] > bounds["max"]:
        _invalid(index, "min is above max")
    return {"min": bounds.get("min"), "max": bounds.get("max")}


def _bound_kind(index: int, value: Any) -> str:
    if type(value) in (int, float) and math.isfinite(value):
        return "number"
    if isinstance(value, str) and _DATE_RE.fullmatch(value):
        try:
            date.fromisoformat(value)
        except ValueError:
            pass
        else:
            return "date"
    _invalid(index, "range bounds are numbers or dates written YYYY-MM-DD")


def _predicate(index: int, raw: dict[str, Any]) -> dict[str, Any]:
    name = raw.get("predicate")
    if not isinstance(name, str) or not name.strip():
        _invalid(index, f"{raw['type']} needs the predicate it names")
    try:
        predicate_check_text(name)
    except ValidationFailed as exc:
        _invalid(index, f"predicate: {exc.message}")
    return {"predicate": predicate_normalize(name)}


def _check_values_for_kind(index: int, values: list[Any], kind: str) -> None:
    if kind == "relation" and any(type(v) is not int or v < 1 for v in values):
        _invalid(index, "the allowed values of a relation are entity ids")
    if kind != "relation" and kind != "attribute":
        _invalid(index, f"allowed_values judges attributes and relations, not {kind}")


_PARAMETER_CLEANERS = {
    "single_value": _no_parameters,
    "format": _pattern,
    "subject_type": _types,
    "value_type": _types,
    "allowed_values": _values,
    "range": _range,
    "symmetric": _no_parameters,
    "inverse": _predicate,
    "distinct_values": _no_parameters,
    "conflicts_with": _predicate,
    "requires": _predicate,
}


def _invalid(index: int | None, problem: str) -> NoReturn:
    where = "constraints" if index is None else f"constraint {index}"
    raise ValidationFailed(
        f"invalid {where}: {problem}",
        code="invalid_constraint",
        details={"field": "constraints", "index": index},
    )
