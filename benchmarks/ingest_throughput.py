"""Ingest throughput in triples mode, against references measured in the same run.

    .venv/bin/python -m benchmarks.ingest_throughput            # the full run (minutes)
    .venv/bin/python -m benchmarks.ingest_throughput --tiny     # seconds: a smoke test

1. Bulk triples, embeddings excluded: turns of ``--facts-per-turn`` facts go through
   ``run_create`` + ``run_execute`` (what ``POST memories`` with ``wait`` and ``manage.py
   ingest`` run: validation, normalization, resolution, the batched fact writer, search
   postings, usage triggers, the run record and log line). Entity vectors are left to
   the task worker (not running here), as in production; the duplicate re-estimates the
   runs queue are run after each run as the worker would, off the clock, and reported
   apart. Reference: batched plain
   ``INSERT``s (1,000 rows per statement) of the same fact rows into the same table.
2. Small turns (20 facts each), the same way: per-run overhead made visible.
3. With local embeddings: every new entity is embedded inline by the resolution tier
   (the context holds embedded entities of each type, so the tier is active). Reference:
   the embedder alone (``embed_texts``) on the same texts, in sentences/s.

Everything runs in a throwaway database (see search_common); medians over ``--repeat``.
Bulk and small turns also print where a run's time goes (``Breakdown``): each stage's
share from the runs' stage clock, the statements per run and the heaviest of them, and
for bulk p95/p50 of the identical turns.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import re
import statistics
import time
from collections import defaultdict
from typing import Any

from benchmarks.search_common import (
    bench_database,
    machine_line,
    markdown_table,
    percentile,
    queued_refits_run,
)

TYPES = ["person", "organisation", "project", "product", "topic", "location"]
REGISTERED = ["works_at", "reports_to", "located_in", "is_member_of", "part_of", "manages",
              "owns", "depends_on", "knows", "works_with", "colleague_of", "attended"]  # fmt: skip
NEW = [f"relates_{i}" for i in range(8)]
ATTRIBUTES = ["current_title", "decision_made", *(f"attr_{i}" for i in range(10))]
VERBS = [f"did_{i}" for i in range(10)]


SYLLABLES = ["ka", "lo", "mir", "ven", "tas", "dro", "pel", "qui", "zan", "bor",
             "eth", "fin", "gal", "hul", "jor", "nex", "ost", "rud", "sil", "tor"]  # fmt: skip


def pseudo_name(rng: random.Random) -> str:
    """Two made-up words ("Velqui Tasdro"): names an embedder does not find alike, unlike
    "Entity 1" / "Entity 2", which it rightly cannot tell apart."""
    words = ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))) for _ in range(2)]
    return " ".join(w.capitalize() for w in words)


# The standard library's type constraints on the generator's predicates
# (memory/domain/predicate_library.py, LIBRARY_CONSTRAINTS): the subject types a predicate
# takes, and the one type its object is drawn from.
SUBJECT_TYPES = {"works_at": ("person",), "current_title": ("person",)}
OBJECT_TYPE = {"works_at": "organisation", "reports_to": "person", "manages": "person",
               "colleague_of": "person", "knows": "person"}  # fmt: skip


def turn(
    rng: random.Random,
    *,
    facts: int,
    prefix: str,
    per_entity: int = 5,
    keep_constraints: bool = True,
) -> dict[str, Any]:
    """A turn of ``facts`` facts over ``facts / per_entity`` new entities: 50% relations,
    30% attributes, 20% actions. ``keep_constraints``: subjects and objects have the types
    the library's constraints ask for, as a well-behaved extractor's facts do (symmetric
    relations are still stated one way, so those suggestions warn); without it, types are
    drawn at random and most relations break a constraint, each fact then carrying its
    warnings into the run's record."""
    n_entities = max(2, facts // per_entity)
    drawn = {f"{pseudo_name(rng)} {prefix}" for _ in range(n_entities)}
    entities = [{"name": n, "type": TYPES[i % len(TYPES)]} for i, n in enumerate(sorted(drawn))]
    n_entities = len(entities)
    names = [e["name"] for e in entities]
    type_of = {e["name"]: e["type"] for e in entities}
    of_type: dict[str, list[str]] = defaultdict(list)
    for e in entities:
        of_type[e["type"]].append(e["name"])

    def fits(predicate: str, subject: str) -> bool:
        allowed = SUBJECT_TYPES.get(predicate)
        return not keep_constraints or allowed is None or type_of[subject] in allowed

    def pick(choices: list[str], subject: str) -> str:
        while not fits(predicate := rng.choice(choices), subject):
            pass
        return predicate

    def target(predicate: str) -> str:
        wanted = OBJECT_TYPE.get(predicate) if keep_constraints else None
        return rng.choice(of_type[wanted] if wanted and of_type[wanted] else names)

    relations, attributes, actions = [], [], []
    for i in range(facts):
        subject = names[i % n_entities]
        kind = i % 10
        if kind < 5:
            predicate = pick(REGISTERED + NEW, subject)
            relations.append(
                {"subject": subject, "predicate": predicate, "object": target(predicate),
                 "confidence": 0.9}
            )  # fmt: skip
        elif kind < 8:
            key = pick(ATTRIBUTES, subject)
            attributes.append({"subject": subject, "key": key, "value": f"value {i}"})
        else:
            actions.append(
                {"subject": subject, "verb": rng.choice(VERBS), "object": rng.choice(names)}
            )
    return {
        "entities": entities,
        "relations": relations,
        "attributes": attributes,
        "actions": actions,
    }


class Breakdown:
    """Where the runs' time went: each run's stage clock (``Run.timings``, stages counted
    exclusive of those nested in them; "outside" is the rest of ``run_execute``'s wall
    time: the claim, the commit, the run's record and log line) and every SQL statement
    the runs sent, grouped by its text (round trip: client and server)."""

    def __init__(self) -> None:
        self.runs = 0
        self.stage_ms: dict[str, list[float]] = defaultdict(list)
        self.statements: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])

    def add_run(self, timings: dict[str, float], wall_ms: float) -> None:
        self.runs += 1
        stages = {k.removesuffix("_ms"): v for k, v in timings.items() if k != "total_ms"}
        stages["other"] = timings.get("total_ms", wall_ms) - sum(stages.values())
        stages["outside"] = wall_ms - timings.get("total_ms", wall_ms)
        for name, ms in stages.items():
            self.stage_ms[name].append(ms)

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        began = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            shape = re.sub(r"\d+", "N", " ".join(sql.split()))[:90]
            entry = self.statements[shape]
            entry[0] += 1
            entry[1] += (time.perf_counter() - began) * 1000

    def report(self, top: int = 12) -> dict[str, Any]:
        runs = max(self.runs, 1)
        total = sum(sum(v) for v in self.stage_ms.values()) or 1.0
        stages = {
            name: {
                "ms_per_run": round(sum(values) / runs, 2),
                "share": round(sum(values) / total, 3),
            }
            for name, values in sorted(self.stage_ms.items(), key=lambda kv: -sum(kv[1]))
        }
        heaviest = sorted(self.statements.items(), key=lambda kv: -kv[1][1])[:top]
        return {
            "stages": stages,
            "statements_per_run": round(sum(c for c, _ in self.statements.values()) / runs, 1),
            "sql_ms_per_run": round(sum(ms for _, ms in self.statements.values()) / runs, 2),
            "heaviest_statements": [
                {"sql": shape, "per_run": round(c / runs, 2), "ms_per_run": round(ms / runs, 2)}
                for shape, (c, ms) in heaviest
            ],
        }


