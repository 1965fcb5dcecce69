"""The MCP tools. Each is a thin function over a service or selector — the same ones the
REST API calls — acting with the access of the request's token (``current_access``).

The SDK builds each tool's JSON schema from its signature (the ``Field`` descriptions) and
validates arguments against it; the services then validate what the schema cannot say
(scope syntax, predicate text, budgets) and refuse writes outside the token's grants.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Annotated, Any, Literal

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.db import DataError, IntegrityError, transaction
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from memory.access import ContextAccess
from memory.errors import DomainError, NotFound, ValidationFailed
from memory.llm.schemas import ActionItem, AttributeItem, EntityItem, RelationItem, TriplesInput
from memory.mcp.shapes import (
    entity_card_shape,
    entity_ref,
    fact_shape,
    run_shape,
    search_result_shape,
)
from memory.models import Fact
from memory.models.turn import MAX_REF_CHARS, MAX_SPEAKER_CHARS, MAX_THREAD_CHARS
from memory.predicate_names import MAX_PREDICATE_LENGTH
from memory.scopes import MAX_SCOPE_LENGTH, ScopeError
from memory.selectors import search as search_selectors
from memory.selectors.entity_card import entity_card, entity_find
from memory.selectors.facts import fact_list, facts_visible
from memory.selectors.memory_context import (
    DEFAULT_BUDGET_TOKENS,
    MAX_BUDGET_TOKENS,
    MIN_BUDGET_TOKENS,
    memory_context,
    memory_context_data,
)
from memory.selectors.predicates import predicate_canonicalize
from memory.selectors.runs import run_get
from memory.selectors.search import MAX_QUERY_CHARS, MODES, TARGETS
from memory.selectors.vocabulary_view import vocabulary_listing
from memory.services.fact_corrections import fact_correct
from memory.services.facts import fact_retract
from memory.services.ingest import run_create, run_enqueue, run_execute
from memory.services.turns import turn_fields_clean

logger = logging.getLogger(__name__)

_access: ContextVar[ContextAccess] = ContextVar("mcp_access")

MAX_TOOL_K = 100
MAX_FIND_FACTS = 200
MAX_SCOPE_FILTERS = 50
MAX_TEXT_CHARS = 10_000
NO_NUL = r"^[^\x00]*$"  # PostgreSQL text cannot hold NUL

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)


def current_access() -> ContextAccess:
    """The access of the token this MCP request came with (set by the view)."""
    return _access.get()


def bind_access(access: ContextAccess) -> None:
    _access.set(access)


# -- argument types: one description each, shared by the tools that take them ----------

Scope = Annotated[
    str,
    Field(
        description="a scope path inside the context, e.g. org/acme or org/acme/user/alex",
        min_length=1,
        max_length=MAX_SCOPE_LENGTH,
    ),
]
ScopeFilters = Annotated[
    list[Annotated[str, Field(max_length=MAX_SCOPE_LENGTH + 2)]] | None,
    Field(
        description="narrow the token's read grants to these scope patterns: P (exactly P), "
        "P/* (P and below) or *; default: everything the token may read",
        max_length=MAX_SCOPE_FILTERS,
    ),
]
EntityRef = Annotated[
    int | str,
    Field(
        description="an entity id, or a name: its canonical name, an alias or an identifier "
        "(alex@acme.example, email:alex@acme.example)",
    ),
]
Predicate = Annotated[
    str,
    Field(
        description="a predicate in any form: worksAt, works-at, works at or an alias all "
        "mean works_at",
        min_length=1,
        max_length=MAX_PREDICATE_LENGTH,
    ),
]
Wait = Annotated[
    bool,
    Field(
        description="true: run now and answer with the result; false: queue the run for the "
        "task worker and answer with its id (poll get_run)",
    ),
]


def _tool(fn: Callable[..., dict[str, Any] | tuple[str, dict[str, Any]]]) -> Callable[..., Any]:
    """Run ``fn`` inline, on the request's thread, and turn its answer, or a domain error,
    into a tool result. A tool error is a result with ``isError``, never a protocol error:
    the agent reads the message and corrects itself."""

    @functools.wraps(fn)
    async def call(**kwargs: Any) -> CallToolResult:
        with _loop_detached():
            return _run(fn, kwargs)

    return call


@contextmanager
def _loop_detached() -> Iterator[None]:
    """Let synchronous Django code run inside the request's private event loop.

    The view runs each exchange in a loop of its own on the request's thread, and the
    tool is the only thing that loop is waiting for, so blocking it costs nothing. Django
    refuses database work while a loop runs in the thread (a guard against blocking a
    shared ASGI loop); the loop is unset for the call and set back after it, instead of
    handing the call to another thread and back (two waits for a busy CPU each time)."""
    loop = asyncio.events._get_running_loop()
    asyncio.events._set_running_loop(None)
    try:
        yield
    finally:
        asyncio.events._set_running_loop(loop)


def _json(data: Any) -> Any:
    return json.loads(json.dumps(data, cls=DjangoJSONEncoder))


def _run(fn: Callable[..., Any], kwargs: dict[str, Any]) -> CallToolResult:
    try:
        answer = fn(**kwargs)
    except DomainError as exc:
        return _error(exc.code, exc.message, exc.details)
    except ScopeError as exc:
        return _error("invalid_scope", str(exc))
    except DjangoValidationError as exc:
        return _error("invalid", "validation failed", exc.messages)
    except (IntegrityError, DataError) as exc:
        logger.warning("database refused a write from an MCP tool: %s", exc)
        return _error("constraint_violation", "the database refused this write")
    except Exception:
        logger.exception("MCP tool %s failed", fn.__name__)
        return _error("server_error", "internal error; it has been logged")
    text, data = answer if isinstance(answer, tuple) else (None, answer)
    data = _json(data)
    body = text if text is not None else json.dumps(data, ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=body)], structured_content=data)


def _error(code: str, message: str, details: Any = None) -> CallToolResult:
    error = _json({"error": {"code": code, "message": message, "details": details}})
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(error, ensure_ascii=False))],
        structured_content=error,
        is_error=True,
    )


# -- writes -----------------------------------------------------------------------------


def _run_answer(run: Any, *, wait: bool) -> dict[str, Any]:
    if not wait:
        run_enqueue(run=run)
        return {"run": run_shape(run), "queued": True, "result": None}
    run = run_execute(run_id=run.pk)
    return {"run": run_shape(run), "queued": False, "result": run.result}


@_tool
def remember(
    text: Annotated[
        str,
        Field(
            description="the memory: a conversation turn or a note, in plain language",
            pattern=NO_NUL,
        ),
    ],
    scope: Scope,
    infer: Annotated[
        Literal["llm", "triples", "none"],
        Field(
            description="llm: the chat model extracts entities and facts; triples: store the "
            "given triples as they are (no model); none: keep the text as a document only",
        ),
    ] = "llm",
    triples: Annotated[
        TriplesInput | None,
        Field(description="with infer=triples: {entities, relations, attributes, actions}"),
    ] = None,
    source: Annotated[
        str,
        Field(
            description="who or what said it (a label kept on the run)",
            max_length=300,
            pattern=NO_NUL,
        ),
    ] = "mcp",
    speaker: Annotated[
        str, Field(description="who said it", max_length=MAX_SPEAKER_CHARS, pattern=NO_NUL)
    ] = "",
    said_at: Annotated[
        datetime | None, Field(description="when it was said (ISO 8601; no zone means UTC)")
    ] = None,
    thread: Annotated[
        str,
        Field(
            description="the conversation it belongs to (search filters turns by it)",
            max_length=MAX_THREAD_CHARS,
            pattern=NO_NUL,
        ),
    ] = "",
    ref: Annotated[
        str,
        Field(description="your own id for this turn", max_length=MAX_REF_CHARS, pattern=NO_NUL),
    ] = "",
    wait: Wait = True,
) -> dict[str, Any]:
    """Write a memory into the store, as POST memories does: the text is kept as a
    searchable turn (with its speaker, time, thread and ref) and the run records the
    input, the extraction and its outcome. Answers the run (id, outcome) and, having waited, its
    result: entities created or matched, facts created or superseded, new predicates,
    conflicts. Needs a write grant on `scope`."""
    run = run_create(
        access=current_access(),
        text=text,
        scope=scope,
        infer=infer,
        triples=triples.model_dump(exclude_none=True) if triples is not None else None,
        source=source,
        turn=turn_fields_clean(speaker=speaker, said_at=said_at, thread=thread, ref=ref),
    )
    return _run_answer(run, wait=wait)


@_tool
def add_facts(
    scope: Scope,
    entities: Annotated[
        list[EntityItem],
        Field(description="entities to create or match: {name, type, aliases, identifiers}"),
    ] = [],  # noqa: B006 - the SDK copies defaults into its argument model
    relations: Annotated[
        list[RelationItem],
        Field(description="{subject, predicate, object} between entities (named by name)"),
    ] = [],  # noqa: B006
    attributes: Annotated[
        list[AttributeItem],
        Field(description="{subject, key, value}: a property of an entity"),
    ] = [],  # noqa: B006
    actions: Annotated[
        list[ActionItem],
        Field(description="{subject, verb, object?, at?}: something an entity did"),
    ] = [],  # noqa: B006
    text: Annotated[
        str,
        Field(
            description="optional: the text these facts came from (kept on the run)",
            pattern=NO_NUL,
        ),
    ] = "",
    wait: Wait = True,
) -> dict[str, Any]:
    """Store facts exactly as given, with no model choosing the words (a memory with
    infer=triples). Predicates are canonicalized (worksAt → works_at) and entities resolved
    like every write. Needs a write grant on `scope`."""
    triples = TriplesInput(
        entities=entities, relations=relations, attributes=attributes, actions=actions
    )
    if not (entities or relations or attributes or actions):
        raise ValidationFailed(
            "give at least one entity, relation, attribute or action", code="missing_triples"
        )
    run = run_create(
        access=current_access(),
        text=text,
        scope=scope,
        infer="triples",
        triples=triples.model_dump(exclude_none=True),
        source="mcp add_facts",
    )
    return _run_answer(run, wait=wait)


def _visible_fact(fact_id: int) -> Fact:
    fact = (
        facts_visible(access=current_access())
        .select_related("subject", "object", "predicate")
        .filter(pk=fact_id)
        .first()
    )
    if fact is None:
        raise NotFound(f"fact {fact_id} not found", code="fact_not_found")
    return fact


FactId = Annotated[int, Field(description="the fact's id (from find_facts, get_entity…)", ge=1)]


@_tool
def correct_fact(
    fact_id: FactId,
    value: Annotated[
        str | int | float | bool | None,
        Field(description="the corrected value, for an attribute fact"),
    ] = None,
    object: Annotated[
        EntityRef | None, Field(description="the corrected object entity, for a relation")
    ] = None,
    reason: Annotated[
        str, Field(description="why (kept in the audit log)", max_length=300, pattern=NO_NUL)
    ] = "",
) -> dict[str, Any]:
    """Say a current fact was wrong: the corrected fact supersedes it (same subject,
    predicate and scope; the old one stays in history), recorded in the audit log and
    undoable. Needs a write grant on the fact's scope."""
    access = current_access()
    with transaction.atomic():
        fact = _visible_fact(fact_id)
        target = entity_find(access=access, ref=object).entity if object is not None else None
        correction = fact_correct(
            access=access, fact=fact, value=value, object=target, reason=reason
        )
    return {
        "corrected": fact_shape(_visible_fact(correction.old.pk)),
        "fact": fact_shape(_visible_fact(correction.new.pk)),
        "audit_event": correction.audit_event_id,
    }


