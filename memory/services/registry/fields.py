"""The editable fields of a registry predicate and their validation (no I/O).

Registry edits (predicates.py, and the registry file import through them) validate with
these; the registry export (selectors/registry.py) writes the same fields.
"""

from __future__ import annotations

import math
import re
from typing import Any, NoReturn

from memory.domain.constraints import constraints_check_kind, constraints_clean
from memory.domain.predicate_names import predicate_check_text, predicate_normalize
from memory.kernel.errors import ValidationFailed
from memory.models import ENTITY_TYPES, Predicate, PredicateKind
from memory.models.predicate import EDITABLE_FIELDS, Lifecycle

_CATEGORY_RE = re.compile(r"[a-z][a-z0-9_]{0,49}")
_MAX_TEXT = 2000


def predicate_fields_clean(fields: dict[str, Any]) -> dict[str, Any]:
    """Validate registry fields; ValidationFailed names the first bad one."""
    unknown = sorted(set(fields) - set(EDITABLE_FIELDS))
    if unknown:
        raise ValidationFailed(
            f"unknown or read-only predicate fields: {', '.join(unknown)}",
            code="unknown_field",
            details={"fields": unknown},
        )
    return {field: _clean_field(field, value) for field, value in fields.items()}


def predicate_flags_check(predicate: Predicate) -> None:
    if predicate.single_valued and predicate.is_aggregate:
        raise ValidationFailed(
            f"predicate {predicate.name!r} cannot be both single_valued (a new value "
            "supersedes the old) and is_aggregate (one value updated in place)",
            code="invalid_flags",
        )
    constraints_check_kind(predicate.constraints, name=predicate.name, kind=predicate.kind)


def predicate_aliases_clean(aliases: list[str], *, name: str) -> list[str]:
    """The distinct normalized forms of ``aliases`` (hostile text refused), without the
    ones that normalize onto ``name`` itself (already covered)."""
    forms: list[str] = []
    for raw in aliases:
        predicate_check_text(raw)
        form = predicate_normalize(raw)
        if form != name and form not in forms:
            forms.append(form)
    return forms


def _clean_field(field: str, value: Any) -> Any:
    if field == "constraints":
        return constraints_clean(value)
    if field in ("description", "example"):
        return _text(field, value, _MAX_TEXT)
    if field == "category":
        category = _text(field, value, 50).lower()
        if not _CATEGORY_RE.fullmatch(category):
            _invalid(field, "use lowercase letters, digits and '_', starting with a letter")
        return category
    if field == "kind":
        return _choice(field, value, PredicateKind.values)
    if field == "lifecycle":
        return _choice(field, value, Lifecycle.values)
    if field in ("subject_types", "object_types"):
        if not isinstance(value, list | tuple) or any(v not in ENTITY_TYPES for v in value):
            _invalid(field, f"a list of entity types from {', '.join(ENTITY_TYPES)}")
        return list(dict.fromkeys(value))
    if field == "inverse":
        inverse = _text(field, value, 100)
        if inverse:
            predicate_check_text(inverse)
        return predicate_normalize(inverse)
    if field in ("default_importance", "ranking_weight"):
        return _number(field, value)
    if field == "default_validity_days":
        if value is not None and (type(value) is not int or value < 1):
            _invalid(field, "a whole number of days (1 or more) or null")
        return value
    if type(value) is not bool:
        _invalid(field, "true or false")
    return value


def _number(field: str, value: Any) -> float:
    if type(value) not in (int, float) or not math.isfinite(value):
        _invalid(field, "a number")
    if field == "default_importance" and not 0.0 <= value <= 1.0:
        _invalid(field, "between 0 and 1")
    if field == "ranking_weight" and not 0.0 < value <= 10.0:
        _invalid(field, "above 0 and at most 10")
    return float(value)


def _text(field: str, value: Any, limit: int) -> str:
    if not isinstance(value, str) or len(value) > limit:
        _invalid(field, f"text of at most {limit} characters")
    return str(value).strip()


def _choice(field: str, value: Any, choices: list[str]) -> str:
    if value not in choices:
        _invalid(field, f"one of {', '.join(choices)}")
    return str(value)


def _invalid(field: str, expected: str) -> NoReturn:
    raise ValidationFailed(
        f"invalid {field}: expected {expected}", code="invalid_field", details={"field": field}
    )
