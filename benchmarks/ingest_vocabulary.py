"""Time to gather the prompt vocabulary for a context with 100k entities and 1M facts.

    .venv/bin/python -m benchmarks.ingest_vocabulary            # 100k entities, 1M facts
    .venv/bin/python -m benchmarks.ingest_vocabulary --tiny     # seconds: a smoke test

Data is generated with ``INSERT … SELECT generate_series`` into a throwaway database
(see search_common): entities in ``bench/org`` (80%) and 100 team scopes, facts over
330 predicates (relations, attribute keys, action verbs) with a skewed use count, 10% of
the attribute facts superseded, random 384-d entity vectors behind the HNSW index. The
usage triggers fill ``PredicateUsage`` as in production.

Measured around ``vocabulary_gather`` (what the prompt and ``GET vocabulary`` call) for a
write into ``bench/org/team/t5/user/u1`` (six visible scopes): without a turn, and with a
turn that names two old entities (name matches + embedding neighbours; the turn vector is
computed once, and the embedder's own time for it is reported beside). Reference in the
same run: the same four counts computed straight from the facts table.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from benchmarks.search_common import bench_database, latency_summary, machine_line, markdown_table

WRITE_SCOPE = "bench/org/team/t5/user/u1"
KINDS = {"relation": 150, "attribute": 100, "action": 80}


def generate(context_id: int, entities: int, facts: int) -> dict[str, Any]:
    """Predicates through the ORM; entities, vectors and facts with set-based SQL."""
    from django.db import connection, transaction

    from memory.infra.embeddings import embedding_model_id
    from memory.models import Predicate, PredicateStatus

    Predicate.objects.bulk_create(
        Predicate(
            context_id=context_id, name=f"{kind}_{i}", kind=kind, status=PredicateStatus.OBSERVED
        )
        for kind, n in KINDS.items()
        for i in range(n)
    )
    ids = {
        kind: list(
            Predicate.objects.filter(context_id=context_id, name__startswith=f"{kind}_")
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        for kind in KINDS
    }
    timings = {}
    with connection.cursor() as cursor:
        started = time.perf_counter()
        # The HNSW index is rebuilt once after the load rather than grown row by row.
        cursor.execute("DROP INDEX entity_embedding_hnsw")
        with transaction.atomic():
            cursor.execute(
                """
                INSERT INTO memory_entity (context_id, scope, name, type, normalized_key, aliases,
                    alias_keys, attributes, embedding, embedding_model, seeded, created_at,
                    updated_at)
                SELECT %(ctx)s,
                       CASE WHEN g %% 5 = 0 THEN 'bench/org/team/t' || (g %% 100)
                            ELSE 'bench/org' END,
                       'Entity ' || g,
                       (ARRAY['person','organisation','project','location','topic','product',
                              'policy','concept','event','other'])[1 + g %% 10],
                       'entity ' || g, '{}', '{}', '{}',
                       (SELECT array_agg(random() - 0.5)::vector(384) FROM generate_series(1, 384)
                        WHERE g > 0),
                       %(model)s, false,
                       now() - make_interval(mins => g),
                       now() - make_interval(mins => g)
                FROM generate_series(0, %(n)s - 1) AS g
                """,
                # Tagged with the configured model: the gatherer compares only like vectors.
                {"ctx": context_id, "n": entities, "model": embedding_model_id()},
            )
        timings["entities_s"] = time.perf_counter() - started
        started = time.perf_counter()
        cursor.execute(
            "CREATE INDEX entity_embedding_hnsw ON memory_entity USING hnsw "
            "(embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
        )
        timings["hnsw_s"] = time.perf_counter() - started
        cursor.execute(
            "SELECT min(id), max(id) FROM memory_entity WHERE context_id = %s", [context_id]
        )
        low, high = cursor.fetchone()
        assert high - low + 1 == entities, "entity ids are not consecutive"
        started = time.perf_counter()
        with transaction.atomic():
            cursor.execute(
                """
                INSERT INTO memory_fact (context_id, scope, subject_id, predicate_id, raw_predicate,
                    kind, object_id, value, value_text, confidence, importance, valid_from,
                    valid_until, recorded_at, last_seen_at, observed_count, status,
                    status_changed_at, supersedes_id, single_valued, source_kind, source_ref,
                    run_id, document_id, created_by_id)
                SELECT %(ctx)s,
                       CASE WHEN s %% 5 = 0 THEN 'bench/org/team/t' || (s %% 100)
                            ELSE 'bench/org' END,
                       %(low)s + s, p, 'raw', k,
                       CASE WHEN k = 'relation' THEN %(low)s + (g * 7919) %% %(n)s END,
                       CASE WHEN k = 'attribute' THEN to_jsonb('value ' || g) END,
                       CASE WHEN k = 'attribute' THEN 'value ' || g ELSE '' END,
                       0.9, 0.5, NULL, NULL, seen, seen, 1,
                       CASE WHEN k = 'attribute' AND g %% 10 = 0 THEN 'superseded'
                            ELSE 'current' END,
                       NULL, NULL, false, 'api', '', NULL, NULL, NULL
                FROM (
                    SELECT g, (g * 104729) %% %(n)s AS s,
                           CASE WHEN g %% 10 < 5 THEN 'relation'
                                WHEN g %% 10 < 8 THEN 'attribute' ELSE 'action' END AS k,
                           now() - make_interval(secs => (g * 37) %% 31536000) AS seen,
                           floor(power(random(), 3) * 1000)::int AS r
                    FROM generate_series(0::bigint, %(facts)s - 1) AS g
                ) AS f,
                LATERAL (
                    SELECT (CASE f.k WHEN 'relation' THEN %(rel)s::bigint[]
                                     WHEN 'attribute' THEN %(attr)s::bigint[]
                                     ELSE %(act)s::bigint[] END)[1 + f.r %% (
                            CASE f.k WHEN 'relation' THEN %(nrel)s
                                     WHEN 'attribute' THEN %(nattr)s ELSE %(nact)s END)] AS p
                ) AS chosen
                """,
                {
                    "ctx": context_id, "low": low, "n": entities, "facts": facts,
                    "rel": ids["relation"], "attr": ids["attribute"], "act": ids["action"],
                    "nrel": len(ids["relation"]), "nattr": len(ids["attribute"]),
                    "nact": len(ids["action"]),
                },
            )  # fmt: skip
        timings["facts_s"] = time.perf_counter() - started
        cursor.execute("ANALYZE memory_entity")
        cursor.execute("ANALYZE memory_fact")
        cursor.execute("ANALYZE memory_predicateusage")
    return {"first_entity_id": low, "timings": timings}


def naive_counts(context_id: int, scopes: list[str]) -> None:
    """The reference: the four lists' counts straight from memory_fact."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT kind, predicate_id, sum(observed_count) FILTER (WHERE status <> 'retracted'),
                   sum(observed_count) FILTER (WHERE status = 'current'), max(last_seen_at)
            FROM memory_fact WHERE context_id = %s AND scope = ANY(%s)
            GROUP BY kind, predicate_id
            """,
            [context_id, scopes],
        )
        cursor.fetchall()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tiny", action="store_true", help="a few seconds, for CI")
    parser.add_argument("--entities", type=int, default=100_000)
    parser.add_argument("--facts", type=int, default=1_000_000)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply entities and facts")
    parser.add_argument("--repeat", type=int, default=100)
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    parser.add_argument(
        "--reuse", action="store_true", help="measure again on a database kept with --keep"
    )
    args = parser.parse_args()
    if args.tiny:
        args.entities, args.facts, args.repeat = 2_000, 20_000, 10
    entities, facts = int(args.entities * args.scale), int(args.facts * args.scale)
    if args.reuse:
        _use_kept_database("md_bench_vocabulary")
        report = run(entities=entities, facts=facts, repeat=args.repeat, reuse=True)
    else:
        with bench_database("md_bench_vocabulary", keep=args.keep):
            report = run(entities=entities, facts=facts, repeat=args.repeat)
    print(json.dumps(report, indent=1, default=float))
    rows = [
        ["vocabulary_gather, no turn", f"{report['no_turn']['p50']:.1f}",
         f"{report['no_turn']['p95']:.1f}"],
        ["vocabulary_gather, with a turn (names + neighbours)", f"{report['with_turn']['p50']:.1f}",
         f"{report['with_turn']['p95']:.1f}"],
        ["the turn's embedding (local model), alone", f"{report['turn_embedding_ms']:.1f}", "—"],
        ["reference: counting the facts directly", f"{report['naive_counts']['p50']:.1f}",
         f"{report['naive_counts']['p95']:.1f}"],
    ]  # fmt: skip
    print(markdown_table(["measure (ms)", "p50", "p95"], rows))


def _use_kept_database(name: str) -> None:
    import os

    import django

    from benchmarks.search_common import _server_url, _with_database

    os.environ["DATABASE_URL"] = _with_database(_server_url(), name)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory.settings")
    django.setup()


def run(*, entities: int, facts: int, repeat: int, reuse: bool = False) -> dict[str, Any]:
    from memory.domain.access import system_access
    from memory.infra.embeddings import embed_texts
    from memory.models import Context, Entity
    from memory.selectors.vocabulary import scopes_visible_from, vocabulary_gather
    from memory.services.contexts import context_create
    from memory.services.registry.usage import vocabulary_usage_compact

    if reuse:
        context = Context.objects.get(slug="bench-vocabulary")
        generated: dict[str, Any] = {"timings": "reused"}
    else:
        context = context_create(slug="bench-vocabulary")
        generated = generate(context.pk, entities, facts)
    access = system_access(context)
    scopes = scopes_visible_from(scope=WRITE_SCOPE, grants=access.grants)
    vocabulary_usage_compact(context=context, scopes=scopes, force=True)
    old = Entity.objects.filter(context=context, scope="bench/org").order_by("updated_at")[:2]
    turn = f"Met {old[0].name} and {old[1].name} about the roadmap; follow up next week."
    embed_texts(["load the model"])
    started = time.perf_counter()
    vector = embed_texts([turn])[0]
    turn_embedding_ms = (time.perf_counter() - started) * 1000

    def gather(text: str = "") -> Any:
        return vocabulary_gather(
            context=context, scope=WRITE_SCOPE, grants=access.grants, text=text,
            embed=(lambda _t: vector) if text else None,
        )  # fmt: skip

    def times(fn: Any, n: int = repeat) -> list[float]:
        fn()  # warm plans and caches
        out = []
        for _ in range(n):
            began = time.perf_counter()
            fn()
            out.append((time.perf_counter() - began) * 1000)
        return out

    no_turn = latency_summary(times(gather))
    naive = latency_summary(times(lambda: naive_counts(context.pk, scopes), max(5, repeat // 10)))
    shown = gather(turn)
    assert shown.entities[0].name in {old[0].name, old[1].name}, "a named old entity comes first"
    plain = gather()
    return {
        "machine": machine_line(),
        "entities": entities,
        "facts": facts,
        "generation": generated["timings"],
        "lists": {
            "entities": len(plain.entities),
            "relation_labels": len(plain.relation_labels),
            "attribute_keys": len(plain.attribute_keys),
            "action_verbs": len(plain.action_verbs),
            "first_with_turn": [(e.name, e.why) for e in shown.entities[:4]],
        },
        "no_turn": no_turn,
        "with_turn": latency_summary(times(lambda: gather(turn))),
        "turn_embedding_ms": turn_embedding_ms,
        "naive_counts": naive,
        "ratio_naive_over_gather_p50": naive["p50"] / no_turn["p50"],
    }


if __name__ == "__main__":
    main()
