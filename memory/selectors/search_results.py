"""What a search answers: each result with the explanation of its ranks, and the reading
of the ranked records' text, scope and meta (one statement per search)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memory.infra.replicas import read_connection
from memory.models import Chunk, Document, Entity, Fact, Turn
from memory.search.models import Target
from memory.search.texts import fact_text


@dataclass(frozen=True)
class RankScore:
    rank: int
    score: float


@dataclass
class Explain:
    bm25: RankScore | None = None
    vector: RankScore | None = None
    fused: float | None = None
    graph_boost: float | None = None
    window_boost: float | None = None  # turns: what the neighbouring turns added


@dataclass
class SearchResult:
    type: str
    id: int
    text: str
    score: float
    scope: str
    explain: Explain
    meta: dict[str, Any] = field(default_factory=dict)


def result_cosine(result: SearchResult) -> float:
    """The result's cosine similarity to the query, -1 when the vector did not find it
    (ties between lists of different scales go to the closer in meaning)."""
    return result.explain.vector.score if result.explain.vector is not None else -1.0


def _chunk_rows(ids: list[int]) -> list[tuple[int, str, str, int, str, int]]:
    """(id, text, scope, document id, document title, ordinal) of the chunks in ``ids``."""
    with read_connection().cursor() as cursor:
        cursor.execute(
            f"""
            SELECT c.id, c.text, c.scope, c.document_id, d.title, c.ordinal
            FROM {Chunk._meta.db_table} c
            JOIN {Document._meta.db_table} d ON d.id = c.document_id
            WHERE c.id = ANY(%s)
            """,  # noqa: S608 - table names from the models, ids a parameter
            [ids],
        )
        return cursor.fetchall()


def results_hydrate(
    kind: Target, ids: list[int], *, scores: dict[int, float], explains: dict[int, Explain]
) -> list[SearchResult]:
    """The result records in ``ids`` order, with their text (one query)."""
    rows: dict[int, tuple[str, str, dict[str, Any]]] = {}
    # Plain values for chunks and entities: instantiating models (with a related
    # document) cost more than the query itself on every search. Chunks, the common
    # target, are read with one fixed statement: building the ORM query took longer
    # than running it (1.4 against 0.55 ms on the 100k-chunk benchmark).
    if kind == Target.CHUNK:
        for pk, text, scope, document_id, title, ordinal in _chunk_rows(ids):
            rows[pk] = (
                text,
                scope,
                {"document_id": document_id, "document_title": title, "ordinal": ordinal},
            )
    elif kind == Target.TURN:
        turn_rows = Turn.objects.filter(pk__in=ids).values_list(
            "pk", "text", "scope", "ref", "thread", "speaker", "said_at", "run_id"
        )
        for pk, text, scope, turn_ref, thread, speaker, said_at, run_id in turn_rows:
            rows[pk] = (
                text,
                scope,
                {
                    "ref": turn_ref or None,
                    "thread": thread or None,
                    "speaker": speaker or None,
                    "said_at": said_at.isoformat() if said_at else None,
                    "run": run_id,
                },
            )
    elif kind == Target.FACT:
        for fact in Fact.objects.filter(pk__in=ids).select_related(
            "subject", "predicate", "object"
        ):
            rows[fact.pk] = (
                fact_text(fact),
                fact.scope,
                {
                    "subject_id": fact.subject_id,
                    "subject_name": fact.subject.name,
                    "predicate": fact.predicate.name,
                    "object_id": fact.object_id,
                    "object_name": fact.object.name if fact.object is not None else None,
                    "status": fact.status,
                    "trust": fact.trust,
                },
            )
    else:
        entity_rows = Entity.objects.filter(pk__in=ids).values_list("pk", "name", "scope", "type")
        for pk, name, scope, entity_type in entity_rows:
            rows[pk] = (name, scope, {"entity_type": entity_type})
    results: list[SearchResult] = []
    for ref in ids:
        if ref not in rows:  # deleted between ranking and reading: skip it
            continue
        text, scope, meta = rows[ref]
        results.append(
            SearchResult(
                type=kind.value,
                id=ref,
                text=text,
                score=scores[ref],
                scope=scope,
                explain=explains.get(ref, Explain()),
                meta=meta,
            )
        )
    return results
