"""The MCP tools that read: ``search``, ``get_context``, ``get_entity``, ``find_facts``,
``get_vocabulary``, ``canonicalize_predicate`` and ``get_run``. Each calls the selector the
REST API calls, with the token's read grants, and answers small self-describing records
(ids, scopes, provenance; ``memory.mcp.shapes``)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import Field

from memory.mcp.arguments import (
    MAX_FIND_FACTS,
    MAX_TEXT_CHARS,
    MAX_TOOL_K,
    NO_NUL,
    EntityRef,
    Predicate,
    Scope,
    ScopeFilters,
)
from memory.mcp.calls import as_tool, current_access
from memory.mcp.shapes import (
    entity_card_shape,
    entity_ref,
    fact_shape,
    run_shape,
    search_result_shape,
)
from memory.models.turn import MAX_THREAD_CHARS
from memory.selectors import search as search_selectors
from memory.selectors.entity_card import entity_card
from memory.selectors.entity_lookup import resolve_entity_name
from memory.selectors.facts import fact_list
from memory.selectors.memory_context import (
    DEFAULT_BUDGET_TOKENS,
    MAX_BUDGET_TOKENS,
    MIN_BUDGET_TOKENS,
    memory_context,
    memory_context_data,
)
from memory.selectors.predicates import predicate_canonicalize
from memory.selectors.runs import run_get
from memory.selectors.search import ALL_TARGET, MAX_QUERY_CHARS, MODES, TARGET_CHOICES
from memory.selectors.vocabulary_view import vocabulary_listing


@as_tool
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
        str | None,
        Field(
            description="what to search: all (the default: turns, chunks and facts, each "
            "result typed), chunks, turns, facts or entities; with `thread`, turns",
            json_schema_extra={"enum": list(TARGET_CHOICES)},
        ),
    ] = None,
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
    include_pending: Annotated[
        bool,
        Field(description="also facts waiting for review (marked trust: pending)"),
    ] = False,
) -> dict[str, Any]:
    """Search the memory: by default everything it holds — remembered turns, document
    chunks and facts — each result with its `type` (turn, chunk, fact). Each result says
    why it ranked: its BM25 and vector rank and score, the fused score and the graph
    boost."""
    response = search_selectors.search(
        access=current_access(),
        query=query,
        mode=mode,
        k=k,
        scopes=scope,
        target=target or ("turns" if thread else ALL_TARGET),
        thread=thread,
        include_pending=include_pending,
    )
    return {
        "results": [search_result_shape(r) for r in response.results],
        "took_ms": response.took_ms,
    }


@as_tool
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
    explain: Annotated[
        bool, Field(description="each line's data says why it is in the block")
    ] = False,
    include_pending: Annotated[
        bool,
        Field(
            description="also facts waiting for review, under their own heading "
            "(Unconfirmed): claims nobody has confirmed"
        ),
    ] = False,
) -> tuple[str, dict[str, Any]]:
    """A prompt-ready memory block for a query and/or an entity: the facts that answer
    the question first (the entities it names, the relation it asks about, the kind of
    answer it wants, then search relevance; for an entity alone, ranked by confidence,
    recency, predicate weight and importance) and the passages that match, each line with
    its id, scope and source, within `budget_tokens`. Lines unrelated to the question are
    left out (`left_out`, with the reason in `notes`), and so are facts about other
    entities than the ones it names; when nothing trusted is known about a named entity,
    one line says so (`nothing_trusted`). The text goes straight into a
    prompt; the structured result holds the same lines as data."""
    block = memory_context(
        access=current_access(),
        query=query,
        entity=entity,
        budget_tokens=budget_tokens,
        scopes=scope,
        mode=mode,
        explain=explain,
        include_pending=include_pending,
    )
    return block.text, memory_context_data(block)


@as_tool
def get_entity(
    entity: EntityRef,
    facts: Annotated[int, Field(description="how many ranked facts", ge=0, le=100)] = 20,
) -> dict[str, Any]:
    """An entity with its aliases, identifiers, best current facts (ranked) and
    neighbours (entities joined to it by current relations, both directions). `entity`
    may be an id or any of its names."""
    card = entity_card(access=current_access(), ref=entity, facts_limit=facts)
    return entity_card_shape(card)


@as_tool
def find_facts(
    subject: Annotated[EntityRef | None, Field(description="the subject entity")] = None,
    predicate: Annotated[Predicate | None, Field(description="in any form")] = None,
    object: Annotated[EntityRef | None, Field(description="the object entity")] = None,
    as_of: Annotated[
        datetime | None,
        Field(description="ISO date-time: the facts that were current then"),
    ] = None,
    valid_at: Annotated[
        datetime | None,
        Field(description="ISO date-time: the facts that held then, whenever recorded"),
    ] = None,
    include_superseded: Annotated[
        bool, Field(description="also superseded, expired and retracted facts")
    ] = False,
    limit: Annotated[int, Field(description="at most this many", ge=1, le=MAX_FIND_FACTS)] = 50,
    include_pending: Annotated[
        bool,
        Field(description="also facts waiting for review (marked trust: pending)"),
    ] = False,
) -> dict[str, Any]:
    """Facts by subject, predicate (any form: worksAt finds works_at) and object, newest
    first; current ones unless `as_of`, `valid_at` or `include_superseded` says otherwise."""
    access = current_access()
    subject_entity = resolve_entity_name(access=access, ref=subject).entity if subject else None
    object_entity = resolve_entity_name(access=access, ref=object).entity if object else None
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
            valid_at=valid_at,
            include_superseded=include_superseded,
            include_pending=include_pending,
        )[: limit + 1]
    )
    return {
        "subject": entity_ref(subject_entity) if subject_entity else None,
        "predicate": canonical,
        "object": entity_ref(object_entity) if object_entity else None,
        "facts": [fact_shape(f) for f in facts[:limit]],
        "more": len(facts) > limit,
    }


@as_tool
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


@as_tool
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


@as_tool
def get_run(
    run_id: Annotated[int, Field(description="the run's id (from remember/add_facts)", ge=1)],
) -> dict[str, Any]:
    """One ingest run: its outcome, error and result (what it created, matched,
    superseded), as far as it has got."""
    run = run_get(access=current_access(), run_id=run_id)
    return {"run": run_shape(run), "result": run.result}
