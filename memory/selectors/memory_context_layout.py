"""The memory block's layout: each record as a line that cites it (its id, scope and
source), the fit of the lines into the token budget (the facts that answer first, a
passage too long cut), the rendered text.

Tokens are estimated as characters / 4 (no tokenizer ships offline): an estimate, rounded
up per line, so the block stays under the budget for English text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from memory.models import Entity, Fact, FactTrust
from memory.selectors.search_results import SearchResult

CHARS_PER_TOKEN = 4
FACT_SHARE = 0.6  # of the budget, before passages; what passages leave goes back to facts
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
    shares: bool = True  # shares something with the question (else: padding)
    # About an entity the question names (or found through one, or naming one by its
    # name): a fact about others only because it shares a word is padding.
    in_focus: bool = True
    answers: bool = False  # a fact that answers the question: placed before passages


@dataclass(frozen=True)
class NothingTrusted:
    """A named entity of which no trusted fact is known: the block says so, and how many
    of its facts (that the caller may read) wait for review — never what they claim."""

    entity: Entity
    awaiting_review: int

    def line(self) -> str:
        waiting = ""
        if self.awaiting_review == 1:
            waiting = " (1 fact awaits review)"
        elif self.awaiting_review:
            waiting = f" ({self.awaiting_review} facts await review)"
        return f"Nothing trusted is known about {self.entity.name} yet{waiting}."


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
    nothing_trusted: list[NothingTrusted] = field(default_factory=list)
    used_tokens: int = 0
    left_out: int = 0  # candidates left out: unrelated to the question or over budget
    left_out_unrelated: int = 0
    left_out_others: int = 0  # about entities other than the named ones
    left_out_budget: int = 0
    notes: list[str] = field(default_factory=list)
    text: str = ""


def estimate_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


def _line_tokens(line: str) -> int:
    return estimate_tokens(line + "\n")  # the newline that joins it to the block


def _source(fact: Fact) -> str:
    if fact.turn_id:
        return f"turn {fact.turn_id} (run {fact.run_id})" if fact.run_id else f"turn {fact.turn_id}"
    if fact.run_id:
        return f"run {fact.run_id}"
    if fact.document_id:
        return f"document {fact.document_id}"
    return f"{fact.source_kind} {fact.source_ref!r}" if fact.source_ref else fact.source_kind


def fact_line(fact: Fact, score: float) -> ContextLine:
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


def passage_line(result: SearchResult) -> ContextLine:
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


def lines_fit(block: MemoryContext, facts: list[ContextLine], passages: list[ContextLine]) -> None:
    """The facts that answer first (several distinct answers before one long passage),
    then the other facts up to their share of the budget, then passages, then facts again
    with whatever the passages left; a passage too long for the room left is cut."""
    room = block.budget_tokens - estimate_tokens(block_render(block)) - 2 * 8  # section headings
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


def block_render(block: MemoryContext) -> str:
    about = []
    if block.focus:
        about.append(", ".join(f"{e.name} (entity {e.pk})" for e in block.focus))
    if block.query:
        about.append(f"query {block.query!r}")
    lines = [f"# Memory context ({block.context}): {'; '.join(about)}"]
    lines += [unknown.line() for unknown in block.nothing_trusted]
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
    if not (block.facts or block.unconfirmed or block.passages or block.nothing_trusted):
        lines.append("Nothing in memory matches.")
    return "\n".join(lines)
