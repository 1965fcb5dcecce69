"""Facts ranked by how well each answers a question.

Candidates (``fact_candidates``, the one place that decides which facts may answer):
the current facts of the entities the question names, as subject or object (the facts
whose predicate the question asks about first); where the question asks about a relation,
the facts of those entities' neighbours that have such a predicate, each neighbour reached
through such a predicate too (one hop); and the facts the query finds by BM25 and vectors.

Each candidate's relevance (``fact_relevance``) adds up what it shares with the question:

- the predicate: the question's words against its registered name, aliases (inverse ones
  too) and description ("leads", "report to", "allergic", "live");
- the named entities it mentions (a neighbour's fact counts less);
- the type of the answer against what the question asks for (who → person, where →
  location, which company → organisation; when, how many → a value);
- the search: its BM25 match and its cosine similarity to the question;
- the ranking formula (confidence × recency × weight × importance), a small prior that
  only breaks ties.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Case, IntegerField, Q, QuerySet, Value, When
from pgvector.django import CosineDistance

from memory.domain.access import ContextAccess
from memory.models import Entity, Fact, FactKind, Predicate, PredicateAlias, fact_live_q
from memory.search.analyzer import analyze
from memory.search.models import FactVector
from memory.selectors.entity_linking import EntityLink
from memory.selectors.facts import RANK_MIN_CONFIDENCE, fact_rank_score, facts_visible, trust_q
from memory.selectors.question import Question

LINKED_FACTS = 150  # facts read around the named entities, best candidates first
NEIGHBOURS = 30  # neighbours whose facts a relation question reads (one hop)
HOP_FACTS = 60
# Weights of the relevance sum. The predicate carries most: it is what the question asks.
W_PREDICATE = 2.0
W_LINKED = 1.0
W_HOP = 0.4
W_BOTH_ENDS = 0.5
W_ANSWER_TYPE = 0.8
W_COSINE = 1.2
W_BM25 = 0.6
W_PRIOR = 0.1
DESCRIPTION_SHARE = 0.6  # a description's words count less than a name's
COSINE_ZERO = 0.2  # all-MiniLM cosines below this are unrelated text
COSINE_FULL = 0.7
# Words every predicate description uses: they say nothing about the relation.
_DESCRIPTION_NOISE = frozenset(analyze("subject object person organisation thing one another"))


# What scoring a candidate and writing its line read. A block reads a few hundred
# candidates to keep a handful: the other columns (the ends' embeddings, attributes and
# aliases, the predicate's registry fields) cost more to parse than the rest of the read.
CANDIDATE_FIELDS = (
    "id", "scope", "kind", "value", "value_text", "confidence", "importance", "trust",
    "valid_from", "last_seen_at", "source_kind", "source_ref", "run_id", "document_id",
    "turn_id", "subject__id", "subject__name", "subject__type", "object__id", "object__name",
    "object__type", "predicate__id", "predicate__name", "predicate__ranking_weight",
)  # fmt: skip


@dataclass(frozen=True)
class PredicateMatch:
    score: float  # 0..1
    words: tuple[str, ...]  # the question's terms it shares
    via: str  # "name", "alias", "inverse alias" or "description"


@dataclass
class FactCandidate:
    fact: Fact
    prior: float
    linked: list[int] = field(default_factory=list)  # named entities it mentions
    hop: bool = False  # found through a named entity's neighbour
    via: int | None = None  # that neighbour: the fact's other end is what it gives
    # Stands to that neighbour as the named entity does (same predicate, same end): the
    # others who live in the same town, depend on the same thing, report to the same one.
    sibling: bool = False
    bm25: float | None = None  # its BM25 score, normalized by the best one
    cosine: float | None = None
    relevance: float = 0.0
    explain: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _PredicateWords:
    forms: dict[int, list[tuple[str, frozenset[str]]]]  # id → (via, terms) per name
    descriptions: dict[int, frozenset[str]]


# Per context: (version, words). A version is the registry's row counts and last change,
# read with one small query, so a predicate first seen a moment ago is matched at once.
_WORDS: dict[int, tuple[tuple[object, ...], _PredicateWords]] = {}


def predicate_matches(*, access: ContextAccess, terms: frozenset[str]) -> dict[int, PredicateMatch]:
    """The context's predicates whose name, aliases or description share words with
    ``terms`` (stemmed), by id."""
    if not terms:
        return {}
    words = _predicate_words(access)
    matches: dict[int, PredicateMatch] = {}
    for pk, named in words.forms.items():
        best = PredicateMatch(0.0, (), "")
        for via, form in named:
            shared = terms & form
            if form and shared and len(shared) / len(form) > best.score:
                best = PredicateMatch(len(shared) / len(form), tuple(sorted(shared)), via)
        shared = terms & words.descriptions.get(pk, frozenset())
        described = DESCRIPTION_SHARE * len(shared) / len(terms) if shared else 0.0
        if described > best.score:
            best = PredicateMatch(described, tuple(sorted(shared)), "description")
        if best.score > 0:
            matches[pk] = best
    return matches


def _predicate_words(access: ContextAccess) -> _PredicateWords:
    context = access.context
    version = _registry_version(context.pk)
    cached = _WORDS.get(context.pk)
    if cached is not None and cached[0] == version:
        return cached[1]
    forms: dict[int, list[tuple[str, frozenset[str]]]] = {}
    descriptions: dict[int, frozenset[str]] = {}
    for pk, name, description in Predicate.objects.filter(context=context).values_list(
        "pk", "name", "description"
    ):
        forms.setdefault(pk, []).append(("name", _words(name)))
        descriptions[pk] = frozenset(analyze(description)) - _DESCRIPTION_NOISE
    for pk, alias, inverse in PredicateAlias.objects.filter(context=context).values_list(
        "predicate_id", "alias", "inverse"
    ):
        forms.setdefault(pk, []).append(("inverse alias" if inverse else "alias", _words(alias)))
    words = _PredicateWords(forms=forms, descriptions=descriptions)
    _WORDS[context.pk] = (version, words)
    return words


def _registry_version(context_id: int) -> tuple[object, ...]:
    predicates, aliases = Predicate._meta.db_table, PredicateAlias._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT (SELECT count(*) FROM {predicates} WHERE context_id = %s),
                   (SELECT max(updated_at) FROM {predicates} WHERE context_id = %s),
                   (SELECT count(*) FROM {aliases} WHERE context_id = %s),
                   (SELECT max(id) FROM {aliases} WHERE context_id = %s)
            """,  # noqa: S608 - table names from the models
            [context_id] * 4,
        )
        row = cursor.fetchone()
    return tuple(row) if row else ()


