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
- Every line names its record (id), its scope and its source, so an agent can cite it or
  come back to it; the same lines come back as data.

Tokens are estimated as characters / 4 (no tokenizer ships offline): an estimate, rounded
up per line, so the block stays under the budget for English text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from django.utils import timezone

from memory.domain.access import ContextAccess
from memory.kernel.errors import ServiceUnavailable, ValidationFailed
from memory.models import Entity, Fact, FactTrust, Turn
from memory.search.fusion import rrf_fuse
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
from memory.selectors.question import Span, question_read
from memory.selectors.search import (
    MAX_QUERY_CHARS,
    QueryVector,
    SearchResponse,
    SearchResult,
    query_vector_start,
    search,
)

DEFAULT_BUDGET_TOKENS = 1500
MIN_BUDGET_TOKENS = 100
MAX_BUDGET_TOKENS = 16_000
CHARS_PER_TOKEN = 4
FACT_SHARE = 0.6  # of the budget, before passages; what passages leave goes back to facts
FACTS_PER_ENTITY = 40
QUERY_FACTS = 20
PASSAGES = 20  # candidates of each kind (chunks, turns); the budget decides how many fit
MAX_VALUE_CHARS_IN_LINE = 300
MIN_PASSAGE_TOKENS = 30  # a passage cut shorter than this is left out instead
# The floors: below these cosines, a fact or passage that shares no word with the
# question is unrelated text (all-MiniLM-L6-v2 puts unrelated sentences under ~0.3).
FACT_MIN_COSINE = 0.45
PASSAGE_MIN_COSINE = 0.3
# A fact at least this relevant answers the question even without a predicate match
# (a named entity and the answer type asked for, or close in meaning).
ANSWERING_RELEVANCE = 2.0
ANSWERING_PREDICATE = 0.5  # a predicate match this good answers (half its words asked)


@dataclass
class ContextLine:
    kind: str  # "fact" | "chunk" | "turn"
    id: int
    scope: str
    line: str
    tokens: int
    score: float
    data: dict[str, Any]
    shares: bool = True  # shares something with the question (else: padding)
    answers: bool = False  # a fact that answers the question: placed before passages


@dataclass
class MemoryContext:
    context: str
    query: str
    focus: list[Entity]
    facts: list[ContextLine]
    passages: list[ContextLine]
    budget_tokens: int
    # Pending facts (asked for with include_pending): under their own heading, never
    # among the facts.
    unconfirmed: list[ContextLine] = field(default_factory=list)
    used_tokens: int = 0
    left_out: int = 0  # candidates left out: unrelated to the question or over budget
    left_out_unrelated: int = 0
    left_out_budget: int = 0
    notes: list[str] = field(default_factory=list)
    text: str = ""


def estimate_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


def _line_tokens(line: str) -> int:
    return estimate_tokens(line + "\n")  # the newline that joins it to the block


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
    finder = _Finder(access=access, mode=mode, notes=block.notes, include_pending=include_pending)
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
    passage_query = query or block.focus[0].name
    passage_lines = finder.passages(passage_query)
    fact_lines, passage_lines = _floor(block, fact_lines, passage_lines, finder=finder)
    _fit(block, fact_lines, passage_lines)
    block.unconfirmed = [f for f in block.facts if f.data["trust"] != FactTrust.TRUSTED]
    block.facts = [f for f in block.facts if f.data["trust"] == FactTrust.TRUSTED]
    _note_left_out(block)
    if not explain:
        for line in block.facts + block.passages:
            line.data.pop("explain", None)
    block.text = _render(block)
    block.used_tokens = estimate_tokens(block.text)
    return block