@_tool
def retract_fact(fact_id: FactId) -> dict[str, Any]:
    """Withdraw a fact: it stops being current and stays in history (as DELETE facts/{id}).
    Needs a write grant on the fact's scope."""
    fact = fact_retract(access=current_access(), fact=_visible_fact(fact_id))
    return {"fact": fact_shape(_visible_fact(fact.pk))}


# -- reads ------------------------------------------------------------------------------


@_tool
def search(
    query: Annotated[
        str,
        Field(
            description="what to look for",
            min_length=1,
            max_length=MAX_QUERY_CHARS,
            pattern=NO_NUL,
        ),
    ],
    mode: Annotated[
        str,
        Field(
            description="bm25 (words), vector (meaning), hybrid (both, fused) or hybrid_graph "
            "(hybrid boosted by the keyword and entity graph)",
            json_schema_extra={"enum": list(MODES)},
        ),
    ] = "hybrid",
    target: Annotated[
        str,
        Field(
            description="what to return: " + ", ".join(TARGETS),
            json_schema_extra={"enum": list(TARGETS)},
        ),
    ] = "chunks",
    k: Annotated[int, Field(description="how many results", ge=1, le=MAX_TOOL_K)] = 10,
    scope: ScopeFilters = None,
    thread: Annotated[
        str | None,
        Field(
            description="target turns only: the turns of this conversation",
            max_length=MAX_THREAD_CHARS,
            pattern=NO_NUL,
        ),
    ] = None,
) -> dict[str, Any]:
    """Search the memory. Each result says why it ranked: its BM25 and vector rank and
    score, the fused score and the graph boost."""
    response = search_selectors.search(
        access=current_access(),
        query=query,
        mode=mode,
        k=k,
        scopes=scope,
        target=target,
        thread=thread,
    )
    return {
        "results": [search_result_shape(r) for r in response.results],
        "took_ms": response.took_ms,
    }


