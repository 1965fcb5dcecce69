"""The constraint report at scale, and what the check adds to a write.

    .venv/bin/python -m benchmarks.constraints_report               # 100k entities, 1M facts
    .venv/bin/python -m benchmarks.constraints_report --tiny        # seconds: a smoke test
    .venv/bin/python -m benchmarks.constraints_report --scale 0.2   # 20k entities, 200k facts

A context with the standard library (works_at, knows… and their constraints) and seven
predicates of its own carrying every other constraint type (single value and a date range
on birth_date, format and distinct values on employee_id, allowed values on blood_type,
symmetric spouse_of, mother_of with its inverse has_mother, date_of_death conflicting
with alive_status and requiring birth_date). Entities (nine people in ten, the rest
organisations) and facts are generated with ``INSERT … SELECT generate_series``, every
fact on a constrained predicate (the worst case: the report reads all of them) with a few
per cent breaking their rules.

Measured: the full report (``constraint_violations``: every constraint, counts and the
first page — what ``GET constraints/violations`` answers) median of ``--rounds``; the
check one write adds (``constraint_violations_for_write`` for one new fact, as
``facts_write_batch`` calls it) p50/p95 per predicate; and, side by side in the same run,
``fact_write`` of one attribute fact on a constrained predicate and on one without
constraints, p50/p95.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from typing import Any

from benchmarks.search_common import bench_database, latency_summary, machine_line, markdown_table

DATABASE = "md_bench_constraints"
# name → (kind, share of the facts, constraints)
OWN_PREDICATES: dict[str, tuple[str, float, list[dict[str, Any]]]] = {
    "birth_date": ("attribute", 0.15, [
        {"type": "single_value"},
        {"type": "range", "min": "1900-01-01", "max": "2030-12-31"},
    ]),
    "employee_id": ("attribute", 0.15, [
        {"type": "format", "pattern": r"E\d{6}"},
        {"type": "distinct_values", "status": "suggestion"},
    ]),
    "blood_type": ("attribute", 0.10, [
        {"type": "allowed_values", "values": ["A", "B", "AB", "O"]},
    ]),
    "spouse_of": ("relation", 0.10, [{"type": "symmetric"}]),
    "has_mother": ("relation", 0.05, []),
    "mother_of": ("relation", 0.05, [{"type": "inverse", "predicate": "has_mother"}]),
    "alive_status": ("attribute", 0.05, []),
    "date_of_death": ("attribute", 0.05, [
        {"type": "conflicts_with", "predicate": "alive_status"},
        {"type": "requires", "predicate": "birth_date"},
    ]),
}  # fmt: skip
LIBRARY_SHARE = {"works_at": 0.20, "knows": 0.10}

# The value (and object) expressions of each predicate's generated facts; ``s`` is the
# subject's offset among people, ``g`` the row number.
VALUES = {
    "birth_date": ("NULL", "(date '1890-01-01' + ((g * 13) %% 40000)::int)::text"),
    "employee_id": (
        "NULL",
        "CASE WHEN g %% 100 = 0 THEN 'X' || g WHEN g %% 200 = 1 THEN 'E000001' "
        "ELSE 'E' || lpad(g::text, 6, '0') END",
    ),
    "blood_type": ("NULL", "(ARRAY['A','B','AB','O','A','B','O','O','AB','Q'])[1 + g %% 10]"),
    "spouse_of": ("%(people_low)s + (s + 1) %% %(people)s", None),
    "has_mother": ("%(people_low)s + (s + 7) %% %(people)s", None),
    "mother_of": ("%(people_low)s + (s + 7) %% %(people)s", None),
    "alive_status": ("NULL", "'alive'"),
    "date_of_death": ("NULL", "(date '2000-01-01' + (g %% 5000)::int)::text"),
    "works_at": (
        "CASE WHEN g %% 50 = 0 THEN %(people_low)s + g %% %(people)s "
        "ELSE %(orgs_low)s + g %% %(orgs)s END",
        None,
    ),
    "knows": ("%(people_low)s + (s + 3) %% %(people)s", None),
}
# Subject offsets: spouses are stated both ways for most rows, mothers mostly have the
# inverse stated (has_mother from the child), deaths fall on people with a birth date.
SUBJECTS = {
    "spouse_of": "CASE WHEN g %% 2 = 0 OR g %% 41 = 0 THEN (g / 2 * 2) %% %(people)s "
    "ELSE (g / 2 * 2 + 1) %% %(people)s END",
    "has_mother": "(g * 1009 + 7) %% %(people)s",
    "mother_of": "(g * 1009) %% %(people)s",
    "date_of_death": "(g * 3) %% %(people)s",
    "alive_status": "(g * 5) %% %(people)s",
}


def generate(context_id: int, entities: int, facts: int) -> dict[str, Any]:
    from django.db import connection, transaction

    from memory.models import Predicate

    ids = dict(Predicate.objects.filter(context_id=context_id).values_list("name", "pk"))
    people = entities * 9 // 10
    orgs = entities - people
    started = time.perf_counter()
    with connection.cursor() as cursor, transaction.atomic():
        cursor.execute(
            """
            INSERT INTO memory_entity (context_id, scope, name, type, normalized_key, aliases,
                alias_keys, attributes, embedding_model, seeded, created_at, updated_at)
            SELECT %(ctx)s, 'org', 'Entity ' || g,
                   CASE WHEN g < %(people)s THEN 'person' ELSE 'organisation' END,
                   'entity ' || g, '{}', '{}', '{}', '', false, now(), now()
            FROM generate_series(0, %(n)s - 1) AS g
            """,
            {"ctx": context_id, "people": people, "n": entities},
        )
        cursor.execute("SELECT min(id) FROM memory_entity WHERE context_id = %s", [context_id])
        (low,) = cursor.fetchone()
        shares = {name: spec[1] for name, spec in OWN_PREDICATES.items()} | LIBRARY_SHARE
        for name, share in shares.items():
            obj, value = VALUES[name]
            subject = SUBJECTS.get(name, "(g * 7919) %% %(people)s")
            kind = "relation" if value is None else "attribute"
            value_sql = "NULL" if value is None else f"to_jsonb(({value})::text)"
            text_sql = "''" if value is None else value
            cursor.execute(
                f"""
                INSERT INTO memory_fact (context_id, scope, subject_id, predicate_id,
                    raw_predicate, kind, object_id, value, value_text, confidence, importance,
                    recorded_at, last_seen_at, observed_count, status, single_valued,
                    source_kind, source_ref)
                SELECT %(ctx)s, 'org', %(people_low)s + s, %(pred)s, %(name)s, %(kind)s,
                       {obj}, {value_sql}, {text_sql}, 0.9, 0.5, now(), now(), 1, 'current',
                       false, 'api', ''
                FROM (SELECT g, {subject} AS s
                      FROM generate_series(0::bigint, %(count)s - 1) AS g) AS rows
                """,  # noqa: S608 - the benchmark's own expressions; values are parameters
                {
                    "ctx": context_id, "people_low": low, "people": people,
                    "orgs_low": low + people, "orgs": orgs, "pred": ids[name], "name": name,
                    "kind": kind, "count": max(1, int(facts * share)),
                },
            )  # fmt: skip
        cursor.execute("ANALYZE memory_entity")
        cursor.execute("ANALYZE memory_fact")
    return {"people_low": low, "people": people, "load_s": time.perf_counter() - started}


def run(*, entities: int, facts: int, rounds: int, writes: int) -> dict[str, Any]:
    from django.db import connection, transaction

    from memory.domain.access import system_access
    from memory.models import Entity, Fact, Predicate
    from memory.selectors.constraints import (
        WrittenFact,
        constraint_violations,
        constraint_violations_for_write,
    )
    from memory.selectors.predicates import registry_index_for_write
    from memory.services.contexts import context_create
    from memory.services.facts.write import fact_write
    from memory.services.registry.predicates import predicate_register, predicate_update

    context = context_create(slug="bench-constraints", name="Constraints")
    access = system_access(context)
    for name, (kind, _, _) in OWN_PREDICATES.items():
        predicate_register(access=access, name=name, kind=kind)
    predicate_register(access=access, name="nickname", kind="attribute")  # no constraints
    for name, (_, _, rules) in OWN_PREDICATES.items():
        if rules:
            predicate = Predicate.objects.get(context=context, name=name)
            predicate_update(access=access, predicate=predicate, constraints=rules)
    data = generate(context.pk, entities, facts)
    stored = Fact.objects.filter(context=context).count()

    full_ms: list[float] = []
    report = None
    for _ in range(rounds):
        started = time.perf_counter()
        report = constraint_violations(access=access, limit=50)
        full_ms.append((time.perf_counter() - started) * 1000)
    assert report is not None

    rng = random.Random(5)
    people = list(
        Entity.objects.filter(context=context, type="person").values_list("pk", flat=True)[:5000]
    )
    registry = registry_index_for_write(context=context)
    checks: dict[str, list[float]] = {}
    for name in ("birth_date", "employee_id", "spouse_of", "works_at", "date_of_death"):
        predicate = registry.by_name[name]
        facts_of = list(
            Fact.objects.filter(
                context=context, predicate=predicate, subject_id__in=people
            ).values_list("pk", "subject_id")[:writes]
        )
        timings = []
        for fact_id, subject_id in facts_of:
            with connection.cursor():
                started = time.perf_counter()
                constraint_violations_for_write(
                    access=access,
                    # Types not known: every rule of the predicate is checked.
                    written=[WrittenFact(fact_id, subject_id, predicate, None, True, None)],
                    registry=registry.by_name.values(),
                )
                timings.append((time.perf_counter() - started) * 1000)
        checks[name] = timings

    write_ms: dict[str, list[float]] = {"constrained (birth_date)": [], "unconstrained": []}
    subjects = Entity.objects.filter(pk__in=rng.sample(people, min(len(people), writes * 2)))
    pool = list(subjects)
    for i in range(writes):
        for label, predicate_name in (
            ("constrained (birth_date)", "birth_date"),
            ("unconstrained", "nickname"),
        ):
            subject = pool[(2 * i + (label == "unconstrained")) % len(pool)]
            with transaction.atomic():
                started = time.perf_counter()
                fact_write(
                    access=access,
                    subject=subject,
                    predicate=predicate_name,
                    value=f"{1960 + i % 50}-0{1 + i % 9}-1{i % 9}",
                )
                write_ms[label].append((time.perf_counter() - started) * 1000)
                transaction.set_rollback(True)

    return {
        "machine": machine_line(),
        "entities": entities,
        "facts": stored,
        "load_s": data["load_s"],
        "violations": report.total,
        "counts": [c.__dict__ for c in report.counts],
        "full_report_ms": {"median": statistics.median(full_ms), "all": full_ms},
        "write_check_ms": {name: latency_summary(ms) for name, ms in checks.items()},
        "fact_write_ms": {label: latency_summary(ms) for label, ms in write_ms.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tiny", action="store_true", help="a few seconds, for CI")
    parser.add_argument("--entities", type=int, default=100_000)
    parser.add_argument("--facts", type=int, default=1_000_000)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply entities and facts")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--writes", type=int, default=200)
    args = parser.parse_args()
    if args.tiny:
        args.entities, args.facts, args.rounds, args.writes = 2_000, 20_000, 2, 20
    entities, facts = int(args.entities * args.scale), int(args.facts * args.scale)
    with bench_database(DATABASE):
        report = run(entities=entities, facts=facts, rounds=args.rounds, writes=args.writes)
    print(json.dumps(report, indent=1, default=float))
    rows: list[list[Any]] = [
        [f"full report ({report['facts']:,} facts, {report['violations']:,} violations)",
         f"{report['full_report_ms']['median']:.0f}", "—"],
    ]  # fmt: skip
    for name, summary in report["write_check_ms"].items():
        rows.append(
            [f"check a write adds: {name}", f"{summary['p50']:.2f}", f"{summary['p95']:.2f}"]
        )
    for label, summary in report["fact_write_ms"].items():
        rows.append([f"fact_write, {label}", f"{summary['p50']:.2f}", f"{summary['p95']:.2f}"])
    print(markdown_table(["measure (ms)", "p50 / median", "p95"], rows))


if __name__ == "__main__":
    main()
