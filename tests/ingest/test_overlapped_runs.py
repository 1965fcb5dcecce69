"""A large run writes in the overlap window (decision 0112); what it stores is what the
same run stores written statement by statement."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from memory.domain.access import system_access
from memory.models import Context
from memory.services.ingest import pipeline as ingest
from memory.services.ingest.pipeline import OVERLAP_FROM_FACTS, memory_ingest

pytestmark = pytest.mark.django_db


def _triples(facts: int) -> dict[str, Any]:
    names = [f"Person {i} Velqui" for i in range(facts // 5)]
    relations, attributes = [], []
    for i in range(facts):
        subject = names[i % len(names)]
        if i % 2:
            attributes.append({"subject": subject, "key": f"attr_{i % 7}", "value": f"v {i}"})
        else:
            relations.append(
                {"subject": subject, "predicate": "knows", "object": names[(i + 1) % len(names)]}
            )
    return {
        "entities": [{"name": n, "type": "person"} for n in names],
        "relations": relations,
        "attributes": attributes,
    }


def _stored(context: Context) -> dict[str, list[tuple[Any, ...]]]:
    """What runs stored in ``context``, without ids: facts, postings, blocking keys, and
    which predicates a later run saw again."""
    queries = {
        "facts": """
            SELECT s.name, p.name, o.name, f.value_text, f.status, f.trust
            FROM memory_fact f JOIN memory_entity s ON s.id = f.subject_id
            JOIN memory_predicate p ON p.id = f.predicate_id
            LEFT JOIN memory_entity o ON o.id = f.object_id WHERE f.context_id = %s""",
        "postings": """
            SELECT d.target, coalesce(s.name || ' ' || p.name, e.name), t.text, x.tf, x.dl
            FROM search_searchdoc d JOIN search_searchposting x ON x.doc_id = d.id
            JOIN search_searchterm t ON t.id = x.term_id
            LEFT JOIN memory_fact f ON f.id = d.fact_id
            LEFT JOIN memory_entity s ON s.id = f.subject_id
            LEFT JOIN memory_predicate p ON p.id = f.predicate_id
            LEFT JOIN memory_entity e ON e.id = d.entity_id WHERE t.context_id = %s""",
        "keys": """
            SELECT e.name, k.type, k.key FROM memory_duplicatekey k
            JOIN memory_entity e ON e.id = k.entity_id WHERE k.context_id = %s""",
        "predicates": """
            SELECT name, status, last_seen_at > first_seen_at
            FROM memory_predicate WHERE context_id = %s""",
    }
    stored = {}
    with connection.cursor() as cursor:
        for name, sql in queries.items():
            cursor.execute(sql, [context.pk])
            stored[name] = sorted(cursor.fetchall(), key=repr)
    return stored


def test_a_large_run_stores_what_it_stores_written_statement_by_statement(
    make_context: Callable[..., Context], monkeypatch: pytest.MonkeyPatch
) -> None:
    triples = _triples(2 * OVERLAP_FROM_FACTS)
    overlapped, plain = make_context("overlapped"), make_context("plain")
    sent: list[str] = []
    real = ingest.overlap_window

    def watched() -> Any:
        sent.append("window")
        return real()

    def twice(context: Context) -> None:
        # The second run sees again the predicates the first one observed: their
        # last-seen stamp is written, in the window for the overlapped context.
        for _ in range(2):
            memory_ingest(
                access=system_access(context), text="", scope="s", infer="triples", triples=triples
            )

    monkeypatch.setattr(ingest, "overlap_window", watched)
    twice(overlapped)
    monkeypatch.setattr(ingest, "OVERLAP_FROM_FACTS", 10**9)
    twice(plain)

    assert sent == ["window", "window"]  # the first context's runs wrote in the window
    first, second = _stored(overlapped), _stored(plain)
    assert len(first["facts"]) >= OVERLAP_FROM_FACTS  # repeats re-observe or supersede
    assert first["postings"] and first["keys"]
    assert any(seen_again for _, _, seen_again in first["predicates"])
    assert first == second
