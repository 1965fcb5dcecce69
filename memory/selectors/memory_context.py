"""A prompt-ready memory block: what the memory knows about a query and/or an entity,
within a token budget. One reader for ``POST context`` and the MCP ``get_context`` tool.

- Facts, for a query: the entities it names are linked (names, aliases, identifiers, small
  slips; ``memory.selectors.entity_linking``), and their facts, their neighbours' facts
  for a relation question and the facts the query finds are ordered by how well each
  answers it (``memory.selectors.fact_relevance``); the ranking formula only breaks ties.
  For an entity alone: its current facts by the ranking formula (confidence ×
  0.5^(age/90 d) × ranking_weight × (0.3 + 1.4 × importance); under 0.2 confidence
  dropped).
- Passages: the best chunks and turns for the query, or for the entity's name when only
  an entity is given.
- No padding: a fact that shares nothing with the question and a passage found by vector
  similarity alone below the floor are left out and counted in ``left_out``; the facts
  that answer go in before any passage.
- Focus: once the question names an entity, facts about others only where they answer
  through it, and one line when nothing trusted is known about it
  (``memory_context_focus``).
- Every line names its record (id), its scope and its source, so an agent can cite it or
  come back to it; the same lines come back as data.

The lines and their fit into the budget are ``memory_context_layout``; the block's
searches, ``memory_context_search``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.utils import timezone

from memory.domain.access import ContextAccess
from memory.kernel.errors import ValidationFailed
from memory.models import Entity, FactTrust
from memory.selectors.entity_linking import EntityLink, entities_linked
from memory.selectors.entity_lookup import resolve_entity_name
from memory.selectors.fact_relevance import (
    cosines_fill,
    fact_candidates,
    fact_relevance,
    predicate_matches,
    shares_with_question,
)
from memory.selectors.facts import entity_facts_ranked
from memory.selectors.memory_context_focus import in_focus, named_keys, nothing_trusted
from memory.selectors.memory_context_layout import (
    ContextLine,
    MemoryContext,
    block_render,
    estimate_tokens,
    fact_line,
    lines_fit,
)
from memory.selectors.memory_context_search import BlockFinder
from memory.selectors.question import Span, question_read
from memory.selectors.search import MAX_QUERY_CHARS

DEFAULT_BUDGET_TOKENS = 1500
MIN_BUDGET_TOKENS = 100
MAX_BUDGET_TOKENS = 16_000
FACTS_PER_ENTITY = 40
# Below this cosine, a fact that shares no word with the question is unrelated text
# (all-MiniLM-L6-v2 puts unrelated sentences under ~0.3).
FACT_MIN_COSINE = 0.45
# A fact at least this relevant answers the question even without a predicate match
# (a named entity and the answer type asked for, or close in meaning).
ANSWERING_RELEVANCE = 2.0
ANSWERING_PREDICATE = 0.5  # a predicate match this good answers (half its words asked)


def memory_context(
    *,
    access: ContextAccess,
    query: str | None = None,
    entity: int | str | None = None,
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
    scopes: list[str] | None = None,
    mode: str = "hybrid",
    explain: bool = False,
    include_pending: bool = False,
) -> MemoryContext:
    """The memory block for ``query`` and/or ``entity`` within ``budget_tokens``.

    Trusted facts only; with ``include_pending`` the pending ones too, in a section of
    their own ("Unconfirmed").

    ``scopes`` (patterns ``P``, ``P/*``) narrow the caller's read grants for every part.
    When the embedding model is down, a hybrid or vector ``mode`` falls back to BM25 and
    a note says so (the block is still useful; a search would answer 503). With
    ``explain``, each line's data says why it is there.
    """
    query = (query or "").strip()
    if not query and entity is None:
        raise ValidationFailed("give a query, an entity or both", code="missing_query")
    if len(query) > MAX_QUERY_CHARS:
        raise ValidationFailed(
            f"query can have at most {MAX_QUERY_CHARS} characters", code="invalid_query"
        )
    if not MIN_BUDGET_TOKENS <= budget_tokens <= MAX_BUDGET_TOKENS:
        raise ValidationFailed(
            f"budget_tokens must be between {MIN_BUDGET_TOKENS} and {MAX_BUDGET_TOKENS}",
            code="invalid_budget_tokens",
        )
    if scopes:
        access = replace(access, grants=access.grants.narrowed(scopes))
    block = MemoryContext(
        context=access.context.slug,
        query=query,
        focus=[],
        facts=[],
        passages=[],
        budget_tokens=budget_tokens,
    )
    finder = BlockFinder(
        access=access, mode=mode, notes=block.notes, include_pending=include_pending
    )
    if query:
        finder.embed_early(query)  # while the named entities are looked up
    asked = resolve_entity_name(access=access, ref=entity).entity if entity is not None else None
    if query:
        fact_lines, links = _answering_fact_lines(
            access, query=query, asked=asked, finder=finder, prefer_scope=_own_scope(scopes)
        )
        block.focus = [link.entity for link in links]
        _note_other_matches(block, links)
    else:
        assert asked is not None
        block.focus = [asked]
        fact_lines = _entity_fact_lines(access, asked, include_pending=include_pending)
    block.nothing_trusted = nothing_trusted(access=access, entities=block.focus, lines=fact_lines)
    passage_query = query or block.focus[0].name
    passage_lines = finder.passages(passage_query)
    fact_lines, passage_lines = _floor(block, fact_lines, passage_lines, finder=finder)
    lines_fit(block, fact_lines, passage_lines)
    block.unconfirmed = [f for f in block.facts if f.data["trust"] != FactTrust.TRUSTED]
    block.facts = [f for f in block.facts if f.data["trust"] == FactTrust.TRUSTED]
    _note_left_out(block)
    if not explain:
        for line in block.facts + block.passages:
            line.data.pop("explain", None)
    block.text = block_render(block)
    block.used_tokens = estimate_tokens(block.text)
    return block


def _own_scope(scopes: list[str] | None) -> str | None:
    """The one scope a request narrows to (``P`` or ``P/*``): the names it means first."""
    if scopes and len(scopes) == 1:
        return scopes[0].removesuffix("/*")
    return None


def _answering_fact_lines(
    access: ContextAccess,
    *,
    query: str,
    asked: Entity | None,
    finder: BlockFinder,
    prefer_scope: str | None,
) -> tuple[list[ContextLine], list[EntityLink]]:
    """The candidate facts for a question, best answer first (fact_relevance)."""
    question = question_read(query)
    links = entities_linked(access=access, question=question, prefer_scope=prefer_scope)
    if asked is not None and asked.pk not in {link.entity.pk for link in links}:
        links.insert(0, EntityLink(entity=asked, span=Span(0, 0, asked.name, ""), by="name"))
    covered = {i for link in links for i in range(link.span.start, link.span.end)}
    matches = predicate_matches(access=access, terms=question.terms_outside(covered))
    candidates = fact_candidates(
        access=access,
        links=links,
        matches=matches,
        found=finder.facts_found(query),
        now=timezone.now(),
        include_pending=finder.include_pending,
    )
    cosines_fill(candidates, finder.embedding(query))
    ranked = fact_relevance(candidates, question=question, links=links, matches=matches)
    keys = named_keys(links)
    lines = []
    for candidate in ranked:
        line = fact_line(candidate.fact, candidate.relevance)
        line.data["explain"] = candidate.explain
        line.shares = shares_with_question(candidate, min_cosine=FACT_MIN_COSINE)
        line.in_focus = in_focus(candidate, keys)
        predicate = candidate.explain.get("predicate") or {}
        line.answers = predicate.get("score", 0.0) >= ANSWERING_PREDICATE or (
            candidate.relevance >= ANSWERING_RELEVANCE
        )
        lines.append(line)
    return lines, links


def _entity_fact_lines(
    access: ContextAccess, entity: Entity, *, include_pending: bool
) -> list[ContextLine]:
    """With no question, the entity's facts by the ranking formula."""
    lines = []
    for ranked in entity_facts_ranked(
        access=access, entity=entity, limit=FACTS_PER_ENTITY, include_pending=include_pending
    ):
        line = fact_line(ranked.fact, ranked.score)
        line.data["explain"] = {"prior": round(ranked.score, 4), "why": "a fact of the entity"}
        lines.append(line)
    return lines


def _floor(
    block: MemoryContext,
    facts: list[ContextLine],
    passages: list[ContextLine],
    *,
    finder: BlockFinder,
) -> tuple[list[ContextLine], list[ContextLine]]:
    """Leave out the facts that share nothing with the question and, when it names an
    entity, the facts about others (the search already left out passages found by vector
    similarity alone, below the floor)."""
    related = [f for f in facts if f.shares]
    kept = [f for f in related if f.in_focus]
    block.left_out_unrelated = len(facts) - len(related) + finder.hidden_passages
    block.left_out_others = len(related) - len(kept)
    block.left_out += block.left_out_unrelated + block.left_out_others
    return kept, passages


def _note_other_matches(block: MemoryContext, links: list[EntityLink]) -> None:
    for link in links:
        if link.other_matches:
            others = ", ".join(f"{e.name} (entity {e.pk}, {e.scope})" for e in link.other_matches)
            block.notes.append(
                f"{link.span.text!r} also names {others}: ask for one by id as `entity`"
            )


def _note_left_out(block: MemoryContext) -> None:
    if block.left_out_unrelated:
        block.notes.append(
            f"{block.left_out_unrelated} left out: they share nothing with the question"
        )
    if block.left_out_others:
        named = ", ".join(e.name for e in block.focus)
        block.notes.append(f"{block.left_out_others} left out: about others than {named}")
    if block.left_out_budget:
        block.notes.append(f"{block.left_out_budget} left out: over the token budget")


def memory_context_data(block: MemoryContext) -> dict[str, Any]:
    """The block as plain JSON data (the REST answer and the MCP tool's structured result)."""

    def item(line: ContextLine) -> dict[str, Any]:
        data = {k: v for k, v in line.data.items() if k != "prefix"}
        if line.kind != "fact":
            data = {
                "text": line.line.removeprefix(line.data["prefix"]),
                "meta": data["meta"],
                **({"explain": data["explain"]} if "explain" in data else {}),
            }
        return {
            "type": line.kind,
            "id": line.id,
            "scope": line.scope,
            "score": line.score,
            "line": line.line,
            **data,
        }

    return {
        "context": block.context,
        "query": block.query,
        "entities": [
            {"id": e.pk, "name": e.name, "type": e.type, "scope": e.scope} for e in block.focus
        ],
        "text": block.text,
        "facts": [item(f) for f in block.facts],
        "unconfirmed": [item(f) for f in block.unconfirmed],
        "nothing_trusted": [
            {"id": n.entity.pk, "name": n.entity.name, "awaiting_review": n.awaiting_review}
            for n in block.nothing_trusted
        ],
        "passages": [item(p) for p in block.passages],
        "budget_tokens": block.budget_tokens,
        "used_tokens": block.used_tokens,
        "left_out": block.left_out,
        "notes": block.notes,
    }
