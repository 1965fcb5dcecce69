"""How each verb is asked: one builder per operation, shared by ``MemoryDesk`` and
``AsyncMemoryDesk`` (which only differ in how they send a ``Call``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

from memorydesk._transport import Call
from memorydesk.types import (
    Action,
    ContextBlock,
    Entity,
    Fact,
    FactWrite,
    ImportJob,
    Item,
    Run,
    SearchResults,
)

Namespace = Sequence[str]
Message = Mapping[str, Any]


def _drop_none(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def _when(value: datetime | str | None) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else value


# --- memories (turns) -------------------------------------------------------------------


def remember(
    text: str,
    *,
    scope: str,
    infer: str,
    wait: bool,
    speaker: str | None,
    said_at: datetime | str | None,
    thread: str | None,
    ref: str | None,
    source: str | None,
    triples: Mapping[str, Any] | None = None,
) -> Call[Run]:
    body = _drop_none(
        text=text,
        scope=scope,
        infer=infer,
        wait=wait,
        speaker=speaker,
        said_at=_when(said_at),
        thread=thread,
        ref=ref,
        source=source,
        triples=triples,
    )
    return Call("POST", "memories", Run.from_api, json=body)


def turns_of(messages: str | Sequence[Message]) -> list[tuple[str, str | None]]:
    """``(text, speaker)`` of each turn: a text is one turn; chat messages
    (``{"role", "content"}``) are one turn each, spoken by their role."""
    if isinstance(messages, str):
        return [(messages, None)]
    turns = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str) and content.strip():
            turns.append((content, message.get("name") or message.get("role")))
    return turns


def run_get(run_id: int) -> Call[Run]:
    return Call("GET", f"runs/{run_id}", Run.from_api)


# --- facts -------------------------------------------------------------------------------


def entity_ref(ref: Any) -> Any:
    """An entity as the API takes it: an id, or ``{"name", "type"?, "scope"?}`` (a bare
    name becomes ``{"name": ...}``)."""
    return {"name": ref} if isinstance(ref, str) else ref


def fact_add(**fields: Any) -> Call[FactWrite]:
    for end in ("subject", "object"):
        if fields.get(end) is not None:
            fields[end] = entity_ref(fields[end])
    return Call("POST", "facts", FactWrite.from_api, json=_drop_none(**fields))


def fact_get(fact_id: int) -> Call[Fact]:
    return Call("GET", f"facts/{int(fact_id)}", Fact.from_api)


def facts_page(
    *,
    subject: str | int | None,
    predicate: str | None,
    object: str | int | None,
    kind: str | None,
    scope: str | None,
    as_of: datetime | str | None,
    include_superseded: bool,
    include_pending: bool,
    page_size: int,
) -> Call[dict[str, Any]]:
    params = _drop_none(
        subject=subject,
        predicate=predicate,
        object=object,
        kind=kind,
        scope=scope,
        as_of=_when(as_of),
        limit=page_size,
        include_superseded="true" if include_superseded else None,
        include_pending="true" if include_pending else None,
    )
    return Call("GET", "facts", dict, params=params)


def fact_update(fact_id: int, **fields: Any) -> Call[Action]:
    return Call("PATCH", f"facts/{int(fact_id)}", Action.from_api, json=_drop_none(**fields))


def fact_correct(
    fact_id: int, *, value: Any, object: str | int | None, reason: str | None
) -> Call[Action]:
    body = _drop_none(value=value, object=object, reason=reason)
    return Call("POST", f"facts/{int(fact_id)}/correct", Action.from_api, json=body)


def facts_retract(ids: Sequence[int], *, reason: str | None) -> Call[Action]:
    body = _drop_none(ids=[int(i) for i in ids], reason=reason)
    return Call("POST", "facts/retract", Action.from_api, json=body)


def fact_restore(fact_id: int, *, reason: str | None) -> Call[Action]:
    body = _drop_none(reason=reason)
    return Call("POST", f"facts/{int(fact_id)}/restore", Action.from_api, json=body)


def fact_review(fact_id: int, *, action: str, note: str | None) -> Call[Action]:
    body = _drop_none(action=action, note=note)
    return Call("POST", f"facts/{int(fact_id)}/review", Action.from_api, json=body)


def facts_review(ids: Sequence[int], *, action: str, note: str | None) -> Call[Action]:
    body = _drop_none(facts=[int(i) for i in ids], action=action, note=note)
    return Call("POST", "facts/review", Action.from_api, json=body)


# --- entities ----------------------------------------------------------------------------


def entity_add(**fields: Any) -> Call[Entity]:
    return Call("POST", "entities", Entity.from_api, json=_drop_none(**fields))


def entity_get(entity_id: int) -> Call[Entity]:
    return Call("GET", f"entities/{int(entity_id)}", Entity.from_api)


def entities_page(
    *, q: str | None, type: str | None, scope: str | None, page_size: int
) -> Call[dict[str, Any]]:
    params = _drop_none(q=q, type=type, scope=scope, limit=page_size)
    return Call("GET", "entities", dict, params=params)


def next_page(url: str) -> Call[dict[str, Any]]:
    return Call("GET", url, dict)


# --- search and the context block ---------------------------------------------------------


def search(
    query: str,
    *,
    mode: str | None,
    k: int | None,
    scope: Sequence[str] | None,
    target: str | None,
    thread: str | None,
    include_pending: bool | None,
) -> Call[SearchResults]:
    body = _drop_none(
        query=query,
        mode=mode,
        k=k,
        scope=list(scope) if scope else None,
        target=target,
        thread=thread,
        include_pending=include_pending,
    )
    return Call("POST", "search", SearchResults.from_api, json=body)


def context_block(
    query: str | None,
    *,
    entity: str | int | None,
    budget_tokens: int | None,
    scope: Sequence[str] | None,
    include_pending: bool | None,
) -> Call[ContextBlock]:
    body = _drop_none(
        query=query,
        entity=entity,
        budget_tokens=budget_tokens,
        scope=list(scope) if scope else None,
        include_pending=include_pending,
    )
    return Call("POST", "context", ContextBlock.from_api, json=body)


# --- items -------------------------------------------------------------------------------


def _item_params(namespace: Namespace, key: str, **extra: Any) -> list[tuple[str, str]]:
    return [("namespace", label) for label in namespace] + [("key", key)] + list(extra.items())


def _item_or_none(data: Any) -> Item | None:
    return Item.from_api(data) if data else None


def item_get(namespace: Namespace, key: str, *, refresh_ttl: bool) -> Call[Item]:
    params = _item_params(namespace, key, refresh_ttl="true" if refresh_ttl else "false")
    return Call("GET", "items/item", Item.from_api, params=params)


def item_put(
    namespace: Namespace,
    key: str,
    value: Mapping[str, Any],
    *,
    index: Sequence[str] | bool | None,
    ttl: float | None,
) -> Call[Item]:
    body: dict[str, Any] = {"value": dict(value)}
    if index is not None:
        body["index"] = list(index) if not isinstance(index, bool) else index
    if ttl is not None:
        body["ttl"] = ttl
    return Call("PUT", "items/item", Item.from_api, params=_item_params(namespace, key), json=body)


def item_delete(namespace: Namespace, key: str) -> Call[None]:
    return Call("DELETE", "items/item", lambda _: None, params=_item_params(namespace, key))


def items_search(
    namespace_prefix: Namespace,
    *,
    query: str | None,
    filter: Mapping[str, Any] | None,
    limit: int,
    offset: int,
    refresh_ttl: bool,
) -> Call[list[Item]]:
    body = _drop_none(
        namespace_prefix=list(namespace_prefix),
        query=query,
        filter=dict(filter) if filter else None,
        limit=limit,
        offset=offset,
        refresh_ttl=refresh_ttl,
    )
    return Call(
        "POST", "items/search", lambda d: [Item.from_api(i) for i in d["results"]], json=body
    )


def items_list_namespaces(
    *,
    prefix: Namespace | None,
    suffix: Namespace | None,
    max_depth: int | None,
    limit: int,
    offset: int,
) -> Call[list[tuple[str, ...]]]:
    conditions = [
        {"match_type": kind, "path": list(path)}
        for kind, path in (("prefix", prefix), ("suffix", suffix))
        if path
    ]
    op = {
        "op": "list_namespaces",
        "match_conditions": conditions,
        "max_depth": max_depth,
        "limit": limit,
        "offset": offset,
    }
    return Call(
        "POST",
        "items/batch",
        lambda d: [tuple(ns) for ns in d["results"][0]],
        json={"ops": [op]},
    )


def items_batch(ops: Sequence[Mapping[str, Any]]) -> Call[list[Any]]:
    """Raw ops (``{"op": "get", ...}``) in, raw results out, in order."""
    return Call("POST", "items/batch", lambda d: list(d["results"]), json={"ops": list(ops)})


# --- export and import --------------------------------------------------------------------


def export_text() -> Call[str]:
    return Call("GET", "export", lambda text: text if isinstance(text, str) else "")


def import_data(data: bytes | str, *, format: str | None) -> Call[ImportJob]:
    content = data.encode() if isinstance(data, str) else data
    params = _drop_none(format=format)
    headers = {"Content-Type": "application/x-ndjson"}
    return Call(
        "POST", "import", ImportJob.from_api, params=params, content=content, headers=headers
    )


def import_get(job_id: int) -> Call[ImportJob]:
    return Call("GET", f"import/{int(job_id)}", ImportJob.from_api)


def quoted(text: str) -> str:
    return quote(text, safe="")