@dataclass
class _Finder:
    """Searches for the block, falling back to BM25 once if the embedder is down. The
    facts, chunks and turns searches of one query share one embedding of it."""

    access: ContextAccess
    mode: str
    notes: list[str]
    include_pending: bool = False
    vectors: dict[str, QueryVector] = field(default_factory=dict)
    hidden_passages: int = 0  # found by vector similarity alone, below the floor

    def embed_early(self, query: str) -> None:
        if self.mode != "bm25":
            self._vector(query)

    def _vector(self, query: str) -> QueryVector:
        if query not in self.vectors:
            self.vectors[query] = query_vector_start(query)
        return self.vectors[query]

    def embedding(self, query: str) -> list[float] | None:
        """The query's embedding, or None in bm25 mode or with the embedder down."""
        if self.mode == "bm25":
            return None
        try:
            return self._vector(query).pending.result()[0]
        except Exception:  # the searches report the embedder's failure in the notes
            return None

    def _search(
        self,
        query: str,
        target: str,
        k: int,
        mode: str | None = None,
        floor: float | None = None,
        ranked_only: bool = False,
    ) -> SearchResponse:
        mode = mode or self.mode
        try:
            return search(
                access=self.access,
                query=query,
                mode=mode,
                k=k,
                target=target,
                query_vector=self._vector(query) if mode != "bm25" else None,
                vector_floor=floor,
                include_pending=self.include_pending,
                ranked_only=ranked_only,
            )
        except ServiceUnavailable as exc:
            if self.mode == "bm25" or exc.code != "embedder_unavailable":
                raise
            self.mode = "bm25"
            self.notes.append(f"{exc.message.split(';')[0]}: found by BM25 only")
            return self._search(query, target, k, floor=floor, ranked_only=ranked_only)

    def facts_found(self, query: str) -> dict[int, float]:
        """The facts the query finds, each with its BM25 score over the best one's (0
        when only the vector found it)."""
        # Ids and scores only: fact_candidates reads the facts it keeps.
        results = self._search(query, "facts", QUERY_FACTS, ranked_only=True).results
        bm25 = {r.id: r.explain.bm25.score for r in results if r.explain.bm25 is not None}
        if self.mode == "bm25":
            bm25 = {r.id: r.score for r in results}
        top = max(bm25.values(), default=0.0) or 1.0
        return {r.id: bm25.get(r.id, 0.0) / top for r in results}

    def passages(self, query: str) -> list[ContextLine]:
        chunks = self._search(query, "chunks", PASSAGES, floor=PASSAGE_MIN_COSINE)
        turns = self._search(query, "turns", PASSAGES, floor=PASSAGE_MIN_COSINE)
        self.hidden_passages += chunks.hidden + turns.hidden
        # A turn screening flagged (an instruction, a secret) is never pasted into what an
        # agent is told: its claims wait for review, and its words stay out too.
        flagged = set(
            Turn.objects.filter(pk__in=[r.id for r in turns.results])
            .exclude(flags=[])
            .values_list("pk", flat=True)
        )
        turns.results[:] = [r for r in turns.results if r.id not in flagged]
        # Chunks and turns score on scales of their own (turns add their windows): they
        # take turns by rank, the closer in meaning first at the same rank.
        keyed = {(r.type, r.id): r for r in chunks.results + turns.results}
        fused = rrf_fuse([[(r.type, r.id) for r in found.results] for found in (chunks, turns)])
        order = sorted(fused, key=lambda key: (-fused[key], -_cosine(keyed[key]), key))
        return [_passage_line(keyed[key]) for key in order]


def _own_scope(scopes: list[str] | None) -> str | None:
    """The one scope a request narrows to (``P`` or ``P/*``): the names it means first."""
    if scopes and len(scopes) == 1:
        return scopes[0].removesuffix("/*")
    return None


def _cosine(result: SearchResult) -> float:
    return result.explain.vector.score if result.explain.vector is not None else -1.0


