"""How fast one backend can write an import's search postings, three ways.

    .venv/bin/python -m benchmarks.postings_write                  # 1M documents, 5M postings
    .venv/bin/python -m benchmarks.postings_write --tiny           # seconds
    .venv/bin/python -m benchmarks.postings_write --documents 200000 --rounds 3

The largest single write of a memory import is its facts' search postings (about 5.4 a
fact). The staging an import leaves is made up here in a throwaway database: one row a
document (its ref, the document id it will take, its length) and five postings a
document (ref, term id, tf), on two connections alike. Then, on a connection with
triggers off as a restore writes:

- ``insert_select``: the import's own statement (memory/search/bm25_load.py), joining the
  postings to their documents and sorting them into the primary key's order;
- ``relay``: a second backend joins and sorts them, and the first copies what it streams
  straight into the postings table (``COPY … TO STDOUT`` relayed to ``COPY … FROM STDIN``);
- ``sort_elsewhere`` / ``copy_only``: the same two halves one after the other — the second
  backend's join and sort into a file, then the first backend's copy of that file alone,
  the cheapest the write itself can be.

Each round is rolled back. Reported: seconds of each way by round, and their medians.
Decision 0113 reads these: even the bare copy of the postings is a large share of what
a 1M-fact import may take in all.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from typing import Any

from benchmarks.search_common import bench_database, machine_line, markdown_table

DATABASE = "md_bench_postings_write"
POSTINGS_PER_DOCUMENT = 5
TERMS = 200_000
WORK_MEM = "256MB"  # the import's own (memory/services/transfer/importer.py)

_JOINED = """
SELECT i.term_id, d.doc_id, i.tf, d.length FROM staged_ids i JOIN staged_docs d ON d.ref = i.ref
ORDER BY i.term_id, d.doc_id
"""
_COLUMNS = "search_searchposting (term_id, doc_id, tf, dl)"


def _staging(connection: Any, documents: int) -> None:
    """An import's staging of ``documents`` documents, in this connection's temp tables."""
    connection.execute(f"SET work_mem = '{WORK_MEM}'")
    connection.execute(
        "CREATE TEMP TABLE staged_docs AS "
        "SELECT g AS ref, g + 10000000 AS doc_id, 6 AS length FROM generate_series(1, %s) g",
        [documents],
    )
    # Each document's terms scattered over the vocabulary, as a corpus's are.
    connection.execute(
        "CREATE TEMP TABLE staged_ids AS "
        "SELECT d.ref, 1 AS tf, ((d.ref::bigint * 7919 + k * 104729) %% %s) + 1 AS term_id "
        "FROM staged_docs d, generate_series(1, %s) k",
        [TERMS, POSTINGS_PER_DOCUMENT],
    )
    connection.execute("ANALYZE staged_docs")
    connection.execute("ANALYZE staged_ids")
    connection.commit()


def _fresh(connection: Any) -> None:
    connection.rollback()
    connection.execute(f"SET work_mem = '{WORK_MEM}'")
    connection.execute("SET session_replication_role = replica")


def _round(writer: Any, sorter: Any) -> dict[str, float]:
    seconds: dict[str, float] = {}
    _fresh(writer)
    started = time.perf_counter()
    writer.execute(f"INSERT INTO {_COLUMNS} {_JOINED}")
    seconds["insert_select"] = time.perf_counter() - started

    _fresh(writer)
    started = time.perf_counter()
    with (
        sorter.cursor().copy(f"COPY ({_JOINED}) TO STDOUT") as source,
        writer.cursor().copy(f"COPY {_COLUMNS} FROM STDIN") as sink,
    ):
        for block in source:
            sink.write(block)
    seconds["relay"] = time.perf_counter() - started
    sorter.rollback()

    _fresh(writer)
    with tempfile.TemporaryFile() as spooled:
        started = time.perf_counter()
        with sorter.cursor().copy(f"COPY ({_JOINED}) TO STDOUT") as source:
            for block in source:
                spooled.write(block)
        seconds["sort_elsewhere"] = time.perf_counter() - started
        sorter.rollback()
        spooled.seek(0)
        started = time.perf_counter()
        with writer.cursor().copy(f"COPY {_COLUMNS} FROM STDIN") as sink:
            while block := spooled.read(1 << 20):
                sink.write(block)
        seconds["copy_only"] = time.perf_counter() - started
    writer.rollback()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--documents", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    documents, rounds = (10_000, 1) if args.tiny else (args.documents, args.rounds)
    report: dict[str, Any] = {
        "machine": machine_line(),
        "load_average": os.getloadavg(),
        "documents": documents,
        "postings": documents * POSTINGS_PER_DOCUMENT,
    }
    with bench_database(DATABASE) as url:
        import psycopg

        with psycopg.connect(url) as writer, psycopg.connect(url) as sorter:
            for connection in (writer, sorter):
                _staging(connection, documents)
            report["rounds"] = [_round(writer, sorter) for _ in range(rounds)]
    ways = list(report["rounds"][0])
    report["median_s"] = {w: statistics.median(r[w] for r in report["rounds"]) for w in ways}
    print(json.dumps(report, indent=1))
    load_avg = ", ".join(f"{x:.2f}" for x in report["load_average"])
    print(f"\n{report['machine']}; load average {load_avg}")
    rows = [[str(n + 1), *(f"{r[w]:.2f}" for w in ways)] for n, r in enumerate(report["rounds"])]
    rows.append(["median", *(f"{report['median_s'][w]:.2f}" for w in ways)])
    print(markdown_table([f"{report['postings']:,} postings, round", *ways], rows))


if __name__ == "__main__":
    main()