def ingest_turns(
    access: Any,
    turns: list[dict[str, Any]],
    scope: str,
    breakdown: Breakdown | None = None,
    refits: list[float] | None = None,
) -> tuple[float, int, list[float]]:
    """Seconds to ingest ``turns`` one run each, the number of facts written, and each
    run's seconds. The duplicate re-estimates the runs queue are run after each run, as
    the task worker would, off the clock; their seconds go to ``refits``."""
    from django.db import connection

    from memory.models import RunOutcome
    from memory.services.ingest.run import run_create, run_execute

    written_ok = (RunOutcome.SUCCEEDED, RunOutcome.SUCCEEDED_WITH_WARNINGS)

    written = 0
    each: list[float] = []
    off_the_clock = 0.0
    tracer = connection.execute_wrapper(breakdown) if breakdown else contextlib.nullcontext()
    started = time.perf_counter()
    with tracer:
        for triples in turns:
            began = time.perf_counter()
            run = run_create(access=access, text="", scope=scope, infer="triples", triples=triples)
            executed = time.perf_counter()
            run = run_execute(run_id=run.pk)
            each.append(time.perf_counter() - began)
            # Constraints of the standard predicates the turns break (a symmetric relation
            # stated one way; with --break-constraints, random types): warnings, nothing
            # refused.
            assert run.outcome in written_ok and not run.summary["unresolved"], run.error
            written += run.summary["facts_created"] + run.summary["facts_reobserved"]
            if breakdown is not None:
                breakdown.add_run(run.timings, (time.perf_counter() - executed) * 1000)
            refit_seconds = queued_refits_run()
            off_the_clock += refit_seconds
            if refit_seconds and refits is not None:
                refits.append(refit_seconds)
    return time.perf_counter() - started - off_the_clock, written, each