def _words(name: str) -> frozenset[str]:
    """A predicate name's terms: ``reports_to`` and ``reportsTo`` → {report}."""
    spaced = "".join(f" {c.lower()}" if c.isupper() else c for c in name).replace("_", " ")
    return frozenset(analyze(spaced))


def current_facts(*, access: ContextAccess, include_pending: bool = False) -> QuerySet[Fact]:
    """The facts a memory block may hold: visible, current, confident enough and trusted
    (pending ones too when asked for; they go under their own heading)."""
    return facts_visible(access=access).filter(
        trust_q(include_pending=include_pending),
        fact_live_q(),
        confidence__gte=RANK_MIN_CONFIDENCE,
    )


def fact_candidates(
    *,
    access: ContextAccess,
    links: list[EntityLink],
    matches: dict[int, PredicateMatch],
    found: dict[int, float],
    now: datetime,
    include_pending: bool = False,
) -> list[FactCandidate]:
    """The facts that may answer: around the named entities (and their neighbours, for
    a relation question) and the ``found`` ones (id → normalized BM25 score or 0).
    Trusted facts only, unless ``include_pending``."""
    base = (
        current_facts(access=access, include_pending=include_pending)
        .select_related("subject", "object", "predicate")
        .only(*CANDIDATE_FIELDS)
    )
    linked_ids = [link.entity.pk for link in links]
    candidates: dict[int, FactCandidate] = {}
    if linked_ids:
        around = Q(subject_id__in=linked_ids) | Q(object_id__in=linked_ids)
        asked = Case(
            When(predicate_id__in=list(matches), then=Value(1)),
            default=Value(0),
            output_field=IntegerField(),
        )
        rows = base.filter(around).annotate(asked=asked).order_by("-asked", "-last_seen_at", "-id")
        for around_fact in rows[:LINKED_FACTS]:
            candidates[around_fact.pk] = _candidate(around_fact, linked_ids, now=now)
        if matches:
            _add_hop_facts(base, candidates, linked_ids, list(matches), now=now)
    missing = [pk for pk in found if pk not in candidates]
    for fact in base.filter(pk__in=missing):
        candidates[fact.pk] = _candidate(fact, linked_ids, now=now)
    for pk, bm25 in found.items():
        if pk in candidates and bm25 > 0:
            candidates[pk].bm25 = bm25
    return list(candidates.values())