def _answering_fact_lines(
    access: ContextAccess,
    *,
    query: str,
    asked: Entity | None,
    finder: _Finder,
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
    lines = []
    for candidate in ranked:
        line = _fact_line(candidate.fact, candidate.relevance)
        line.data["explain"] = candidate.explain
        line.shares = shares_with_question(candidate, min_cosine=FACT_MIN_COSINE)
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
        line = _fact_line(ranked.fact, ranked.score)
        line.data["explain"] = {"prior": round(ranked.score, 4), "why": "a fact of the entity"}
        lines.append(line)
    return lines


def _floor(
    block: MemoryContext,
    facts: list[ContextLine],
    passages: list[ContextLine],
    *,
    finder: _Finder,
) -> tuple[list[ContextLine], list[ContextLine]]:
    """Leave out the facts that share nothing with the question (the search already
    left out passages found by vector similarity alone, below the floor)."""
    kept = [f for f in facts if f.shares]
    block.left_out_unrelated = len(facts) - len(kept) + finder.hidden_passages
    block.left_out += block.left_out_unrelated
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
    if block.left_out_budget:
        block.notes.append(f"{block.left_out_budget} left out: over the token budget")


def _source(fact: Fact) -> str:
    if fact.turn_id:
        return f"turn {fact.turn_id} (run {fact.run_id})" if fact.run_id else f"turn {fact.turn_id}"
    if fact.run_id:
        return f"run {fact.run_id}"
    if fact.document_id:
        return f"document {fact.document_id}"
    return f"{fact.source_kind} {fact.source_ref!r}" if fact.source_ref else fact.source_kind


def _fact_line(fact: Fact, score: float) -> ContextLine:
    if fact.object is not None:
        statement = f"{fact.subject.name} {fact.predicate.name} {fact.object.name}"
    else:
        value = fact.value_text
        if len(value) > MAX_VALUE_CHARS_IN_LINE:
            value = value[:MAX_VALUE_CHARS_IN_LINE] + "…"
        statement = f"{fact.subject.name} {fact.predicate.name}: {value}"
    since = f"; since {fact.valid_from.date().isoformat()}" if fact.valid_from else ""
    line = f"- {statement} [fact {fact.pk}; scope {fact.scope}; source {_source(fact)}{since}]"
    data = {
        "id": fact.pk,
        "subject": {"id": fact.subject.pk, "name": fact.subject.name, "type": fact.subject.type},
        "predicate": fact.predicate.name,
        "object": (
            {"id": fact.object.pk, "name": fact.object.name, "type": fact.object.type}
            if fact.object is not None
            else None
        ),
        "value": fact.value if fact.object is None else None,
        "kind": fact.kind,
        "trust": fact.trust,
        "confidence": fact.confidence,
        "valid_from": fact.valid_from.isoformat() if fact.valid_from else None,
        "source": {
            "kind": fact.source_kind,
            "ref": fact.source_ref,
            "run": fact.run_id,
            "document": fact.document_id,
            "turn": fact.turn_id,
        },
    }
    return ContextLine("fact", fact.pk, fact.scope, line, _line_tokens(line), score, data)


def _passage_line(result: SearchResult) -> ContextLine:
    text = " ".join(result.text.split())
    if result.type == "chunk":
        where = f"chunk {result.id} of document {result.meta.get('document_id')}"
        title = result.meta.get("document_title")
        where += f" {title!r}" if title else ""
    elif result.type == "turn":
        meta = result.meta
        where = f"turn {result.id}"
        where += f" by {meta['speaker']}" if meta.get("speaker") else ""
        where += f" in thread {meta['thread']!r}" if meta.get("thread") else ""
        where += f" at {meta['said_at']}" if meta.get("said_at") else ""
    else:
        where = f"{result.type} {result.id}"
    prefix = f"- [{where}; scope {result.scope}] "
    line = prefix + text
    return ContextLine(
        result.type,
        result.id,
        result.scope,
        line,
        _line_tokens(line),
        result.score,
        {"meta": result.meta, "text": text, "prefix": prefix, "explain": _passage_explain(result)},
    )


def _passage_explain(result: SearchResult) -> dict[str, Any]:
    explain = result.explain
    why = []
    if explain.bm25 is not None:
        why.append(f"shares words with the query (BM25 rank {explain.bm25.rank})")
    if explain.vector is not None:
        why.append(f"close in meaning (cosine {explain.vector.score:.2f})")
    if explain.window_boost:
        why.append("next to turns that match")
    return {
        "score": result.score,
        "bm25": round(explain.bm25.score, 4) if explain.bm25 else None,
        "cosine": round(explain.vector.score, 4) if explain.vector else None,
        "why": "; ".join(why) or "found by the search",
    }


def _fit(block: MemoryContext, facts: list[ContextLine], passages: list[ContextLine]) -> None:
    """The facts that answer first (several distinct answers before one long passage),
    then the other facts up to their share of the budget, then passages, then facts again
    with whatever the passages left; a passage too long for the room left is cut."""
    room = block.budget_tokens - estimate_tokens(_render(block)) - 2 * 8  # section headings
    if any(f.data["trust"] != FactTrust.TRUSTED for f in facts):
        room -= 24  # the heading of the unconfirmed section
    fact_room = int(room * FACT_SHARE)
    pending: list[ContextLine] = []
    for line in facts:  # in order: an answer that does not fit leaves room for the next
        if line.answers and line.tokens <= room:
            block.facts.append(line)
            room -= line.tokens
            fact_room -= line.tokens
        else:
            pending.append(line)
    while pending and pending[0].tokens <= fact_room:
        line = pending.pop(0)
        block.facts.append(line)
        fact_room -= line.tokens
        room -= line.tokens
    for passage in passages:
        if passage.tokens <= room:
            block.passages.append(passage)
            room -= passage.tokens
        elif room >= MIN_PASSAGE_TOKENS:
            block.passages.append(_cut(passage, room))
            room = 0
        else:
            block.left_out_budget += 1
    while pending and pending[0].tokens <= room:
        line = pending.pop(0)
        block.facts.append(line)
        room -= line.tokens
    block.left_out_budget += len(pending)
    block.left_out += block.left_out_budget
    # Answers placed first, the rest after: the block lists them by relevance.
    order = {line.id: i for i, line in enumerate(facts)}
    block.facts.sort(key=lambda line: order[line.id])


def _cut(passage: ContextLine, tokens: int) -> ContextLine:
    prefix: str = passage.data["prefix"]
    keep = max(0, tokens * CHARS_PER_TOKEN - len(prefix) - 1)
    line = prefix + passage.data["text"][:keep].rstrip() + "…"
    return replace(passage, line=line, tokens=_line_tokens(line))


def _render(block: MemoryContext) -> str:
    about = []
    if block.focus:
        about.append(", ".join(f"{e.name} (entity {e.pk})" for e in block.focus))
    if block.query:
        about.append(f"query {block.query!r}")
    lines = [f"# Memory context ({block.context}): {'; '.join(about)}"]
    facts = [f for f in block.facts if f.data["trust"] == FactTrust.TRUSTED]
    unconfirmed = [f for f in block.facts + block.unconfirmed if f not in facts]
    if facts:
        lines += ["## Facts (best first)", *(f.line for f in facts)]
    if unconfirmed:
        lines += [
            "## Unconfirmed (pending review: claims nobody has confirmed; do not rely on them)",
            *(f.line for f in unconfirmed),
        ]
    if block.passages:
        lines += ["## Passages", *(p.line for p in block.passages)]
    if not block.facts and not block.unconfirmed and not block.passages:
        lines.append("Nothing in memory matches.")
    return "\n".join(lines)


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
        "passages": [item(p) for p in block.passages],
        "budget_tokens": block.budget_tokens,
        "used_tokens": block.used_tokens,
        "left_out": block.left_out,
        "notes": block.notes,
    }
