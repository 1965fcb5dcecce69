"""Memories of other systems read as a memory export (``memory_transfer``'s lines), so
one importer writes them.

**mem0** — the memories as ``get_all`` returns them (``{"results": [...]}`` or a bare
list), however the answers were put together: one answer, a list of them, or answers or
memories one after another. Each ``{id, memory, user_id, agent_id, run_id, actor_id,
role, metadata, created_at, updated_at, …}``. ``get_all`` answers for one owner, so a
memory with several owners is in each one's answer: it is read once (by ``id``; the
copies must agree on the owners, the one updated last gives the text). Each owner
(``user_id`` a person, ``agent_id`` an agent, identifier ``mem0_user`` / ``mem0_agent``;
a memory with only a ``run_id`` has its run as owner, an event, ``mem0_run``) is an
entity in scope ``mem0/<owner>``. A memory is one turn holding its text exactly as
written (in its first owner's scope: the user, else the agent; said by ``actor_id``,
else ``role``, else ``attributed_to``; thread ``run_id``; ``ref`` its id) and, for each
owner, a current narrative fact ``mem0_memory`` in the owner's scope with the same text
(recorded at ``created_at``, last seen at ``updated_at``, ``source_ref`` the memory's id)
extracted from that turn. Left behind: ``metadata``, ``categories``, ``hash``,
``expiration_date``.

**Graphiti** — ``{"nodes": [EntityNode…], "edges": [EntityEdge…], "episodes":
[EpisodicNode…]}`` with graphiti-core's field names. An entity node is an entity in
scope ``graphiti/<group_id>`` (type from its labels, ``summary`` and ``attributes`` its
attributes, identifier ``graphiti_uuid``); an episode a turn (``content``, said at
``valid_at``, thread ``group_id``, ``ref`` its uuid); an entity edge a relation fact
(predicate its ``name`` in snake case, valid from ``valid_at`` until ``invalid_at``,
recorded at ``created_at``, expired when ``expired_at`` is set, from its first episode's
turn, ``source_ref`` its uuid). Text is kept as written. Left behind: embeddings, the
edge's ``fact`` sentence, ``attributes`` and ``reference_time``, community nodes,
episodes' ``name``, ``source``, ``source_description``, ``entity_edges`` and
``episode_metadata``.
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
from memory.models.turn import MAX_SPEAKER_CHARS
from memory.services.facts.rules import MAX_VALUE_CHARS
from memory.services.transfer.format import FORMAT, FORMAT_VERSION

MEM0_PREDICATE = "mem0_memory"
SCOPE_UNSAFE = re.compile(r"[^A-Za-z0-9_.@:-]+")
BLANK = re.compile(r"\s*")


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
    except (ValueError, RecursionError):
        raise ValidationFailed("the file is not one JSON document", code="invalid_export") from None


def _json_values(content: str) -> Iterator[Any]:
    """The JSON values of ``content``, one after another (JSON lines, or documents put
    end to end)."""
    decoder = json.JSONDecoder()
    position = 0
    found = False
    while True:
        blank = BLANK.match(content, position)
        position = blank.end() if blank else position
        if position == len(content):
            break
        try:
            value, position = decoder.raw_decode(content, position)
        except json.JSONDecodeError as exc:
            raise ValidationFailed(
                f"the file is not JSON at line {exc.lineno}, column {exc.colno}",
                code="invalid_export",
            ) from None
        except RecursionError:
            raise ValidationFailed(
                "the file nests JSON too deeply", code="invalid_export"
            ) from None
        found = True
        yield value
    if not found:
        raise ValidationFailed("the file holds no JSON", code="invalid_export")


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

# Who an owner is: (the memory's field, identifier kind, entity type), in the order the
# first present one also holds the memory's turn.
MEM0_OWNERS = (
    ("user_id", "mem0_user", EntityType.PERSON),
    ("agent_id", "mem0_agent", EntityType.AGENT),
)
MEM0_RUN = ("run_id", "mem0_run", EntityType.EVENT)
# Who said a memory: the message's name, else its role (infer=False), else whom the
# extraction attributed it to.
MEM0_SPEAKER_FIELDS = ("actor_id", "role", "attributed_to")


def _mem0_records(content: str) -> Iterator[dict[str, Any]]:
    memories = _mem0_unique(_mem0_candidates(content))
    ids = _Ids()
    predicate_id, _ = ids.of("predicate", MEM0_PREDICATE)
    yield _predicate(predicate_id, MEM0_PREDICATE, "narrative")
    for key, (number, memory) in memories.items():
        body = _mem0_body(memory, f"memory {number}")
        owners = _mem0_owners(memory, f"memory {number}")
        owner_ids: list[tuple[int, str]] = []
        for kind, type_, owner in owners:
            scope = _scope("mem0", owner)
            entity_id, new = ids.of("entity", f"{kind}:{owner}")
            owner_ids.append((entity_id, scope))
            if not new:
                continue
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
        ref = str(memory.get("id") or "")
        turn_id, _ = ids.of("turn", key)
        yield {
            "record": "turn",
            "id": turn_id,
            "scope": owner_ids[0][1],
            "text": body,
            "speaker": _mem0_speaker(memory),
            "thread": str(memory.get("run_id") or "")[:200],
            "ref": ref[:200],
            "said_at": created,
            **({"created_at": created} if created else {}),
        }
        for entity_id, scope in owner_ids:
            fact_id, _ = ids.of("fact", f"{key}:{entity_id}")
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
                "source_ref": ref[:300],
                "turn_id": turn_id,
                **({"recorded_at": created} if created else {}),
                "last_seen_at": _optional_time(memory.get("updated_at")) or created,
            }


def _mem0_body(memory: dict[str, Any], what: str) -> str:
    """The memory's text, exactly as written."""
    body = memory.get("memory")
    if not isinstance(body, str) or not body.strip():
        raise ValidationFailed(f"{what}: memory must be a non-empty string", code="invalid_export")
    if len(body) > MAX_VALUE_CHARS:
        raise ValidationFailed(
            f"{what}: memory holds {len(body)} characters, at most {MAX_VALUE_CHARS}",
            code="invalid_export",
        )
    if "\x00" in body:
        raise ValidationFailed(f"{what}: memory holds a NUL character", code="invalid_export")
    return body


