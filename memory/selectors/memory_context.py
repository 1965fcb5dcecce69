"""A prompt-ready memory block: what the memory knows about a query and/or an entity,
within a token budget. One reader for ``POST context`` and the MCP ``get_context`` tool.

- Facts: the current facts of the focus entities (the one asked for, else the entities
  the query finds) and the facts the query finds, ordered by the ranking formula
  (confidence × 0.5^(age/90 d) × ranking_weight × (0.3 + 1.4 × importance); under 0.2
  confidence dropped).
- Passages: the best chunks (and turns, where the store has them) for the query, or for
  the entity's name when only an entity is given.
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

from memory.access import ContextAccess
from memory.errors import ServiceUnavailable, ValidationFailed
from memory.models import Entity, Fact, FactStatus
from memory.selectors.entity_lookup import resolve_entity_name
from memory.selectors.facts import (
    RANK_MIN_CONFIDENCE,
    entity_facts_ranked,
    fact_rank_score,
    facts_visible,
)
from memory.selectors.search import (
    MAX_QUERY_CHARS,
    QueryVector,
    SearchResult,
    query_vector_start,
    search,
)

DEFAULT_BUDGET_TOKENS = 1500
MIN_BUDGET_TOKENS = 100
MAX_BUDGET_TOKENS = 16_000
CHARS_PER_TOKEN = 4
FACT_SHARE = 0.6  # of the budget, before passages; what passages leave goes back to facts
FOCUS_ENTITIES = 2  # entities a query names that become focus entities
FACTS_PER_ENTITY = 40
QUERY_FACTS = 20
PASSAGES = 8
MAX_VALUE_CHARS_IN_LINE = 300
MIN_PASSAGE_TOKENS = 30  # a passage cut shorter than this is left out instead


@dataclass
class ContextLine:
    kind: str  # "fact" | "chunk" | "turn"
    id: int
    scope: str
    line: str
    tokens: int
    score: float
    data: dict[str, Any]


@dataclass
class MemoryContext:
    context: str
    query: str
    focus: list[Entity]
    facts: list[ContextLine]
    passages: list[ContextLine]
    budget_tokens: int
    used_tokens: int = 0
    left_out: int = 0  # candidates that did not fit the budget
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
) -> MemoryContext:
    """The memory block for ``query`` and/or ``entity`` within ``budget_tokens``.

    ``scopes`` (patterns ``P``, ``P/*``) narrow the caller's read grants for every part.
    When the embedding model is down, a hybrid or vector ``mode`` falls back to BM25 and
    a note says so (the block is still useful; a search would answer 503).
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
    finder = _Finder(access=access, mode=mode, notes=block.notes)
    if query:
        finder.embed_early(query)  # while the focus entities are looked up
    if entity is not None:
        block.focus = [resolve_entity_name(access=access, ref=entity).entity]
    elif query:
        block.focus = finder.entities(query)
    fact_lines = _fact_lines(access, focus=block.focus, query=query, finder=finder)
    passage_query = query or (block.focus[0].name if block.focus else "")
    passage_lines = finder.passages(passage_query) if passage_query else []
    _fit(block, fact_lines, passage_lines)
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
    vectors: dict[str, QueryVector] = field(default_factory=dict)

    def embed_early(self, query: str) -> None:
        if self.mode != "bm25":
            self._vector(query)

    def _vector(self, query: str) -> QueryVector:
        if query not in self.vectors:
            self.vectors[query] = query_vector_start(query)
        return self.vectors[query]

    def _search(
        self, query: str, target: str, k: int, mode: str | None = None
    ) -> list[SearchResult]:
        mode = mode or self.mode
        try:
            return search(
                access=self.access,
                query=query,
                mode=mode,
                k=k,
                target=target,
                query_vector=self._vector(query) if mode != "bm25" else None,
            ).results
        except ServiceUnavailable as exc:
            if self.mode == "bm25" or exc.code != "embedder_unavailable":
                raise
            self.mode = "bm25"
            self.notes.append(f"{exc.message.split(';')[0]}: found by BM25 only")
            return self._search(query, target, k)

    def entities(self, query: str) -> list[Entity]:
        # Names are words: BM25 finds the entities a query names, without a second
        # embedding of the query.
        ids = [r.id for r in self._search(query, "entities", FOCUS_ENTITIES, mode="bm25")]
        found = {
            e.pk: e
            for e in Entity.objects.filter(pk__in=ids, merged_into__isnull=True).defer("embedding")
        }
        return [found[i] for i in ids if i in found]

    def fact_ids(self, query: str) -> list[int]:
        return [r.id for r in self._search(query, "facts", QUERY_FACTS)]

    def passages(self, query: str) -> list[ContextLine]:
        results = self._search(query, "chunks", PASSAGES)
        results += self._search(query, "turns", PASSAGES)
        # Chunks and turns score on one scale per mode (RRF, BM25 or cosine).
        results.sort(key=lambda r: -r.score)
        return [_passage_line(r) for r in results[:PASSAGES]]


def _fact_lines(
    access: ContextAccess, *, focus: list[Entity], query: str, finder: _Finder
) -> list[ContextLine]:
    now = timezone.now()
    scored: dict[int, tuple[Fact, float]] = {}
    for entity in focus:
        for ranked in entity_facts_ranked(access=access, entity=entity, limit=FACTS_PER_ENTITY):
            scored[ranked.fact.pk] = (ranked.fact, ranked.score)
    if query:
        found = (
            facts_visible(access=access)
            .filter(
                pk__in=finder.fact_ids(query),
                status=FactStatus.CURRENT,
                confidence__gte=RANK_MIN_CONFIDENCE,
            )
            .exclude(pk__in=list(scored))
            .select_related("subject", "object", "predicate")
        )
        for fact in found:
            scored[fact.pk] = (fact, fact_rank_score(fact, now=now))
    best = sorted(scored.values(), key=lambda item: (-item[1], -item[0].pk))
    return [_fact_line(fact, score) for fact, score in best]


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
        {"meta": result.meta, "text": text, "prefix": prefix},
    )


def _fit(block: MemoryContext, facts: list[ContextLine], passages: list[ContextLine]) -> None:
    """Facts up to their share of the budget, then passages, then facts again with
    whatever the passages left; a passage too long for the room left is cut."""
    room = block.budget_tokens - estimate_tokens(_render(block)) - 2 * 8  # section headings
    fact_room = int(room * FACT_SHARE)
    pending = list(facts)
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
            block.left_out += 1
    while pending and pending[0].tokens <= room:
        line = pending.pop(0)
        block.facts.append(line)
        room -= line.tokens
    block.left_out += len(pending)


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
    if block.facts:
        lines += ["## Facts (best first)", *(f.line for f in block.facts)]
    if block.passages:
        lines += ["## Passages", *(p.line for p in block.passages)]
    if not block.facts and not block.passages:
        lines.append("Nothing in memory matches.")
    return "\n".join(lines)


def memory_context_data(block: MemoryContext) -> dict[str, Any]:
    """The block as plain JSON data (the REST answer and the MCP tool's structured result)."""

    def item(line: ContextLine) -> dict[str, Any]:
        data = {k: v for k, v in line.data.items() if k != "prefix"}
        if line.kind != "fact":
            data = {"text": line.line.removeprefix(line.data["prefix"]), "meta": data["meta"]}
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
        "passages": [item(p) for p in block.passages],
        "budget_tokens": block.budget_tokens,
        "used_tokens": block.used_tokens,
        "left_out": block.left_out,
        "notes": block.notes,
    }