@_tool
def get_context(
    query: Annotated[
        str | None,
        Field(
            description="what the agent is about to talk about",
            max_length=MAX_QUERY_CHARS,
            pattern=NO_NUL,
        ),
    ] = None,
    entity: Annotated[EntityRef | None, Field(description="an entity to centre on")] = None,
    budget_tokens: Annotated[
        int,
        Field(
            description="the most tokens the block may take (estimated as characters / 4)",
            ge=MIN_BUDGET_TOKENS,
            le=MAX_BUDGET_TOKENS,
        ),
    ] = DEFAULT_BUDGET_TOKENS,
    scope: ScopeFilters = None,
    mode: Annotated[
        str,
        Field(
            description="how facts and passages are found: bm25, vector, hybrid or "
            "hybrid_graph (with the embedding model down, hybrid falls back to bm25)",
            json_schema_extra={"enum": list(MODES)},
        ),
    ] = "hybrid",
) -> tuple[str, dict[str, Any]]:
    """A prompt-ready memory block for a query and/or an entity: the best current facts
    (ranked by confidence, recency, predicate weight and importance) and the best
    passages, each line with its id, scope and source, within `budget_tokens`. The text
    goes straight into a prompt; the structured result holds the same lines as data."""
    block = memory_context(
        access=current_access(),
        query=query,
        entity=entity,
        budget_tokens=budget_tokens,
        scopes=scope,
        mode=mode,
    )
    return block.text, memory_context_data(block)


