"""Which entities a question names: its runs of words compared with entity names, aliases
and identifiers (case, punctuation, possessives and legal suffixes fold away), and, for the
words no name covers, names one small slip away ("Dana Leee", "Dnaa Lee").

A longer name wins over the names inside it ("Project Phoenix" over "Phoenix" of another
entity). Where one name fits several entities, the one resolution rule of entity names
(``memory.selectors.entity_lookup``) picks one and the rest are reported as
``other_matches``. Every read is limited to the caller's read grants.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from django.contrib.postgres.search import SearchQuery, SearchVector
from django.db.models import Q
from rapidfuzz.distance import DamerauLevenshtein

from memory.domain.access import ContextAccess
from memory.kernel.errors import NotFound
from memory.models import Entity, EntityIdentifier
from memory.selectors.entities import entities_visible
from memory.selectors.entity_lookup import resolve_entity_name
from memory.selectors.question import Question, Span

LinkedBy = Literal["id", "name", "alias", "identifier", "key", "slip"]
MAX_LINKED = 4  # entities one question links
MAX_SLIP_CANDIDATES = 200  # entities sharing a word with the question, compared for slips
MIN_SLIP_KEY_CHARS = 5  # shorter names are too easily one slip from another word
_BY_ORDER: dict[str, int] = {"id": 0, "name": 0, "identifier": 1, "alias": 2, "key": 3, "slip": 4}


@dataclass(frozen=True)
class EntityLink:
    entity: Entity
    span: Span
    by: LinkedBy
    other_matches: list[Entity] = field(default_factory=list)


def entities_linked(
    *, access: ContextAccess, question: Question, prefer_scope: str | None = None
) -> list[EntityLink]:
    """The entities ``question`` names, in the order the question names them
    (``prefer_scope``: the caller's scope, which the resolution rule prefers)."""
    spans = question.spans()
    if not spans:
        return []
    exact = _exact_matches(access, spans)
    links: list[EntityLink] = []
    covered: set[int] = set()
    for span in spans:  # longest first: a name inside a linked name is that name's part
        if span.key not in exact or covered & set(range(span.start, span.end)):
            continue
        links.append(_resolve(access, span, exact[span.key], prefer_scope))
        covered |= set(range(span.start, span.end))
    uncovered = [s for s in spans if not covered & set(range(s.start, s.end))]
    if links:  # a name is linked: a slip is looked for only in capitalized words
        uncovered = [s for s in uncovered if _capitalized(question, s)]
    for link in _slips(access, uncovered, linked={link.entity.pk for link in links}):
        if not covered & set(range(link.span.start, link.span.end)):
            links.append(link)
            covered |= set(range(link.span.start, link.span.end))
    links.sort(key=lambda link: link.span.start)
    return _distinct(links)[:MAX_LINKED]


def _capitalized(question: Question, span: Span) -> bool:
    """Whether every word of ``span`` is capitalized (the question's first word aside,
    which is capitalized anyway)."""
    words = question.tokens[span.start : span.end]
    return span.start > 0 and all(w[:1].isupper() for w in words)


def _exact_matches(
    access: ContextAccess, spans: list[Span]
) -> dict[str, list[tuple[Entity, LinkedBy]]]:
    """Each span key's entities by name or alias, and a span's text as an identifier
    (one query each)."""
    keys = sorted({s.key for s in spans})
    found: dict[str, list[tuple[Entity, LinkedBy]]] = {}
    entities = (
        entities_visible(access=access)
        .filter(Q(normalized_key__in=keys) | Q(alias_keys__overlap=keys), merged_into__isnull=True)
        .defer("embedding")
    )
    wanted = set(keys)
    for entity in entities:
        if entity.normalized_key in wanted:
            found.setdefault(entity.normalized_key, []).append((entity, "name"))
        for alias_key in set(entity.alias_keys) & wanted:
            if alias_key != entity.normalized_key:
                found.setdefault(alias_key, []).append((entity, "alias"))
    # An identifier is one token with a character no plain word has (alex@acme.example,
    # acme.example, MLWK3LL/A).
    texts = {
        s.text.casefold(): s.key
        for s in spans
        if len(s.text) >= 3 and " " not in s.text and not s.text.isalpha()
    }
    if texts:
        holders = (
            EntityIdentifier.objects.filter(
                access.grants.read_q(),
                context=access.context,
                value__in=list(texts),
                entity__merged_into__isnull=True,
            )
            .select_related("entity")
            .defer("entity__embedding")
        )
        for identifier in holders[:20]:
            key = texts[identifier.value.casefold()]
            found.setdefault(key, []).append((identifier.entity, "identifier"))
    return found


def _resolve(
    access: ContextAccess,
    span: Span,
    matches: list[tuple[Entity, LinkedBy]],
    prefer_scope: str | None,
) -> EntityLink:
    """The entity a span names by the resolution rule of entity names (exact text before
    a normalized key, the caller's scope, name before alias before identifier, oldest)."""
    try:
        found = resolve_entity_name(access=access, ref=span.text, prefer_scope=prefer_scope)
    except NotFound:  # the span matched only through its key's other spellings
        return _pick(span, matches)
    return EntityLink(
        entity=found.entity, span=span, by=found.matched_by, other_matches=found.other_matches
    )


def _pick(span: Span, matches: list[tuple[Entity, LinkedBy]]) -> EntityLink:
    """One entity for a span several fit without an exact text: a name before an
    identifier before an alias before a slip, then the oldest (a stable order)."""
    ranked = sorted(matches, key=lambda m: (_BY_ORDER[m[1]], m[0].pk))
    best, by = ranked[0]
    others = []
    for entity, _ in ranked[1:]:
        if entity.pk != best.pk and entity not in others:
            others.append(entity)
    return EntityLink(entity=best, span=span, by=by, other_matches=others)


def _slips(access: ContextAccess, spans: list[Span], *, linked: set[int]) -> list[EntityLink]:
    """Names one slip from a span of the question: the entities sharing a word with the
    uncovered spans (a word index), compared span by span of the same number of words."""
    words = sorted({w for s in spans if s.end - s.start == 1 for w in s.key.split()})
    words = [w for w in words if w.isalnum() and len(w) >= 2]
    if not words:
        return []
    query = " | ".join(words)
    candidates = list(
        entities_visible(access=access)
        .filter(merged_into__isnull=True)
        .alias(key_words=SearchVector("normalized_key", config="simple"))
        .filter(key_words=SearchQuery(query, search_type="raw", config="simple"))
        .exclude(pk__in=linked)
        .defer("embedding")
        .order_by("pk")[:MAX_SLIP_CANDIDATES]
    )
    links: list[EntityLink] = []
    for span in spans:
        length = span.end - span.start
        if length < 2 and len(span.key) < MIN_SLIP_KEY_CHARS + 3:
            continue  # one short word: too many real words are a slip from a name
        matches: list[tuple[Entity, LinkedBy]] = []
        for entity in candidates:
            for key in (entity.normalized_key, *entity.alias_keys):
                if len(key.split()) == length and _one_slip(span.key, key):
                    matches.append((entity, "slip"))
                    break
        if matches:
            links.append(_pick(span, matches))
    return links


def _one_slip(typed: str, key: str) -> bool:
    """``typed`` is ``key`` with one slip (two for names of twelve characters or more):
    a letter missing, added, replaced, or two neighbours swapped."""
    if typed == key or len(key) < MIN_SLIP_KEY_CHARS or typed[:1] != key[:1]:
        return False
    allowed = 2 if len(key) >= 12 else 1
    return DamerauLevenshtein.distance(typed, key, score_cutoff=allowed) <= allowed


def _distinct(links: list[EntityLink]) -> list[EntityLink]:
    seen: set[int] = set()
    kept = []
    for link in links:
        if link.entity.pk not in seen:
            seen.add(link.entity.pk)
            kept.append(link)
    return kept