def plain_inserts(context_id: int, scope: str, target_scope: str) -> tuple[float, int]:
    """Seconds to INSERT the fact rows of ``scope`` again (under ``target_scope``), 1,000
    rows per statement, in one transaction: the reference for bulk ingest."""
    from django.db import connection, models, transaction

    from memory.models import Fact

    # Every column but the id, as the fact writer fills them (the trust gate's included).
    fields = [f for f in Fact._meta.concrete_fields if not f.primary_key]
    columns = [str(f.column) for f in fields]
    json_at = [i for i, f in enumerate(fields) if isinstance(f, models.JSONField)]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {', '.join(columns)} FROM memory_fact "  # noqa: S608  (model's columns)
            "WHERE context_id = %s AND scope = %s",
            [context_id, scope],
        )
        rows = [list(r) for r in cursor.fetchall()]
    scope_at = columns.index("scope")
    for row in rows:
        row[scope_at] = target_scope
        for i in json_at:  # jsonb comes back as its text; a decoded value is encoded again
            if row[i] is not None and not isinstance(row[i], str):
                row[i] = json.dumps(row[i])
    placeholders = "(" + ", ".join(["%s"] * len(columns)) + ")"
    started = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        for start in range(0, len(rows), 1000):
            batch = rows[start : start + 1000]
            cursor.execute(
                f"INSERT INTO memory_fact ({', '.join(columns)}) VALUES "  # noqa: S608
                + ", ".join([placeholders] * len(batch)),
                [v for row in batch for v in row],
            )
    return time.perf_counter() - started, len(rows)


