"""The small, self-describing dicts MCP tools answer with: every record with its id,
scope and provenance, dates as ISO text."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memory.models import Entity, Fact, Run
from memory.selectors.entity_card import EntityCard
from memory.selectors.search_results import SearchResult

MAX_VALUE_CHARS = 2000


def _iso(when: datetime | None) -> str | None:
    return when.isoformat() if when else None


def entity_ref(entity: Entity) -> dict[str, Any]:
    return {"id": entity.pk, "name": entity.name, "type": entity.type, "scope": entity.scope}


def fact_shape(fact: Fact, *, score: float | None = None) -> dict[str, Any]:
    value = fact.value
    if isinstance(value, str) and len(value) > MAX_VALUE_CHARS:
        value = value[:MAX_VALUE_CHARS] + "…"
    shape: dict[str, Any] = {
        "id": fact.pk,
        "subject": {"id": fact.subject.pk, "name": fact.subject.name, "type": fact.subject.type},
        "predicate": fact.predicate.name,
        "raw_predicate": fact.raw_predicate,
        "kind": fact.kind,
        "object": (
            {"id": fact.object.pk, "name": fact.object.name, "type": fact.object.type}
            if fact.object is not None
            else None
        ),
        "value": value,
        # With `as_of`, the status the fact had then (fact_list annotates it).
        "status": getattr(fact, "status_then", None) or fact.status,
        "trust": fact.trust,
        "confidence": fact.confidence,
        "importance": fact.importance,
        "valid_from": _iso(fact.valid_from),
        "valid_until": _iso(fact.valid_until),
        "recorded_at": _iso(fact.recorded_at),
        "supersedes": fact.supersedes_id,
        "scope": fact.scope,
        "source": {
            "kind": fact.source_kind,
            "ref": fact.source_ref,
            "run": fact.run_id,
            "document": fact.document_id,
            "turn": fact.turn_id,
        },
    }
    if score is not None:
        shape["rank_score"] = round(score, 6)
    return shape


def run_shape(run: Run) -> dict[str, Any]:
    return {
        "id": run.pk,
        "scope": run.scope,
        "mode": run.mode,
        "source": run.source,
        "outcome": run.outcome,
        "error": run.error,
        "summary": run.summary,
        "attempts": run.attempts,
        "retry_of": run.retry_of_id,
        "created_by": run.created_by.username if run.created_by else None,
        "created_at": _iso(run.created_at),
        "finished_at": _iso(run.finished_at),
    }


def search_result_shape(result: SearchResult) -> dict[str, Any]:
    explain = result.explain
    return {
        "type": result.type,
        "id": result.id,
        "text": result.text,
        "score": result.score,
        "scope": result.scope,
        "explain": {
            "bm25": vars(explain.bm25) if explain.bm25 else None,
            "vector": vars(explain.vector) if explain.vector else None,
            "fused": explain.fused,
            "graph_boost": explain.graph_boost,
            "window_boost": explain.window_boost,
        },
        "meta": result.meta,
        **({"trust": result.meta["trust"]} if "trust" in result.meta else {}),
    }


def entity_card_shape(card: EntityCard) -> dict[str, Any]:
    entity = card.entity
    return {
        "entity": {
            **entity_ref(entity),
            "aliases": list(entity.aliases),
            "attributes": entity.attributes,
            "seeded": entity.seeded,
            "updated_at": _iso(entity.updated_at),
        },
        "matched_by": card.matched_by,
        "other_matches": [entity_ref(e) for e in card.other_matches],
        "identifiers": [
            {"kind": i.kind, "value": i.value, "scope": i.scope} for i in card.identifiers
        ],
        "facts": [fact_shape(r.fact, score=r.score) for r in card.facts],
        "neighbours": [
            {
                "id": n.id,
                "name": n.name,
                "type": n.type,
                "predicate": n.predicate,
                "direction": n.direction,
                "fact": n.fact_id,
            }
            for n in card.neighbours
        ],
    }
