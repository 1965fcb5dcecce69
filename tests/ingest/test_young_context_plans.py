"""A write's look-ups read what they look up, however young its context.

A context that has just grown has no statistics yet: the planner believes it holds a
row or two, and would as soon scan all of it as probe an index. The resolution's key and
alias look-up, the term dictionary's look-up and the read of the entities to check for
duplicates are written so that each stays a handful of index probes: the pages a small
run's look-ups touch must not grow with the context (docs/decisions/0111).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection

from memory.domain.access import ContextAccess
from memory.services.ingest.pipeline import memory_ingest

# Statements of a run whose pages are counted, by a fragment of their text.
LOOKUPS = {
    "resolution": "alias_keys && ",
    "terms": "INSERT INTO search_searchterm",
    "records": "chr(31)",
}


def _turn(prefix: str, *, entities: int, facts_each: int) -> dict[str, Any]:
    names = [f"{prefix} Person {i} Velqui" for i in range(entities)]
    relations, attributes = [], []
    for i, name in enumerate(names):
        for j in range(facts_each):
            if j % 2:
                attributes.append(
                    {"subject": name, "key": f"attr_{j}", "value": f"{prefix} value {i} {j}"}
                )
            else:
                relations.append(
                    {
                        "subject": name,
                        "predicate": "knows",
                        "object": names[(i + j + 1) % len(names)],
                    }
                )
    return {
        "entities": [{"name": n, "type": "person"} for n in names],
        "relations": relations,
        "attributes": attributes,
    }


def _ingest(access: ContextAccess, scope: str, triples: dict[str, Any]) -> None:
    memory_ingest(access=access, text="", scope=scope, infer="triples", triples=triples)


@contextmanager
def _pages_read(counted: dict[str, int]) -> Iterator[None]:
    """Each look-up of the block is explained (analyzed, in a savepoint rolled back)
    before it runs: the shared pages its plan touched are added to ``counted``."""

    def explain(execute: Callable[..., Any], sql: str, params: Any, many: bool, ctx: Any) -> Any:
        name = next((n for n, fragment in LOOKUPS.items() if fragment in sql), None)
        if name is not None and not many:
            with connection.connection.cursor() as cursor:
                cursor.execute("SAVEPOINT lookup_pages")
                cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params)
                (row,) = cursor.fetchall()
                cursor.execute("ROLLBACK TO SAVEPOINT lookup_pages")
            plan = (json.loads(row[0]) if isinstance(row[0], str) else row[0])[0]["Plan"]
            counted[name] = (
                counted.get(name, 0)
                + int(plan["Shared Hit Blocks"])
                + int(plan["Shared Read Blocks"])
            )
        return execute(sql, params, many, ctx)

    with connection.execute_wrapper(explain):
        yield


def test_a_small_runs_lookups_do_not_grow_with_its_context(access: ContextAccess) -> None:
    _ingest(access, "team", _turn("Seed", entities=4, facts_each=5))
    young: dict[str, int] = {}
    with _pages_read(young):
        _ingest(access, "team", _turn("First", entities=4, facts_each=5))

    for n in range(3):  # 1,500 entities and their terms: the context grows 100-fold
        _ingest(access, "team", _turn(f"Bulk{n}", entities=500, facts_each=4))

    grown: dict[str, int] = {}
    with _pages_read(grown):
        _ingest(access, "team", _turn("Later", entities=4, facts_each=5))

    assert set(young) == set(LOOKUPS) == set(grown)
    for name in LOOKUPS:
        # A probe descends a deeper index now and then; a scan reads the context's pages.
        assert grown[name] <= 3 * young[name] + 30, (name, young[name], grown[name])
