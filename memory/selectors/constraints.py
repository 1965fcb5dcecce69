"""The constraint report: which facts break the constraints of their predicates.

Computed on read, set-based: one SQL statement whose branches are one query per
(predicate, constraint), each over the predicate's facts through the fact_predicate
index (docs/decisions: "the constraint report is computed on read"). Nothing is stored,
so a retraction, a correction, a merge or a new exception clears a violation the moment
it commits; there is no second copy of the facts to keep in step.

What is judged: current, trusted facts the caller may read (the facts agents are told).
One row per violating subject, or per violating pair of subjects for ``distinct_values``.
A write asks the same statement, narrowed to the subjects it wrote
(``constraint_violations_for_write``): the warning it answers is the report's own row.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection

from memory.domain.access import ContextAccess
from memory.domain.constraints import CONSTRAINT_TYPES
from memory.kernel.errors import ValidationFailed
from memory.kernel.scopes import Grants
from memory.models import Fact, Predicate, PredicateStatus
from memory.search.sql import q_where_sql
from memory.selectors.constraints_sql import (
    JudgedConstraint,
    VisibleFacts,
    constraint_branch_sql,
    violations_page_sql,
)

MAX_PAGE = 500


@dataclass(frozen=True)
class ViolationEntity:
    id: int
    name: str
    type: str


@dataclass(frozen=True)
class Violation:
    predicate: str
    constraint: str
    status: str
    entity: ViolationEntity
    other_entity: ViolationEntity | None
    fact_ids: list[int]
    message: str


def violation_as_dict(v: Violation) -> dict[str, Any]:
    """``asdict(v)`` without its deep copy: what an answer shows of a violation."""
    other = v.other_entity
    return {
        "predicate": v.predicate,
        "constraint": v.constraint,
        "status": v.status,
        "entity": vars(v.entity).copy(),
        "other_entity": vars(other).copy() if other else None,
        "fact_ids": list(v.fact_ids),
        "message": v.message,
    }


@dataclass(frozen=True)
class ViolationCount:
    predicate: str
    constraint: str
    status: str
    count: int


@dataclass(frozen=True)
class ViolationReport:
    results: list[Violation]
    counts: list[ViolationCount]
    total: int
    next_cursor: str | None


def constraint_violations(
    *,
    access: ContextAccess,
    predicate: Predicate | None = None,
    constraint: str | None = None,
    status: str | None = None,
    entity: int | None = None,
    scope: str | None = None,
    after: str | None = None,
    limit: int = 50,
) -> ViolationReport:
    """The report under the caller's grants, ordered by predicate, constraint and entity;
    ``after`` is the ``next_cursor`` of the page before (keyset paging). ``counts`` and
    ``total`` cover every row the filters keep, not only the page."""
    if constraint is not None and constraint not in CONSTRAINT_TYPES:
        raise ValidationFailed(f"no constraint type {constraint!r}", code="invalid_constraint")
    judged = _judged(_constrained(access, predicate), constraint=constraint, status=status)
    cursor_key = _cursor_decode(after) if after else None
    limit = max(1, min(limit, MAX_PAGE))
    if not judged:
        return ViolationReport(results=[], counts=[], total=0, next_cursor=None)
    visible = _visible(access, scope)
    subjects = [entity] if entity is not None else None
    union, params = _union(judged, visible, subjects=subjects)
    key = "(v.pname, v.ctype, v.entity_id, coalesce(v.other_id, 0))"
    page_where = f"WHERE {key} > (%s, %s, %s, %s)" if cursor_key else ""
    entity_where = "WHERE u.entity_id = %s OR u.other_id = %s" if entity is not None else ""
    sql = f"""
        WITH v AS MATERIALIZED (SELECT * FROM ({union}) u {entity_where})
        SELECT
          (SELECT coalesce(json_agg(c ORDER BY c.pname, c.ctype), '[]')
             FROM (SELECT pname, ctype, status, count(*) AS n FROM v GROUP BY 1, 2, 3) c),
          (SELECT coalesce(json_agg(r ORDER BY r.pname, r.ctype, r.entity_id, r.other_key), '[]')
             FROM ({violations_page_sql(page_where)}) r)
    """  # noqa: S608 - fragments built here, values are parameters
    all_params = [*params]
    if entity is not None:
        all_params += [entity, entity]
    if cursor_key:
        all_params += list(cursor_key)
    all_params.append(limit + 1)
    with connection.cursor() as cursor:
        cursor.execute(sql, all_params)
        counts_json, rows_json = cursor.fetchone()
    counts = [
        ViolationCount(c["pname"], c["ctype"], c["status"], c["n"]) for c in _json(counts_json)
    ]
    rows = _json(rows_json)
    by_key = {(j.predicate.name, j.constraint["type"]): j for j in judged}
    results = [_violation(row, by_key) for row in rows[:limit]]
    next_cursor = None
    if len(rows) > limit:
        last = rows[limit - 1]
        next_cursor = _cursor_encode(
            [last["pname"], last["ctype"], last["entity_id"], last["other_key"]]
        )
    return ViolationReport(
        results=results,
        counts=counts,
        total=sum(c.count for c in counts),
        next_cursor=next_cursor,
    )


@dataclass(frozen=True)
class WrittenFact:
    """A current, trusted fact a write made (the report counts no other), with the types
    of its ends as the writer read them: ``None`` when not known (an end a merge redirected
    while the write waited for its lock)."""

    id: int
    subject_id: int
    predicate: Predicate
    subject_type: str | None
    has_object: bool
    object_type: str | None


def constraint_violations_for_write(
    *,
    access: ContextAccess,
    written: Sequence[WrittenFact],
    registry: Iterable[Predicate],
) -> dict[int, list[Violation]]:
    """The report's rows that hold a fact just written, by fact id: what the write's
    answer warns about. ``registry`` is the predicates of the context (the write's
    registry load), for the rules of other predicates a new fact can break
    (``conflicts_with`` names it). A type rule none of the new facts breaks by the types
    the writer read is not checked; no statement at all when no rule is left."""
    by_name: dict[str, list[WrittenFact]] = {}
    for w in written:
        by_name.setdefault(w.predicate.name, []).append(w)
    judged: list[JudgedConstraint] = []
    seen: set[tuple[str, str]] = set()
    for candidate in registry:
        if candidate.status != PredicateStatus.REGISTERED or not candidate.constraints:
            continue
        for rule in candidate.constraints:
            mine = by_name.get(candidate.name, [])
            concerns = (bool(mine) and _may_break(rule, mine)) or (
                rule["type"] == "conflicts_with" and rule["predicate"] in by_name
            )
            if concerns and (candidate.name, rule["type"]) not in seen:
                seen.add((candidate.name, rule["type"]))
                judged.append(JudgedConstraint(candidate, rule))
    if not judged:
        return {}
    fact_ids = [w.id for w in written]
    subjects = sorted({w.subject_id for w in written})
    union, params = _union(judged, _visible(access, None), subjects=subjects)
    sql = f"""
        WITH v AS MATERIALIZED (SELECT * FROM ({union}) u WHERE u.fact_ids && %s::bigint[])
        SELECT coalesce(json_agg(r), '[]') FROM ({violations_page_sql("")}) r
    """  # noqa: S608 - fragments built here, values are parameters
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, fact_ids, len(judged) * len(subjects) * 2 + 10])
        (rows_json,) = cursor.fetchone()
    by_key = {(j.predicate.name, j.constraint["type"]): j for j in judged}
    wanted = set(fact_ids)
    out: dict[int, list[Violation]] = {}
    for row in _json(rows_json):
        violation = _violation(row, by_key)
        for fact_id in wanted.intersection(violation.fact_ids):
            out.setdefault(fact_id, []).append(violation)
    return out


def _may_break(rule: dict[str, Any], facts: list[WrittenFact]) -> bool:
    """Whether one of a predicate's new ``facts`` may break ``rule``: a type rule only
    when an end's type is outside the rule's types (or not known), as its branch tests
    it; every other rule reads facts beyond the write, so it is always checked."""
    ctype = rule["type"]
    if ctype not in ("subject_type", "value_type"):
        return True
    exceptions, types = set(rule["exceptions"]), set(rule["types"])
    for w in facts:
        if w.subject_id in exceptions or (ctype == "value_type" and not w.has_object):
            continue
        end = w.subject_type if ctype == "subject_type" else w.object_type
        if end is None or end not in types:
            return True
    return False


# --- the statement --------------------------------------------------------------------


def _constrained(access: ContextAccess, predicate: Predicate | None) -> list[Predicate]:
    rows = Predicate.objects.filter(
        context=access.context, status=PredicateStatus.REGISTERED
    ).exclude(constraints=[])
    if predicate is not None:
        rows = rows.filter(pk=predicate.pk)
    return list(rows.order_by("name"))


def _judged(
    predicates: list[Predicate], *, constraint: str | None, status: str | None
) -> list[JudgedConstraint]:
    return [
        JudgedConstraint(p, rule)
        for p in predicates
        for rule in p.constraints
        if (constraint is None or rule["type"] == constraint)
        and (status is None or rule["status"] == status)
    ]


def _visible(access: ContextAccess, scope: str | None) -> VisibleFacts:
    grants: Grants = access.grants.narrowed([scope]) if scope else access.grants
    sql, params = q_where_sql(Fact, grants.read_q())
    return VisibleFacts(access.context.pk, sql, params)


def _union(
    judged: list[JudgedConstraint], visible: VisibleFacts, *, subjects: Sequence[int] | None
) -> tuple[str, list[Any]]:
    parts: list[str] = []
    params: list[Any] = []
    others = _named_ids(judged)
    for item in judged:
        sql, branch_params = constraint_branch_sql(item, visible, subjects, others)
        parts.append(sql)
        params += branch_params
    return " UNION ALL ".join(parts), params


def _named_ids(judged: list[JudgedConstraint]) -> dict[str, int]:
    """The ids of the predicates rules name (inverse, conflicts_with, requires)."""
    names = {j.constraint["predicate"] for j in judged if "predicate" in j.constraint}
    if not names:
        return {}
    context_id = judged[0].predicate.context_id
    return dict(
        Predicate.objects.filter(context_id=context_id, name__in=names).values_list("name", "pk")
    )


# --- rows to violations ---------------------------------------------------------------


def _json(value: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(value) if isinstance(value, str) else value
    return rows


def _violation(row: dict[str, Any], by_key: dict[tuple[str, str], JudgedConstraint]) -> Violation:
    item = by_key[(row["pname"], row["ctype"])]
    entity = ViolationEntity(row["entity_id"], row["entity_name"], row["entity_type"])
    other = (
        ViolationEntity(row["other_id"], row["other_name"], row["other_type"])
        if row["other_id"] is not None
        else None
    )
    return Violation(
        predicate=row["pname"],
        constraint=row["ctype"],
        status=row["status"],
        entity=entity,
        other_entity=other,
        fact_ids=sorted(set(row["fact_ids"])),
        message=constraint_message(item.constraint, row["pname"], entity, other, row["detail"]),
    )


def constraint_message(
    rule: dict[str, Any],
    predicate: str,
    entity: ViolationEntity,
    other: ViolationEntity | None,
    detail: str | None,
) -> str:
    """What a curator reads: the rule, and what about this entity breaks it."""
    name, ctype, shown = entity.name, rule["type"], (detail or "")[:80]
    if ctype == "single_value":
        return f"{name} has {shown} values of {predicate}, which takes a single value"
    if ctype == "format":
        return f"{name}'s {predicate} {shown!r} does not match {rule['pattern']!r}"
    if ctype == "subject_type":
        return f"{name} is {shown}; {predicate} applies to {' or '.join(rule['types'])}"
    if ctype == "value_type":
        return (
            f"{name} {predicate} an entity of type {shown}; it should be "
            f"{' or '.join(rule['types'])}"
        )
    if ctype == "allowed_values":
        return f"{name}'s {predicate} {shown!r} is not one of the allowed values"
    if ctype == "range":
        low = rule["min"] if rule["min"] is not None else "…"
        high = rule["max"] if rule["max"] is not None else "…"
        return f"{name}'s {predicate} {shown!r} is not within {low}–{high}"
    if ctype == "symmetric":
        return f"{name} {predicate} an entity that does not state {predicate} back"
    if ctype == "inverse":
        return f"{name} {predicate} an entity that does not state {rule['predicate']} back"
    if ctype == "distinct_values":
        other_name = other.name if other is not None else "another entity"
        return f"{name} and {other_name} share the {predicate} {shown!r}, which should be unique"
    if ctype == "conflicts_with":
        return f"{name} has {predicate} and {rule['predicate']}, which conflict"
    return f"{name} has {predicate} but no {rule['predicate']}, which it requires"


# --- the keyset cursor ----------------------------------------------------------------


def _cursor_encode(key: list[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode().rstrip("=")


def _cursor_decode(text: str) -> tuple[str, str, int, int]:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        pname, ctype, entity, other = json.loads(raw)
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
        raise ValidationFailed(
            "after is not a cursor this report gave", code="invalid_cursor"
        ) from None
    if not (
        isinstance(pname, str)
        and isinstance(ctype, str)
        and type(entity) is int
        and type(other) is int
    ):
        raise ValidationFailed("after is not a cursor this report gave", code="invalid_cursor")
    return pname, ctype, entity, other