def bulk(access: Any, args: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    ingest_rates, insert_rates, postings_rates = [], [], []
    turn_seconds: list[float] = []
    refits: list[float] = []
    breakdown = Breakdown()
    keep = not args.break_constraints
    for rep in range(args.repeat):
        scope = f"bench/bulk/{rep}"
        turns = [
            turn(rng, facts=args.facts_per_turn, prefix=f"B{rep}T{t}", keep_constraints=keep)
            for t in range(args.turns)
        ]
        seconds, written, each = ingest_turns(access, turns, scope, breakdown, refits)
        turn_seconds += each
        ingest_rates.append(written / seconds)
        ref_seconds, ref_rows = plain_inserts(access.context.pk, scope, f"bench/reference/{rep}")
        insert_rates.append(ref_rows / ref_seconds)
        postings_rates.append(search_postings_rate(access.context.pk, scope))
    ingest, insert = statistics.median(ingest_rates), statistics.median(insert_rates)
    postings = statistics.median(postings_rates)
    return {
        "turns": args.turns,
        "facts_per_turn": args.facts_per_turn,
        "ingest_facts_per_s": ingest,
        "plain_insert_facts_per_s": insert,
        "ratio": ingest / insert,
        # The search module's BM25 postings for facts, which every fact write refreshes in
        # its transaction: measured alone through its public facts_index().
        "search_postings_facts_per_s": postings,
        "search_postings_share_of_ingest": ingest / postings,
        # Identical turns (same shape, new entities each): how far apart their times are.
        "turn_s": {
            "p50": statistics.median(turn_seconds),
            "p95": percentile(turn_seconds, 0.95),
            "p95_over_p50": percentile(turn_seconds, 0.95) / statistics.median(turn_seconds),
            "each": [round(x, 3) for x in turn_seconds],
        },
        # The worker's duplicate re-estimates the turns queued (not in the figures above).
        "worker_refits_s": [round(x, 3) for x in refits],
        "runs": {"ingest": ingest_rates, "insert": insert_rates, "postings": postings_rates},
        "breakdown": breakdown.report(),
    }


def search_postings_rate(context_id: int, scope: str) -> float:
    """facts/s of ``facts_index`` alone on the facts just ingested (rolled back)."""
    from django.db import transaction

    from memory.models import Fact
    from memory.search.indexing import facts_index

    ids = list(Fact.objects.filter(context_id=context_id, scope=scope).values_list("pk", flat=True))
    started = time.perf_counter()
    with transaction.atomic():
        facts_index(ids)
        transaction.set_rollback(True)
    return len(ids) / (time.perf_counter() - started)


def small(access: Any, args: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    rates, run_ms = [], []
    breakdown = Breakdown()
    for rep in range(args.repeat):
        turns = [
            turn(rng, facts=20, prefix=f"S{rep}T{t}", keep_constraints=not args.break_constraints)
            for t in range(args.small_turns)
        ]
        seconds, written, each = ingest_turns(access, turns, f"bench/small/{rep}", breakdown)
        rates.append(written / seconds)
        run_ms += [x * 1000 for x in each]
    return {
        "turns": args.small_turns,
        "facts_per_turn": 20,
        "ingest_facts_per_s": statistics.median(rates),
        # Per run: run_create (the accepted run's record) and run_execute, as a caller waits.
        "ms_per_run": statistics.median(run_ms),
        "p95_ms_per_run": percentile(run_ms, 0.95),
        "breakdown": breakdown.report(),
    }


def with_embeddings(access: Any, args: argparse.Namespace, rng: random.Random) -> dict[str, Any]:
    from memory.infra.embeddings import embed_texts
    from memory.services.entities.writes import entity_upsert
    from memory.services.vectors import vectors_compute

    # One embedded entity per type in the visible scopes: the similarity tier is active.
    seeds = [
        entity_upsert(access=access, name=f"Seed {t}", type=t, scope="bench").entity.pk
        for t in TYPES
    ]
    vectors_compute("entities", seeds)
    embed_texts(["warm up the model"])
    return {
        f"{per_entity}_facts_per_entity": _embedded_shape(access, args, rng, per_entity)
        for per_entity in (5, 1)
    }


def _embedded_shape(
    access: Any, args: argparse.Namespace, rng: random.Random, per_entity: int
) -> dict[str, Any]:
    from memory.infra.embeddings import embed_texts
    from memory.models import Entity
    from memory.search.texts import entity_embedding_text

    ingest_rates, embed_rates, fact_rates = [], [], []
    attached: list[int] = []
    for rep in range(args.repeat):
        scope = f"bench/embedded/{per_entity}/{rep}"
        turns = [
            turn(rng, facts=args.embed_facts_per_turn, prefix=f"E{per_entity}R{rep}T{t}",
                 per_entity=per_entity)
            for t in range(args.embed_turns)
        ]  # fmt: skip
        texts = [
            entity_embedding_text(Entity(name=e["name"], type=e["type"], aliases=[]))
            for t in turns
            for e in t["entities"]
        ]
        started = time.perf_counter()
        embed_texts(texts)
        embed_rates.append(len(texts) / (time.perf_counter() - started))
        seconds, written, _ = ingest_turns(access, turns, scope)
        created = Entity.objects.filter(scope=scope)
        assert created.filter(embedding__isnull=True).count() == 0  # all embedded inline
        # Every mention was embedded once, whether it then attached or created an entity.
        ingest_rates.append(len(texts) / seconds)
        fact_rates.append(written / seconds)
        attached.append(len(texts) - created.count())
    ingest, embed = statistics.median(ingest_rates), statistics.median(embed_rates)
    return {
        "turns": args.embed_turns,
        "facts_per_turn": args.embed_facts_per_turn,
        "mentions_per_turn": len(texts) // args.embed_turns,
        "ingest_mentions_per_s": ingest,
        "embedder_sentences_per_s": embed,
        "ratio": ingest / embed,
        "ingest_facts_per_s": statistics.median(fact_rates),
        "mentions_attached_by_similarity": attached,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tiny", action="store_true", help="a few seconds, for CI")
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--facts-per-turn", type=int, default=2_000)
    parser.add_argument("--small-turns", type=int, default=100)
    parser.add_argument("--embed-turns", type=int, default=3)
    parser.add_argument("--embed-facts-per-turn", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--parts", default="bulk,small,embedded", help="comma-separated: bulk, small, embedded"
    )
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    parser.add_argument(
        "--break-constraints",
        action="store_true",
        help="bulk and small turns with random types: most relations break a constraint",
    )
    args = parser.parse_args()
    if args.tiny:
        args.turns, args.facts_per_turn, args.small_turns = 2, 200, 5
        args.embed_turns, args.embed_facts_per_turn, args.repeat = 1, 50, 1
    rng = random.Random(7)
    with bench_database("md_bench_ingest", keep=args.keep):
        from memory.domain.access import system_access
        from memory.services.contexts import context_create

        access = system_access(context_create(slug="bench-ingest"))
        report: dict[str, Any] = {"machine": machine_line()}
        # Warm-up (not timed): imports, query plans, and the observed predicates of the
        # generator's vocabulary, which a real import also creates only once.
        ingest_turns(access, [turn(rng, facts=200, prefix="warm")], "bench/warm-up")
        parts = set(args.parts.split(","))
        if "bulk" in parts:
            report["bulk"] = bulk(access, args, rng)
        if "small" in parts:
            report["small"] = small(access, args, rng)
        if "embedded" in parts:
            report["embedded"] = with_embeddings(access, args, rng)
    print(json.dumps(report, indent=1, default=float))
    _print_tables(report)


def _print_tables(report: dict[str, Any]) -> None:
    rows: list[list[Any]] = []
    if "bulk" in report:
        b = report["bulk"]
        rows += [
            [f"bulk triples ({b['turns']} turns × {b['facts_per_turn']} facts), embeddings "
             "excluded", round(b["ingest_facts_per_s"]), round(b["plain_insert_facts_per_s"]),
             f"{b['ratio']:.2f}"],
            ["of which: search postings of the facts (facts_index alone)",
             round(b["search_postings_facts_per_s"]), "—",
             f"{b['search_postings_share_of_ingest']:.0%} of ingest time"],
            ["identical bulk turns: p50 / p95 s", f"{b['turn_s']['p50']:.2f}",
             f"{b['turn_s']['p95']:.2f}", f"p95/p50 {b['turn_s']['p95_over_p50']:.2f}"],
            ["the worker's duplicate re-estimates after them, s each (off the clock)",
             ", ".join(f"{x:.2f}" for x in b["worker_refits_s"]) or "none", "—", "—"],
        ]  # fmt: skip
    if "small" in report:
        s = report["small"]
        rows.append(
            [f"small turns ({s['turns']} × 20 facts), embeddings excluded",
             round(s["ingest_facts_per_s"]), "—",
             f"{s['ms_per_run']:.1f} ms/run p50, {s['p95_ms_per_run']:.1f} p95"]
        )  # fmt: skip
    for shape, e in report.get("embedded", {}).items():
        rows.append(
            [f"with local embeddings ({e['turns']} turns × {e['facts_per_turn']} facts, "
             f"{e['mentions_per_turn']} new entities each, {shape.replace('_', ' ')}): "
             "mentions/s vs the embedder's sentences/s",
             round(e["ingest_mentions_per_s"]), round(e["embedder_sentences_per_s"]),
             f"{e['ratio']:.2f} ({round(e['ingest_facts_per_s'])} facts/s)"]
        )  # fmt: skip
    print(markdown_table(["measure", "ingest", "reference", "ratio"], rows))
    for part in ("bulk", "small"):
        if part in report:
            _print_breakdown(part, report[part]["breakdown"])


def _print_breakdown(part: str, breakdown: dict[str, Any]) -> None:
    print(f"\n{part}: where a run's time goes (stage clock, ms per run and share)")
    print(
        markdown_table(
            ["stage", "ms/run", "share"],
            [[name, f"{v['ms_per_run']:.1f}", f"{v['share']:.0%}"]
             for name, v in breakdown["stages"].items()],
        )
    )  # fmt: skip
    print(
        f"\n{part}: {breakdown['statements_per_run']} statements per run, "
        f"{breakdown['sql_ms_per_run']:.1f} ms of round trips; the heaviest"
    )
    print(
        markdown_table(
            ["statement", "per run", "ms/run"],
            [[f"`{x['sql']}`", x["per_run"], f"{x['ms_per_run']:.2f}"]
             for x in breakdown["heaviest_statements"]],
        )
    )  # fmt: skip


if __name__ == "__main__":
    main()
