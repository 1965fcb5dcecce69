"""The SQL of the constraint report: one branch per (predicate, constraint), each a query
over the predicate's facts, and the page read over their union (``selectors.constraints``
assembles and runs them)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memory.kernel.errors import ValidationFailed
from memory.models import Predicate, PredicateKind


@dataclass(frozen=True)
class JudgedConstraint:
    """One (predicate, constraint) the statement checks."""

    predicate: Predicate
    constraint: dict[str, Any]


@dataclass(frozen=True)
class VisibleFacts:
    context_id: int
    sql: str
    params: list[Any]


def _facts_sql(
    predicate_id: int,
    visible: VisibleFacts,
    *,
    subjects: Sequence[int] | None = None,
    exceptions: Sequence[int] = (),
) -> tuple[str, list[Any]]:
    """The current trusted facts of one predicate the caller may read, as a derived table
    (the grants' WHERE names ``memory_fact`` itself, so it is not aliased inside)."""
    sql = (
        "(SELECT memory_fact.id, memory_fact.subject_id, memory_fact.object_id, "  # noqa: S608
        "memory_fact.value, memory_fact.value_text FROM memory_fact "
        "WHERE memory_fact.context_id = %s AND memory_fact.predicate_id = %s "
        "AND memory_fact.status = 'current' AND memory_fact.trust = 'trusted' "
        f"AND {visible.sql}"
    )
    params: list[Any] = [visible.context_id, predicate_id, *visible.params]
    if subjects is not None:
        sql += " AND memory_fact.subject_id = ANY(%s)"
        params.append(list(subjects))
    if exceptions:
        sql += " AND memory_fact.subject_id <> ALL(%s)"
        params.append(list(exceptions))
    return sql + ")", params


_HEAD = "SELECT %s::text AS pname, %s::text AS ctype, %s::text AS status, "


def constraint_branch_sql(
    item: JudgedConstraint,
    visible: VisibleFacts,
    subjects: Sequence[int] | None,
    others: dict[str, int],
) -> tuple[str, list[Any]]:
    """One (predicate, constraint) as a query of (pname, ctype, status, entity_id,
    other_id, fact_ids, detail)."""
    p, rule = item.predicate, item.constraint
    ctype = rule["type"]
    judged, judged_params = _facts_sql(
        p.pk, visible, subjects=subjects, exceptions=rule["exceptions"]
    )
    head_params: list[Any] = [p.name, ctype, rule["status"]]
    relation = p.kind == PredicateKind.RELATION
    value = "f.object_id" if relation else "f.value_text"
    per_subject = (
        "f.subject_id AS entity_id, NULL::bigint AS other_id, "
        "array_agg(f.id ORDER BY f.id) AS fact_ids"
    )
    if ctype == "distinct_values":
        return _distinct_branch(item, visible, subjects, relation)
    if ctype in ("inverse", "conflicts_with", "requires"):
        other_id = others.get(rule["predicate"], 0)
        other, other_params = _facts_sql(other_id, visible)
        if ctype == "conflicts_with":
            sql = (
                f"{_HEAD}f.subject_id AS entity_id, NULL::bigint AS other_id, "
                "array_agg(DISTINCT f.id) || array_agg(DISTINCT g.id) AS fact_ids, "
                "''::text AS detail "
                f"FROM {judged} f JOIN {other} g ON g.subject_id = f.subject_id "
                "GROUP BY f.subject_id"
            )
            return sql, [*head_params, *judged_params, *other_params]
        if ctype == "requires":
            sql = (
                f"{_HEAD}{per_subject}, ''::text AS detail FROM {judged} f "  # noqa: S608
                f"WHERE NOT EXISTS (SELECT 1 FROM {other} g WHERE g.subject_id = f.subject_id) "
                "GROUP BY f.subject_id"
            )
            return sql, [*head_params, *judged_params, *other_params]
        return _back_branch(head_params, judged, judged_params, other, other_params)
    if ctype == "symmetric":
        back, back_params = _facts_sql(p.pk, visible)
        return _back_branch(head_params, judged, judged_params, back, back_params)
    if ctype == "single_value":
        sql = (
            f"{_HEAD}{per_subject}, count(DISTINCT {value})::text AS detail FROM {judged} f "
            f"GROUP BY f.subject_id HAVING count(DISTINCT {value}) > 1"
        )
        return sql, [*head_params, *judged_params]
    where, detail, extra = _row_test(ctype, rule, relation)
    join = ""
    if ctype == "subject_type":
        join = "JOIN memory_entity e ON e.id = f.subject_id"
    elif ctype == "value_type":
        join = "JOIN memory_entity e ON e.id = f.object_id"
    sql = (
        f"{_HEAD}{per_subject}, min({detail}) AS detail FROM {judged} f {join} "
        f"WHERE {where} GROUP BY f.subject_id"
    )
    return sql, [*head_params, *judged_params, *extra]


def _back_branch(
    head_params: list[Any],
    judged: str,
    judged_params: list[Any],
    back: str,
    back_params: list[Any],
) -> tuple[str, list[Any]]:
    """symmetric and inverse: each relation needs the one stated back (o q s)."""
    sql = (
        f"{_HEAD}f.subject_id AS entity_id, NULL::bigint AS other_id, "  # noqa: S608
        "array_agg(f.id ORDER BY f.id) AS fact_ids, min(f.object_id)::text AS detail "
        f"FROM {judged} f WHERE f.object_id IS NOT NULL AND NOT EXISTS "
        f"(SELECT 1 FROM {back} g WHERE g.subject_id = f.object_id "
        "AND g.object_id = f.subject_id) GROUP BY f.subject_id"
    )
    return sql, [*head_params, *judged_params, *back_params]


def _distinct_branch(
    item: JudgedConstraint, visible: VisibleFacts, subjects: Sequence[int] | None, relation: bool
) -> tuple[str, list[Any]]:
    """Pairs of subjects sharing a value. Narrowed to some subjects (a write, an entity's
    report) their side is joined to every other subject, the pair put in id order."""
    p, rule = item.predicate, item.constraint
    exceptions = rule["exceptions"]
    a, a_params = _facts_sql(p.pk, visible, subjects=subjects, exceptions=exceptions)
    b, b_params = _facts_sql(p.pk, visible, exceptions=exceptions)
    # Attribute values are matched by hash first: the fact_value_hash index.
    same = (
        "b.object_id = a.object_id AND a.object_id IS NOT NULL"
        if relation
        else "md5(b.value_text) = md5(a.value_text) AND b.value_text = a.value_text "
        "AND a.value_text <> '' AND b.value_text <> ''"
    )
    detail = "min(a.object_id)::text" if relation else "min(a.value_text)"
    order = (
        "b.subject_id <> a.subject_id" if subjects is not None else ("b.subject_id > a.subject_id")
    )
    sql = (
        f"{_HEAD}least(a.subject_id, b.subject_id) AS entity_id, "
        "greatest(a.subject_id, b.subject_id) AS other_id, "
        "array_agg(DISTINCT a.id) || array_agg(DISTINCT b.id) AS fact_ids, "
        f"{detail} AS detail FROM {a} a JOIN {b} b ON {same} AND {order} "
        "GROUP BY least(a.subject_id, b.subject_id), greatest(a.subject_id, b.subject_id)"
    )
    return sql, [p.name, rule["type"], rule["status"], *a_params, *b_params]


def _row_test(ctype: str, rule: dict[str, Any], relation: bool) -> tuple[str, str, list[Any]]:
    """(WHERE for a violating fact, the detail it reports, parameters) of the
    constraints judged fact by fact."""
    if ctype == "format":
        return (
            "f.object_id IS NULL AND f.value_text !~ %s",
            "f.value_text",
            [f"^(?:{rule['pattern']})$"],
        )
    if ctype in ("subject_type", "value_type"):
        return "e.type <> ALL(%s)", "e.type::text", [list(rule["types"])]
    if ctype == "allowed_values":
        if relation:
            return (
                "f.object_id IS NOT NULL AND f.object_id <> ALL(%s)",
                "f.object_id::text",
                [list(rule["values"])],
            )
        return (
            "f.object_id IS NULL AND f.value IS NOT NULL AND NOT (f.value = ANY(%s::jsonb[]))",
            "f.value_text",
            [[json.dumps(v) for v in rule["values"]]],
        )
    if ctype == "range":
        return _range_test(rule)
    raise ValidationFailed(f"no row test for {ctype}")  # pragma: no cover


def _range_test(rule: dict[str, Any]) -> tuple[str, str, list[Any]]:
    """A value outside [min, max], or not a number (a date) at all: the RDF export types
    values the same way (a JSON number, a YYYY-MM-DD text), so SHACL agrees."""
    bounds = [b for b in (rule["min"], rule["max"]) if b is not None]
    typed_params: list[Any] = []
    if isinstance(bounds[0], str):
        typed = (
            "(CASE WHEN jsonb_typeof(f.value) = 'string' AND f.value_text ~ %s "
            "AND pg_input_is_valid(f.value_text, 'date') THEN f.value_text::date END)"
        )
        typed_params = [r"^\d{4}-\d{2}-\d{2}$"]
        cast = "::date"
    else:
        typed = "(CASE WHEN jsonb_typeof(f.value) = 'number' THEN f.value::numeric END)"
        cast = "::numeric"
    tests: list[str] = []
    params: list[Any] = []
    for operator, bound in ((">=", rule["min"]), ("<=", rule["max"])):
        if bound is not None:
            tests.append(f"{typed} {operator} %s{cast}")
            params += [*typed_params, bound]
    where = f"f.object_id IS NULL AND NOT coalesce({' AND '.join(tests)}, FALSE)"
    return where, "f.value_text", params


def violations_page_sql(where: str) -> str:
    return f"""
        SELECT v.pname, v.ctype, v.status, v.entity_id, v.other_id,
               coalesce(v.other_id, 0) AS other_key, v.fact_ids, v.detail,
               e.name AS entity_name, e.type AS entity_type,
               o.name AS other_name, o.type AS other_type
        FROM (SELECT * FROM v {where}
              ORDER BY v.pname, v.ctype, v.entity_id, coalesce(v.other_id, 0) LIMIT %s) v
        JOIN memory_entity e ON e.id = v.entity_id
        LEFT JOIN memory_entity o ON o.id = v.other_id
    """  # noqa: S608 - fragments built here, values are parameters
