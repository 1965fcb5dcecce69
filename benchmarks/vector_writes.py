"""Ways to write new vectors into an HNSW-indexed table, side by side with the embedder.

    .venv/bin/python -m benchmarks.vector_writes                 # 5,000 rows there, 600 new
    .venv/bin/python -m benchmarks.vector_writes --tiny          # seconds: a smoke test

What ingest with local embeddings pays per new entity besides the model: writing its
vector, which the HNSW index must insert into its graph. Each option writes the same
real all-MiniLM vectors (made-up entity names) in batches of ``--batch`` (one ingest
turn's new entities) into a table of its own that already holds ``--existing`` rows,
and is compared with the embedder's own time for the same texts:

- ``insert`` — one ``INSERT … SELECT FROM unnest`` a batch (how an ingest run writes its
  new entities), under HNSW indexes of several (m, ef_construction), and under none;
- ``insert, then UPDATE`` — rows first without a vector, the vectors by one
  ``UPDATE … FROM unnest`` a batch (a deferred drain's bulk write);
- ``COPY`` — the batch through ``COPY … FROM STDIN``.

Each index's recall@10 against an exact scan (at ``hnsw.ef_search`` 40, pgvector's
default, and 100) is measured on the same table afterwards. Throwaway database.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from typing import Any

from benchmarks.search_common import bench_database, machine_line, markdown_table

# label → (m, ef_construction) of the table's HNSW index; None: no index.
INDEXES: dict[str, tuple[int, int] | None] = {
    "hnsw m16 ef64 (served)": (16, 64),
    "hnsw m16 ef32": (16, 32),
    "hnsw m8 ef32": (8, 32),
    "no vector index": None,
}
SYLLABLES = ["vel", "qui", "tas", "dro", "mar", "ken", "lo", "bri", "sa", "tor", "ni", "pha"]
TYPES = ["person", "organisation", "project", "product", "topic"]


def _names(rng: random.Random, n: int) -> list[str]:
    def word() -> str:
        return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).title()

    return [f"{word()} {word()} ({rng.choice(TYPES)})" for _ in range(n)]


def _literal(vector: list[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def _table(cursor: Any, name: str, index: tuple[int, int] | None, rows: list[str]) -> None:
    cursor.execute(f"DROP TABLE IF EXISTS {name}")
    cursor.execute(
        f"CREATE TABLE {name} (id bigserial PRIMARY KEY, scope text NOT NULL,"
        " embedding vector(384))"
    )
    if index is not None:
        m, ef = index
        cursor.execute(
            f"CREATE INDEX ON {name} USING hnsw (embedding vector_cosine_ops)"
            f" WITH (m = {m}, ef_construction = {ef})"
        )
    _insert(cursor, name, rows)


def _insert(cursor: Any, name: str, rows: list[str]) -> None:
    cursor.execute(
        f"INSERT INTO {name} (scope, embedding)"  # noqa: S608 - the benchmark's own table
        " SELECT 'bench', v::vector FROM unnest(%s::text[]) AS x(v)",
        [rows],
    )


def _insert_then_update(cursor: Any, name: str, rows: list[str]) -> None:
    cursor.execute(
        f"INSERT INTO {name} (scope) SELECT 'bench' FROM generate_series(1, %s)"  # noqa: S608
        " RETURNING id",
        [len(rows)],
    )
    ids = [row[0] for row in cursor.fetchall()]
    cursor.execute(
        f"UPDATE {name} AS t SET embedding = x.v::vector"  # noqa: S608
        " FROM unnest(%s::bigint[], %s::text[]) AS x(id, v) WHERE t.id = x.id",
        [ids, rows],
    )


def _copy(cursor: Any, name: str, rows: list[str]) -> None:
    with cursor.copy(f"COPY {name} (scope, embedding) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(("bench", row))


def _timed_batches(connection: Any, write: Any, name: str, batches: list[list[str]]) -> float:
    """Seconds to write every batch, each in its own transaction."""
    started = time.perf_counter()
    for batch in batches:
        with connection.transaction(), connection.cursor() as cursor:
            write(cursor, name, batch)
    return time.perf_counter() - started


def _recall(cursor: Any, name: str, queries: list[str], ef: int) -> float:
    hits = []
    for q in queries:
        cursor.execute("SELECT set_config('hnsw.ef_search', %s, false)", [str(ef)])
        cursor.execute(
            f"SELECT id FROM {name} ORDER BY embedding <=> %s::vector LIMIT 10",  # noqa: S608
            [q],
        )
        fast = {row[0] for row in cursor.fetchall()}
        cursor.execute(
            f"SELECT id FROM {name} ORDER BY (embedding <=> %s::vector) + 0 LIMIT 10",  # noqa: S608
            [q],
        )
        exact = {row[0] for row in cursor.fetchall()}
        hits.append(len(fast & exact) / 10)
    return statistics.fmean(hits)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--existing", type=int, default=5000)
    parser.add_argument("--rows", type=int, default=600)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--tiny", action="store_true", help="500 existing rows, 100 new")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    if args.tiny:
        args.existing, args.rows, args.batch = 500, 100, 50
    rng = random.Random(5)
    with bench_database("md_bench_vector_writes") as url:
        import psycopg
        from pgvector.psycopg import register_vector

        from memory.infra.embeddings import embed_texts

        embed_texts(["warm up the model"])
        existing = [_literal(v) for v in embed_texts(_names(rng, args.existing))]
        new_texts = _names(rng, args.rows)
        started = time.perf_counter()
        new = [_literal(v) for v in embed_texts(new_texts)]
        embed_s = time.perf_counter() - started
        batches = [new[i : i + args.batch] for i in range(0, len(new), args.batch)]
        queries = [_literal(v) for v in embed_texts(_names(rng, 50))]
        report: dict[str, Any] = {
            "machine": machine_line(),
            "sizes": vars(args),
            "embedder_ms_per_text": 1000 * embed_s / len(new),
            "options": {},
        }
        writers = {"insert": _insert, "insert, then UPDATE": _insert_then_update, "COPY": _copy}
        with psycopg.connect(url, autocommit=True) as connection:
            register_vector(connection)
            with connection.cursor() as cursor:
                cursor.execute("SET maintenance_work_mem = '256MB'")
            for label, index in INDEXES.items():
                for how, write in writers.items():
                    if index not in (None, (16, 64)) and how != "insert":
                        continue  # the other writers only under the served index and none
                    name = f"bench_vectors_{len(report['options'])}"
                    with connection.cursor() as cursor:
                        _table(cursor, name, index, existing)
                    seconds = _timed_batches(connection, write, name, batches)
                    row: dict[str, Any] = {
                        "ms_per_row": 1000 * seconds / len(new),
                        "ratio_to_embedder": seconds / embed_s,
                    }
                    if index is not None and how == "insert":
                        with connection.cursor() as cursor:
                            row["recall@10_ef40"] = _recall(cursor, name, queries, 40)
                            row["recall@10_ef100"] = _recall(cursor, name, queries, 100)
                    report["options"][f"{how}, {label}"] = row
                    with connection.cursor() as cursor:
                        cursor.execute(f"DROP TABLE {name}")
    print(render(report))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=2)


def render(report: dict[str, Any]) -> str:
    lines = [f"Machine: {report['machine']}", f"Sizes: {report['sizes']}", ""]
    lines.append(f"Embedder alone: {report['embedder_ms_per_text']:.2f} ms a text\n")
    rows = [
        [
            label,
            r["ms_per_row"],
            r["ratio_to_embedder"],
            r.get("recall@10_ef40", "—"),
            r.get("recall@10_ef100", "—"),
        ]
        for label, r in report["options"].items()
    ]
    lines.append(
        markdown_table(
            ["write, index", "ms a row", "× the embedder", "recall@10 ef 40", "ef 100"], rows
        )
    )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
