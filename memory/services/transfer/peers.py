"""Memories of other systems read as a memory export (``memory_transfer``'s lines), so
one importer writes them.

**mem0** — the memories as ``get_all`` returns them (``{"results": [...]}`` or a bare
list, JSON or one memory a line): each ``{id, memory, user_id, agent_id, run_id,
metadata, categories, created_at, updated_at}``. Each owner (``user_id`` a person,
``agent_id`` an agent, identifier ``mem0_user`` / ``mem0_agent``) is an entity in scope
``mem0/<owner>``; each memory a current narrative fact ``mem0_memory`` of its owner
(recorded at ``created_at``, last seen at ``updated_at``, ``source_ref`` the memory's id)
extracted from a turn holding its text (thread ``run_id``). Left behind: ``metadata``,
``categories``, ``hash``.

**Graphiti** — ``{"nodes": [EntityNode…], "edges": [EntityEdge…], "episodes":
[EpisodicNode…]}`` with graphiti-core's field names. An entity node is an entity in
scope ``graphiti/<group_id>`` (type from its labels, ``summary`` and ``attributes`` its
attributes, identifier ``graphiti_uuid``); an episode a turn (``content``, said at
``valid_at``, thread ``group_id``, ``ref`` its uuid); an entity edge a relation fact
(predicate its ``name`` in snake case, valid from ``valid_at`` until ``invalid_at``,
recorded at ``created_at``, expired when ``expired_at`` is set, from its first episode's
turn, ``source_ref`` its uuid). Left behind: embeddings, the edge's ``fact`` sentence
and ``attributes``, community nodes, episodes' ``entity_edges``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from memory.domain.entity_names import entity_normalize_key, entity_type_normalize
from memory.domain.predicate_names import predicate_normalize
from memory.kernel.errors import ValidationFailed
from memory.models import EntityType
from memory.services.transfer.format import FORMAT, FORMAT_VERSION

MEM0_PREDICATE = "mem0_memory"
SCOPE_UNSAFE = re.compile(r"[^A-Za-z0-9_.@:-]+")


def foreign_lines(content: str, format: str) -> Iterator[str]:
    if format == "mem0":
        records = _mem0_records(content)
    elif format == "graphiti":
        records = _graphiti_records(_json_document(content))
    else:
        raise ValidationFailed(f"unknown format {format[:20]!r}", code="invalid_format")
    counts: dict[str, int] = {}
    yield _line({"record": "header", "format": FORMAT, "version": FORMAT_VERSION})
    for record in records:
        counts[record["record"]] = counts.get(record["record"], 0) + 1
        yield _line(record)
    yield _line({"record": "end", "counts": counts})


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def _json_document(content: str) -> Any:
    try:
        return json.loads(content)
    except ValueError:
        raise ValidationFailed("the file is not one JSON document", code="invalid_export") from None


def _scope(prefix: str, name: Any) -> str:
    cleaned = SCOPE_UNSAFE.sub("-", str(name or "default")).strip("-.") or "default"
    return f"{prefix}/{cleaned[:200]}"


def _text(value: Any, what: str, limit: int = 300) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationFailed(f"{what} must be a non-empty string", code="invalid_export")
    return " ".join(value.split())[:limit]


def _optional_time(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


class _Ids:
    def __init__(self) -> None:
        self.next = 0
        self.known: dict[tuple[str, str], int] = {}

    def of(self, kind: str, key: str) -> tuple[int, bool]:
        """The id of (kind, key) and whether it is new."""
        if (kind, key) in self.known:
            return self.known[(kind, key)], False
        self.next += 1
        self.known[(kind, key)] = self.next
        return self.next, True


def _entity_line(pk: int, name: str, type_: str, scope: str, **extra: Any) -> dict[str, Any]:
    return {
        "record": "entity",
        "id": pk,
        "name": name,
        "type": type_,
        "scope": scope,
        "normalized_key": entity_normalize_key(name) or name.casefold(),
        **extra,
    }


def _predicate(pk: int, name: str, kind: str) -> dict[str, Any]:
    return {"record": "predicate", "id": pk, "name": name, "kind": kind, "status": "registered"}


# --- mem0 ---------------------------------------------------------------------------------


def _mem0_records(content: str) -> Iterator[dict[str, Any]]:
    text = content.strip()
    if text.startswith("{") and "\n{" in text:  # one memory a line
        memories = [_json_document(line) for line in text.splitlines() if line.strip()]
    else:
        document = _json_document(text)
        memories = document.get("results", []) if isinstance(document, dict) else document
    if not isinstance(memories, list):
        raise ValidationFailed("a mem0 export is a list of memories", code="invalid_export")
    ids = _Ids()
    predicate_id, _ = ids.of("predicate", MEM0_PREDICATE)
    yield _predicate(predicate_id, MEM0_PREDICATE, "narrative")
    for number, memory in enumerate(memories, start=1):
        if not isinstance(memory, dict):
            raise ValidationFailed(f"memory {number} is not an object", code="invalid_export")
        body = _text(memory.get("memory"), f"memory {number}: memory", limit=20_000)
        if memory.get("user_id"):
            owner, kind, type_ = str(memory["user_id"]), "mem0_user", EntityType.PERSON
        elif memory.get("agent_id"):
            owner, kind, type_ = str(memory["agent_id"]), "mem0_agent", EntityType.AGENT
        else:
            raise ValidationFailed(
                f"memory {number} has neither user_id nor agent_id", code="invalid_export"
            )
        scope = _scope("mem0", owner)
        entity_id, new = ids.of("entity", f"{kind}:{owner}")
        if new:
            yield _entity_line(entity_id, owner[:300], type_, scope)
            identifier_id, _ = ids.of("identifier", f"{kind}:{owner}")
            yield {
                "record": "identifier",
                "id": identifier_id,
                "entity_id": entity_id,
                "scope": scope,
                "kind": kind,
                "value": owner[:500],
            }
        created = _optional_time(memory.get("created_at"))
        turn_id, _ = ids.of("turn", str(memory.get("id") or number))
        yield {
            "record": "turn",
            "id": turn_id,
            "scope": scope,
            "text": body,
            "thread": str(memory.get("run_id") or "")[:200],
            "ref": str(memory.get("id") or "")[:200],
            "said_at": created,
            **({"created_at": created} if created else {}),
        }
        fact_id, _ = ids.of("fact", str(memory.get("id") or number))
        yield {
            "record": "fact",
            "id": fact_id,
            "scope": scope,
            "subject_id": entity_id,
            "predicate_id": predicate_id,
            "raw_predicate": MEM0_PREDICATE,
            "kind": "narrative",
            "value": body,
            "value_text": body,
            "source_kind": "api",
            "source_ref": str(memory.get("id") or "")[:300],
            "turn_id": turn_id,
            **({"recorded_at": created} if created else {}),
            "last_seen_at": _optional_time(memory.get("updated_at")) or created,
        }


# --- Graphiti -----------------------------------------------------------------------------


def _graphiti_records(document: Any) -> Iterator[dict[str, Any]]:
    if not isinstance(document, dict):
        raise ValidationFailed(
            "a Graphiti export is an object with nodes, edges and episodes",
            code="invalid_export",
        )
    nodes = _list(document, "nodes", "entity_nodes")
    edges = _list(document, "edges", "entity_edges")
    episodes = _list(document, "episodes", "episodic_nodes")
    ids = _Ids()
    node_ids: dict[str, int] = {}
    for number, node in enumerate(nodes, start=1):
        uuid = _text(_get(node, "uuid", f"node {number}"), f"node {number}: uuid", 200)
        name = _text(_get(node, "name", f"node {number}"), f"node {number}: name")
        labels = [str(x) for x in node.get("labels") or [] if str(x) != "Entity"]
        type_ = entity_type_normalize(labels[0] if labels else None)
        attributes = dict(node.get("attributes") or {})
        if node.get("summary"):
            attributes["summary"] = str(node["summary"])
        scope = _scope("graphiti", node.get("group_id"))
        pk, _ = ids.of("entity", uuid)
        node_ids[uuid] = pk
        created = _optional_time(node.get("created_at"))
        yield _entity_line(
            pk,
            name,
            type_,
            scope,
            attributes=attributes,
            **({"created_at": created} if created else {}),
        )
        identifier, _ = ids.of("identifier", uuid)
        yield {
            "record": "identifier",
            "id": identifier,
            "entity_id": pk,
            "scope": scope,
            "kind": "graphiti_uuid",
            "value": uuid,
        }
    turn_ids: dict[str, int] = {}
    for number, episode in enumerate(episodes, start=1):
        uuid = _text(_get(episode, "uuid", f"episode {number}"), f"episode {number}: uuid", 200)
        pk, _ = ids.of("turn", uuid)
        turn_ids[uuid] = pk
        yield {
            "record": "turn",
            "id": pk,
            "scope": _scope("graphiti", episode.get("group_id")),
            "text": str(episode.get("content") or ""),
            "said_at": _optional_time(episode.get("valid_at")),
            "thread": str(episode.get("group_id") or "")[:200],
            "ref": uuid,
        }
    predicates: dict[str, int] = {}
    for number, edge in enumerate(edges, start=1):
        what = f"edge {number}"
        uuid = _text(_get(edge, "uuid", what), f"{what}: uuid", 200)
        source = node_ids.get(str(edge.get("source_node_uuid")))
        target = node_ids.get(str(edge.get("target_node_uuid")))
        if source is None or target is None:
            raise ValidationFailed(
                f"{what} joins a node the file does not hold", code="invalid_export"
            )
        name = predicate_normalize(_text(_get(edge, "name", what), f"{what}: name", 100))
        if not re.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)*", name or ""):
            raise ValidationFailed(
                f"{what}: name {edge.get('name')!r} is no predicate", code="invalid_export"
            )
        if name not in predicates:
            predicates[name], _ = ids.of("predicate", name)
            yield _predicate(predicates[name], name, "relation")
        episodes_of = [turn_ids[e] for e in edge.get("episodes") or [] if e in turn_ids]
        created = _optional_time(edge.get("created_at"))
        expired = _optional_time(edge.get("expired_at"))
        pk, _ = ids.of("fact", uuid)
        yield {
            "record": "fact",
            "id": pk,
            "scope": _scope("graphiti", edge.get("group_id")),
            "subject_id": source,
            "predicate_id": predicates[name],
            "raw_predicate": str(edge.get("name"))[:200],
            "kind": "relation",
            "object_id": target,
            "valid_from": _optional_time(edge.get("valid_at")),
            "valid_until": _optional_time(edge.get("invalid_at")),
            "status": "expired" if expired else "current",
            "status_changed_at": expired,
            "source_ref": uuid,
            "turn_id": episodes_of[0] if episodes_of else None,
            **({"recorded_at": created, "last_seen_at": created} if created else {}),
        }


def _get(record: Any, key: str, what: str) -> Any:
    if not isinstance(record, dict):
        raise ValidationFailed(f"{what} is not an object", code="invalid_export")
    return record.get(key)


def _list(document: dict[str, Any], *names: str) -> list[Any]:
    for name in names:
        if name in document:
            value = document[name]
            if not isinstance(value, list):
                raise ValidationFailed(f"{name} must be a list", code="invalid_export")
            return value
    return []
