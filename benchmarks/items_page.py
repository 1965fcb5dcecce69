"""Server time of the Items pages at 100k items, and the namespace tree's count with and
without the expiry in the scope index.

    .venv/bin/python -m benchmarks.items_page              # 100k items in 1,000 namespaces
    .venv/bin/python -m benchmarks.items_page --tiny       # seconds: a smoke test

The items (``INSERT … SELECT generate_series``, in a throwaway database) sit in three-label
namespaces — 20 teams of 50 users — each with a 384-dimensional vector and a JSON value,
as a store's items do; the table is vacuumed and analyzed as autovacuum leaves it. Each
page is requested through Django's test ``Client`` logged in as a curator, as
``benchmarks.dashboard_pages`` does (two warm-ups, then ``--repeat`` timed requests).
Then the tree's query alone, side by side: with the scope index that carries
``expires_at`` (an index-only scan) and with a scope index without it (the heap read).
Goal: every page p95 ≤ 150 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from benchmarks.dashboard_pages import clients, measure
from benchmarks.search_common import bench_database, latency_summary, machine_line, markdown_table

DATABASE = "md_bench_items_page"
SLUG = "bench-items"
GOAL_MS = 150.0
TEAMS = 20


def generate(context_id: int, items: int, users: int) -> float:
    """The items, vectors and all; returns the seconds it took."""
    from django.db import connection

    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO memory_item (context_id, namespace, scope, key, value, index, text,
                embedding, embedding_model, created_at, updated_at)
            SELECT %s, ARRAY['org', 'team' || (g %% %s), 'user' || (g %% %s)],
                'org/team' || (g %% %s) || '/user' || (g %% %s), 'note-' || g,
                jsonb_build_object('text', 'note number ' || g || ' of the weekly sync',
                                   'tags', jsonb_build_array('sync', 'notes'), 'n', g),
                '["text"]'::jsonb, 'note number ' || g || ' of the weekly sync',
                (SELECT array_agg(random() + 0 * x + 0 * g) FROM generate_series(1, 384) x)::vector,
                'bench',
                now(), now()
            FROM generate_series(1, %s) g
            """,
            [context_id, TEAMS, users, TEAMS, users, items],
        )
    connection.close()  # VACUUM runs outside a transaction, on a fresh connection
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE memory_item")
    return time.perf_counter() - started


TREE_SQL = (
    "SELECT scope, count(*) FROM memory_item WHERE context_id = %s "
    "AND (expires_at IS NULL OR expires_at > now()) GROUP BY scope ORDER BY scope LIMIT 2001"
)


def tree_query(context_id: int, repeat: int) -> dict[str, Any]:
    """The tree's count with the covering index, then with a scope index without the
    expiry (built for the comparison, and dropped with the database)."""
    from django.db import connection

    def timed() -> dict[str, Any]:
        ms = []
        with connection.cursor() as cursor:
            for _ in range(repeat + 2):
                started = time.perf_counter()
                cursor.execute(TREE_SQL, [context_id])
                cursor.fetchall()
                ms.append((time.perf_counter() - started) * 1000)
            cursor.execute("EXPLAIN " + TREE_SQL, [context_id])
            plan = " ".join(row[0].strip() for row in cursor.fetchall())
        return {**latency_summary(ms[2:]), "index_only": "Index Only Scan" in plan}

    with connection.cursor() as cursor:
        # An index-only scan skips only the heap pages the visibility map marks all-visible:
        # a transaction open elsewhere on the server keeps VACUUM from marking new rows.
        cursor.execute("SELECT relallvisible, relpages FROM pg_class WHERE relname = 'memory_item'")
        visible, pages = cursor.fetchone()
    covered = timed()
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX item_scope_live")
        cursor.execute(
            "CREATE INDEX item_scope_plain ON memory_item (context_id, scope varchar_pattern_ops)"
        )
        cursor.execute("ANALYZE memory_item")
    return {
        "all_visible_pages": f"{visible} of {pages}",
        "with_expiry": covered,
        "without_expiry": timed(),
    }


def run(*, items: int, users: int, repeat: int) -> dict[str, Any]:
    from memory.models import Item
    from memory.services.contexts import context_create

    context = context_create(slug=SLUG)
    seconds = generate(context.pk, items, users)
    curator = clients(context)["curator"]
    base = f"/c/{SLUG}/items/"
    one = Item.objects.filter(context=context).order_by("pk").values_list("pk", flat=True)[0]
    user = "namespace=org&namespace=team3&namespace=user3"
    pages = [
        ("tree", base),
        ("a team (its 50 users in the tree)", f"{base}?namespace=org&namespace=team3"),
        (f"a user's items ({items // users})", f"{base}?{user}"),
        ("a user's items, page 2", f"{base}?{user}&page=2"),
        ("an item", f"{base}{one}/"),
    ]
    results = []
    for label, path in pages:
        results.append(measure(label, curator, path, repeat))
        print(f"{label}: p50 {results[-1]['p50']:.1f} ms, p95 {results[-1]['p95']:.1f} ms",
              flush=True)  # fmt: skip
    return {
        "machine": machine_line(),
        "load_average": os.getloadavg(),
        "items": items,
        "namespaces": users,
        "generation_seconds": round(seconds, 1),
        "repeat": repeat,
        "pages": results,
        "tree_query": tree_query(context.pk, repeat),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tiny", action="store_true", help="a few seconds, for CI")
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--namespaces", type=int, default=1_000, help="users (leaf namespaces)")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--json", help="also write the report to this file")
    args = parser.parse_args()
    if args.tiny:
        args.items, args.namespaces, args.repeat = 2_000, 100, 3
    database = f"{DATABASE}_tiny" if args.tiny else DATABASE
    with bench_database(database):
        report = run(items=args.items, users=args.namespaces, repeat=args.repeat)
    print(json.dumps(report, indent=1, default=float))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=1, default=float)
    rows = [
        [p["page"], f"{p['p50']:.1f}", f"{p['p95']:.1f}", f"{p['cpu_p50']:.1f}",
         f"{p['query_ms']:.1f}", p["queries"], "met" if p["p95"] <= GOAL_MS else "**not met**"]
        for p in report["pages"]
    ]  # fmt: skip
    tree = report["tree_query"]
    rows += [
        [f"tree query alone, {name.replace('_', ' ')}{' (index-only)' if t['index_only'] else ''}",
         f"{t['p50']:.1f}", f"{t['p95']:.1f}", "", "", 1, ""]
        for name, t in tree.items()
        if isinstance(t, dict)
    ]  # fmt: skip
    load = ", ".join(f"{x:.2f}" for x in report["load_average"])
    print(
        f"\n{report['items']:,} items in {report['namespaces']:,} namespaces; heap pages "
        f"all-visible: {tree['all_visible_pages']}; load {load}"
    )
    print(
        markdown_table(
            ["page", "p50 ms", "p95 ms", "CPU p50 ms", "SQL ms", "queries", "≤ 150 ms"], rows
        )
    )


if __name__ == "__main__":
    main()