def _add_hop_facts(
    base: QuerySet[Fact],
    candidates: dict[int, FactCandidate],
    linked_ids: list[int],
    predicate_ids: list[int],
    *,
    now: datetime,
) -> None:
    """The asked-about predicates' facts of the named entities' neighbours, reached
    through an asked-about relation too ("Where does Dana's manager live?": her manager's
    home; "Where does Bob work?" reads no friend's employer)."""
    neighbours: list[int] = []
    reached: set[tuple[int, int, bool]] = set()  # (neighbour, predicate, as the subject)
    for candidate in candidates.values():
        fact = candidate.fact
        if fact.kind != FactKind.RELATION or fact.object_id is None:
            continue
        if fact.predicate_id not in predicate_ids:
            continue
        for end in (fact.subject_id, fact.object_id):
            if end not in linked_ids:
                reached.add((end, fact.predicate_id, end == fact.subject_id))
                if end not in neighbours:
                    neighbours.append(end)
    if not neighbours:
        return
    neighbours = neighbours[:NEIGHBOURS]
    rows = (
        base.filter(Q(subject_id__in=neighbours) | Q(object_id__in=neighbours))
        .filter(predicate_id__in=predicate_ids)
        .exclude(pk__in=list(candidates))
        .order_by("-last_seen_at", "-id")[:HOP_FACTS]
    )
    for fact in rows:
        candidate = _candidate(fact, linked_ids, now=now)
        candidate.hop = True
        candidate.via = fact.subject_id if fact.subject_id in neighbours else fact.object_id
        as_subject = candidate.via == fact.subject_id
        candidate.sibling = (candidate.via, fact.predicate_id, as_subject) in reached
        candidates[fact.pk] = candidate


def _candidate(fact: Fact, linked_ids: list[int], *, now: datetime) -> FactCandidate:
    ends = [fact.subject_id, fact.object_id]
    return FactCandidate(
        fact=fact,
        prior=fact_rank_score(fact, now=now),
        linked=[pk for pk in linked_ids if pk in ends],
    )


def cosines_fill(candidates: list[FactCandidate], embedding: list[float] | None) -> None:
    """Each candidate's cosine similarity to the question (facts not yet embedded keep
    None). One query."""
    if embedding is None or not candidates:
        return
    by_id = {c.fact.pk: c for c in candidates}
    rows = (
        FactVector.objects.filter(fact_id__in=list(by_id))
        .annotate(distance=CosineDistance("embedding", embedding))
        .values_list("fact_id", "distance")
    )
    for fact_id, distance in rows:
        by_id[fact_id].cosine = 1.0 - float(distance)


def fact_relevance(
    candidates: list[FactCandidate],
    *,
    question: Question,
    links: list[EntityLink],
    matches: dict[int, PredicateMatch],
) -> list[FactCandidate]:
    """The candidates scored (``relevance``, ``explain``) and ordered best first."""
    names = {link.entity.pk: link.entity.name for link in links}
    top_prior = max((c.prior for c in candidates), default=0.0) or 1.0
    for candidate in candidates:
        _score(candidate, question=question, names=names, matches=matches, top_prior=top_prior)
    return sorted(candidates, key=lambda c: (-c.relevance, -c.prior, -c.fact.pk))