@_tool
def get_entity(
    entity: EntityRef,
    facts: Annotated[int, Field(description="how many ranked facts", ge=0, le=100)] = 20,
) -> dict[str, Any]:
    """An entity with its aliases, identifiers, best current facts (ranked) and
    neighbours (entities joined to it by current relations, both directions). `entity`
    may be an id or any of its names."""
    card = entity_card(access=current_access(), ref=entity, facts_limit=facts)
    return entity_card_shape(card)


@_tool
def find_facts(
    subject: Annotated[EntityRef | None, Field(description="the subject entity")] = None,
    predicate: Annotated[Predicate | None, Field(description="in any form")] = None,
    object: Annotated[EntityRef | None, Field(description="the object entity")] = None,
    as_of: Annotated[
        datetime | None,
        Field(description="ISO date-time: the facts that were current then"),
    ] = None,
    include_superseded: Annotated[
        bool, Field(description="also superseded, expired and retracted facts")
    ] = False,
    limit: Annotated[int, Field(description="at most this many", ge=1, le=MAX_FIND_FACTS)] = 50,
) -> dict[str, Any]:
    """Facts by subject, predicate (any form: worksAt finds works_at) and object, newest
    first; current ones unless `as_of` or `include_superseded` says otherwise."""
    access = current_access()
    subject_entity = entity_find(access=access, ref=subject).entity if subject else None
    object_entity = entity_find(access=access, ref=object).entity if object else None
    canonical = (
        predicate_canonicalize(context=access.context, name=predicate).canonical
        if predicate
        else None
    )
    facts = list(
        fact_list(
            access=access,
            subject=subject_entity,
            predicate=predicate,
            object=object_entity,
            as_of=as_of,
            include_superseded=include_superseded,
        )[: limit + 1]
    )
    return {
        "subject": entity_ref(subject_entity) if subject_entity else None,
        "predicate": canonical,
        "object": entity_ref(object_entity) if object_entity else None,
        "facts": [fact_shape(f) for f in facts[:limit]],
        "more": len(facts) > limit,
    }