def _mem0_owners(memory: dict[str, Any], what: str) -> list[tuple[str, str, str]]:
    """(identifier kind, entity type, id) of each owner: the user and the agent, else
    the run."""
    owners: list[tuple[str, str, str]] = [
        (kind, type_, str(memory[f])) for f, kind, type_ in MEM0_OWNERS if memory.get(f)
    ]
    field, kind, type_ = MEM0_RUN
    if not owners and memory.get(field):
        owners = [(kind, type_, str(memory[field]))]
    if not owners:
        raise ValidationFailed(f"{what} has no user_id, agent_id or run_id", code="invalid_export")
    return owners


def _mem0_candidates(content: str) -> Iterator[Any]:
    """Every memory of the file, however ``get_all``'s answers were put together: one
    answer, a list of memories, a list of answers, or answers or memories one after
    another (one a line or not)."""
    for value in _json_values(content):
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, dict) and "results" in item and "memory" not in item:
                results = item["results"]
                if not isinstance(results, list):
                    raise ValidationFailed(
                        "a mem0 export is a list of memories", code="invalid_export"
                    )
                yield from results
            else:
                yield item


def _mem0_unique(candidates: Iterator[Any]) -> dict[str, tuple[int, dict[str, Any]]]:
    """The memories by id, each once: a memory with several owners is in each owner's
    answer. The copies agree on the owners (each may name only some); the one updated
    last gives the text."""
    memories: dict[str, tuple[int, dict[str, Any]]] = {}
    for number, memory in enumerate(candidates, start=1):
        if not isinstance(memory, dict):
            raise ValidationFailed(f"memory {number} is not an object", code="invalid_export")
        key = str(memory.get("id") or "") or f"#{number}"
        if key not in memories:
            memories[key] = (number, memory)
            continue
        first_number, first = memories[key]
        for field in (*(o[0] for o in MEM0_OWNERS), MEM0_RUN[0]):
            if first.get(field) and memory.get(field) and first[field] != memory[field]:
                raise ValidationFailed(
                    f"memory {number}: memory {key[:100]!r} is also memory {first_number} "
                    f"with another {field} ({str(first[field])[:100]!r}, "
                    f"{str(memory[field])[:100]!r})",
                    code="invalid_export",
                )
        later, earlier = (
            (memory, first)
            if str(memory.get("updated_at") or "") > str(first.get("updated_at") or "")
            else (first, memory)
        )
        merged = dict(later)
        for field, value in earlier.items():
            if merged.get(field) in (None, "") and value not in (None, ""):
                merged[field] = value
        memories[key] = (first_number, merged)
    return memories


def _mem0_speaker(memory: dict[str, Any]) -> str:
    for field in MEM0_SPEAKER_FIELDS:
        value = memory.get(field)
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())[:MAX_SPEAKER_CHARS]
    return ""


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
