"""The checks a predicate's constraints need from the database before they are stored:
each ``format`` pattern compiles in PostgreSQL too (the report runs it there), each
predicate a rule names exists in the registry (a relation where the rule reads objects),
and each exception is an entity of the context. The shape of every constraint is checked
first, without I/O, by memory/domain/constraints.py."""

from __future__ import annotations

from typing import Any

from django.db import DatabaseError, connection, transaction

from memory.domain.constraints import NAMES_PREDICATE
from memory.kernel.errors import ValidationFailed
from memory.models import Entity, Predicate, PredicateKind, PredicateStatus


def constraints_check_stored(*, predicate: Predicate) -> None:
    """Raise ValidationFailed ("invalid_constraint") for the first constraint of
    ``predicate`` that names what the database does not hold or cannot run."""
    constraints: list[dict[str, Any]] = predicate.constraints
    named = {c["predicate"] for c in constraints if c["type"] in NAMES_PREDICATE}
    kinds = dict(
        Predicate.objects.filter(context_id=predicate.context_id, name__in=named)
        .exclude(status=PredicateStatus.REJECTED)
        .values_list("name", "kind")
    )
    exception_ids = {e for c in constraints for e in c["exceptions"]}
    entity_ids = {v for c in constraints if c["type"] == "allowed_values" for v in c["values"]}
    if predicate.kind != PredicateKind.RELATION:
        entity_ids = set()
    wanted = exception_ids | entity_ids
    known = set(
        Entity.objects.filter(context_id=predicate.context_id, pk__in=wanted).values_list(
            "pk", flat=True
        )
    )
    for index, constraint in enumerate(constraints):
        ctype = constraint["type"]
        if ctype == "format":
            _pattern_check(index, constraint["pattern"])
        if ctype in NAMES_PREDICATE:
            kind = kinds.get(constraint["predicate"])
            if kind is None:
                _invalid(
                    index,
                    f"{ctype} names {constraint['predicate']!r}, which is not in the registry",
                )
            if ctype == "inverse" and kind != PredicateKind.RELATION:
                _invalid(
                    index,
                    f"inverse names {constraint['predicate']!r}, which is {kind}, not a relation",
                )
        missing = sorted(set(constraint["exceptions"]) - known)
        if ctype == "allowed_values" and predicate.kind == PredicateKind.RELATION:
            missing += sorted(set(constraint["values"]) - known)
        if missing:
            _invalid(index, f"no entity {missing[0]} in this context")


def _pattern_check(index: int, pattern: str) -> None:
    """PostgreSQL's regular expressions are not Python's (no named groups, for one):
    the report runs the pattern there, so it must compile there."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT '' ~ %s", [f"^(?:{pattern})$"])
    except DatabaseError:
        _invalid(
            index,
            "pattern is not a regular expression PostgreSQL can run (it uses "
            "POSIX advanced expressions: no named groups or possessive quantifiers)",
        )


def _invalid(index: int, problem: str) -> None:
    raise ValidationFailed(
        f"invalid constraint {index}: {problem}",
        code="invalid_constraint",
        details={"field": "constraints", "index": index},
    )