def _score(
    candidate: FactCandidate,
    *,
    question: Question,
    names: dict[int, str],
    matches: dict[int, PredicateMatch],
    top_prior: float,
) -> None:
    fact = candidate.fact
    match = matches.get(fact.predicate_id)
    predicate = match.score if match else 0.0
    linked = W_HOP if candidate.hop else (W_LINKED if candidate.linked else 0.0)
    both = W_BOTH_ENDS if len(candidate.linked) > 1 else 0.0
    # Through a neighbour, the answer is the end that is not the neighbour ("Kenji lives
    # in Toronto" gives a person, not the place, when the named one lives in Toronto).
    ends = candidate.linked or ([candidate.via] if candidate.via is not None else [])
    answer, fits = _answer_fit(fact, ends, question)
    cosine = _cosine_share(candidate.cosine)
    bm25 = candidate.bm25 or 0.0
    prior = candidate.prior / top_prior
    candidate.relevance = (
        W_PREDICATE * predicate
        + linked
        + both
        + W_ANSWER_TYPE * fits
        + W_COSINE * cosine
        + W_BM25 * bm25
        + W_PRIOR * prior
    )
    candidate.explain = {
        "relevance": round(candidate.relevance, 4),
        "names": [names[pk] for pk in candidate.linked],
        "through_neighbour": candidate.hop,
        "predicate": (
            {"words": list(match.words), "via": match.via, "score": round(match.score, 3)}
            if match
            else None
        ),
        "answer": {"asked": _asked(question), "given": answer, "fits": fits > 0},
        "bm25": round(bm25, 4) if candidate.bm25 else None,
        "cosine": round(candidate.cosine, 4) if candidate.cosine is not None else None,
        "prior": round(candidate.prior, 4),
        "why": _why(candidate, match, answer, fits > 0, question, names),
    }


def shares_with_question(candidate: FactCandidate, *, min_cosine: float) -> bool:
    """Whether a fact has anything to do with the question: it names an entity the
    question names, has a predicate the question asks about, shares words with it, or is
    close to it in meaning. Anything else is padding."""
    explain = candidate.explain
    return bool(
        candidate.linked
        or candidate.hop
        or explain.get("predicate")
        or candidate.bm25
        or (candidate.cosine is not None and candidate.cosine >= min_cosine)
    )


def _cosine_share(cosine: float | None) -> float:
    if cosine is None:
        return 0.0
    return min(1.0, max(0.0, (cosine - COSINE_ZERO) / (COSINE_FULL - COSINE_ZERO)))


def _asked(question: Question) -> str | None:
    if question.wants:
        return question.wants
    return "value" if question.wants_value else None


def _answer_fit(fact: Fact, linked: list[int], question: Question) -> tuple[str, float]:
    """What the fact gives as the answer (the end not in ``linked`` — the ends the
    question names, or the neighbour it was reached through —: an entity type or
    ``value``) and whether that is what the question asks for (1 or 0)."""
    if fact.object is None:
        given = "value"
    elif fact.object_id in linked and fact.subject_id not in linked:
        given = fact.subject.type
    elif fact.subject_id in linked and fact.object_id not in linked:
        given = fact.object.type
    else:  # both ends or neither named: either end may answer
        types = {fact.subject.type, fact.object.type}
        given = question.wants if question.wants in types else fact.object.type
    if question.wants:
        return given, 1.0 if given == question.wants else 0.0
    if question.wants_value:
        return given, 1.0 if given == "value" else 0.0
    return given, 0.0


def _why(
    candidate: FactCandidate,
    match: PredicateMatch | None,
    answer: str,
    fits: bool,
    question: Question,
    names: dict[int, str],
) -> str:
    parts = []
    if candidate.linked:
        parts.append("names " + " and ".join(names[pk] for pk in candidate.linked))
    elif candidate.hop:
        parts.append("a neighbour of a named entity")
    if match:
        parts.append(f"its predicate matches {', '.join(match.words)!r} ({match.via})")
    if fits:
        parts.append(f"gives a {answer}, as {_question_word(question)} asks")
    if candidate.bm25:
        parts.append("shares words with the query")
    if candidate.cosine is not None and candidate.cosine >= COSINE_ZERO + 0.2:
        parts.append(f"close in meaning ({candidate.cosine:.2f})")
    return "; ".join(parts) or "ranked by confidence, recency and importance"


def _question_word(question: Question) -> str:
    for token in question.tokens:
        if token.casefold() in {"who", "whom", "whose", "where", "when", "which", "what", "how"}:
            return token.casefold()
    return "the question"


def linked_entities(links: list[EntityLink]) -> list[Entity]:
    return [link.entity for link in links]