@_tool
def get_vocabulary(
    scope: Scope,
    text: Annotated[
        str,
        Field(
            description="optional: the turn about to be written (names it mentions come first)",
            max_length=MAX_TEXT_CHARS,
            pattern=NO_NUL,
        ),
    ] = "",
) -> dict[str, Any]:
    """The vocabulary a write into `scope` would be shown: entity names and types,
    relation labels, attribute keys and action verbs to reuse, as the extraction prompt
    lists them."""
    return vocabulary_listing(access=current_access(), scope=scope, text=text)


@_tool
def canonicalize_predicate(name: Predicate) -> dict[str, Any]:
    """How the store reads a predicate name: its canonical form, whether it is
    registered, and how it resolved (exact, normalized, alias, fuzzy or none)."""
    result = predicate_canonicalize(context=current_access().context, name=name)
    answer = {
        "input": result.input,
        "canonical": result.canonical,
        "registered": result.registered,
        "via": result.via,
    }
    if hasattr(result, "inverse"):  # inverse aliases: subject and object swap
        answer["inverse"] = result.inverse
    return answer


@_tool
def get_run(
    run_id: Annotated[int, Field(description="the run's id (from remember/add_facts)", ge=1)],
) -> dict[str, Any]:
    """One ingest run: its outcome, error and result (what it created, matched,
    superseded), as far as it has got."""
    run = run_get(access=current_access(), run_id=run_id)
    return {"run": run_shape(run), "result": run.result}


TOOLS: list[tuple[Callable[..., Any], str, ToolAnnotations]] = [
    (remember, "remember", WRITES),
    (add_facts, "add_facts", WRITES),
    (search, "search", READ_ONLY),
    (get_context, "get_context", READ_ONLY),
    (get_entity, "get_entity", READ_ONLY),
    (find_facts, "find_facts", READ_ONLY),
    (get_vocabulary, "get_vocabulary", READ_ONLY),
    (canonicalize_predicate, "canonicalize_predicate", READ_ONLY),
    (correct_fact, "correct_fact", WRITES),
    (retract_fact, "retract_fact", DESTRUCTIVE),
    (get_run, "get_run", READ_ONLY),
]

__all__ = ["TOOLS", "bind_access", "current_access"]
