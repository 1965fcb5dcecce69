"""The drift report: predicates seen in writes but not registered, with suggestions."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache

from django.db.models import Count, F, Max, Min, Q, Window
from django.db.models.functions import RowNumber
from rapidfuzz import fuzz

from memory.access import ContextAccess
from memory.embeddings import embed_texts
from memory.models import Fact, FactStatus, Predicate, PredicateStatus

SUGGESTIONS = 3
EXAMPLES = 3
# How the three signals add up. Embeddings catch synonyms (employed_by ~ works_at) that
# share no letters; string similarity catches spelling variants; shared words break ties.
WEIGHT_EMBEDDING = 0.5
WEIGHT_STRING = 0.3
WEIGHT_WORDS = 0.2


@dataclass(frozen=True)
class Suggestion:
    name: str
    score: float
    string_similarity: float
    shared_words: float
    embedding_similarity: float


@dataclass
class DriftItem:
    predicate: Predicate
    fact_count: int
    first_seen: datetime | None
    last_seen: datetime | None
    examples: list[Fact] = field(default_factory=list)
    suggestions: list[Suggestion] = field(default_factory=list)


def drift_list(*, access: ContextAccess, with_suggestions: bool = True) -> list[DriftItem]:
    """Observed predicates with the caller's visible facts, most used first.

    An observed predicate whose facts all lie outside the caller's grants is not shown;
    one with no facts at all (refused in strict mode) is registry-wide and shown.
    """
    visible = Q(facts__context=access.context) & _facts_read_q(access)
    observed = (
        Predicate.objects.filter(context=access.context, status=PredicateStatus.OBSERVED)
        .annotate(
            visible_facts=Count("facts", filter=visible),
            all_facts=Count("facts"),
            first_fact=Min("facts__recorded_at", filter=visible),
            last_fact=Max("facts__recorded_at", filter=visible),
        )
        .filter(Q(visible_facts__gt=0) | Q(all_facts=0))
        .order_by("-visible_facts", "name")
    )
    items = [
        DriftItem(
            predicate=p,
            fact_count=p.visible_facts,
            first_seen=p.first_seen_at or p.first_fact,
            last_seen=p.last_seen_at or p.last_fact,
        )
        for p in observed
    ]
    _attach_examples(access, items)
    if with_suggestions and items:
        registered = list(
            Predicate.objects.filter(context=access.context, status=PredicateStatus.REGISTERED)
            .prefetch_related("alias_set")
            .order_by("name")
        )
        for item in items:
            item.suggestions = drift_suggestions(item.predicate, registered)
    return items


def _facts_read_q(access: ContextAccess) -> Q:
    """The caller's read grants, phrased on the ``facts__scope`` relation."""
    return access.grants.read_q("facts__scope")


def _attach_examples(access: ContextAccess, items: list[DriftItem]) -> None:
    """The newest few visible facts of each observed predicate, in one query that stops
    at EXAMPLES per predicate (a window function) however many facts there are."""
    by_predicate = {item.predicate.pk: item for item in items}
    facts = (
        Fact.objects.filter(
            access.grants.read_q(),
            context=access.context,
            predicate_id__in=list(by_predicate),
        )
        .exclude(status=FactStatus.RETRACTED)
        .annotate(
            nth=Window(
                RowNumber(),
                partition_by=[F("predicate_id")],
                order_by=[F("recorded_at").desc(), F("pk").desc()],
            )
        )
        .filter(nth__lte=EXAMPLES)
        .select_related("subject", "object", "predicate")
        .order_by("predicate_id", "nth")
    )
    for fact in facts:
        by_predicate[fact.predicate_id].examples.append(fact)


def drift_suggestions(observed: Predicate, registered: list[Predicate]) -> list[Suggestion]:
    """Registered predicates ranked by string, word and embedding similarity."""
    if not registered:
        return []
    texts = tuple(_describe(p) for p in registered)
    target = _vector(_words(observed.name))
    vectors = _vectors(texts)
    ranked = []
    for predicate, vector in zip(registered, vectors, strict=True):
        forms = [predicate.name, *(a.alias for a in predicate.alias_set.all())]
        string = max(fuzz.ratio(observed.name, form) for form in forms) / 100.0
        words = max(_jaccard(observed.name, form) for form in forms)
        embedding = max(0.0, sum(a * b for a, b in zip(target, vector, strict=True)))
        score = WEIGHT_EMBEDDING * embedding + WEIGHT_STRING * string + WEIGHT_WORDS * words
        ranked.append(
            Suggestion(
                predicate.name,
                round(score, 4),
                round(string, 4),
                round(words, 4),
                round(embedding, 4),
            )
        )
    ranked.sort(key=lambda s: (-s.score, s.name))
    return ranked[:SUGGESTIONS]


def _words(name: str) -> str:
    return name.replace("_", " ")


def _describe(predicate: Predicate) -> str:
    return f"{_words(predicate.name)}: {predicate.description}".strip(": ")


def _jaccard(a: str, b: str) -> float:
    left, right = set(a.split("_")), set(b.split("_"))
    return len(left & right) / len(left | right) if left | right else 0.0


@lru_cache(maxsize=64)
def _vectors(texts: tuple[str, ...]) -> list[list[float]]:
    # The registry changes rarely; its embeddings are cached per distinct registry text.
    return embed_texts(list(texts))


@lru_cache(maxsize=4096)
def _vector(text: str) -> list[float]:
    vector = embed_texts([text])[0]
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]
