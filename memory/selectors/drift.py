"""The drift report: predicates seen in writes but not registered, with suggestions."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache

import numpy as np
import numpy.typing as npt
from django.conf import settings
from django.contrib.postgres.expressions import ArraySubquery
from django.db.models import OuterRef
from rapidfuzz import fuzz

from memory.access import ContextAccess
from memory.embeddings import embed_for_request
from memory.models import Fact, FactStatus, Predicate, PredicateStatus
from memory.selectors.usage import drift_is_visible, predicate_usage

SUGGESTIONS = 3
EXAMPLES = 3
# How the three signals add up. Embeddings catch synonyms (employed_by ~ works_at) that
# share no letters; string similarity catches spelling variants; shared words break ties.
WEIGHT_EMBEDDING = 0.5
WEIGHT_STRING = 0.3
WEIGHT_WORDS = 0.2
SUGGESTIONS_HINT = "drift suggestions are ranked by meaning too, so they need it"


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


def drift_list(
    *, access: ContextAccess, with_suggestions: bool = True, with_examples: bool = True
) -> list[DriftItem]:
    """Observed predicates with the caller's visible use, most used first (queries:
    observed predicates with their example ids; usage; the examples; registered
    predicates with their aliases).

    An observed predicate whose facts all lie outside the caller's grants is not shown;
    one with no facts at all (refused in strict mode) is registry-wide and shown. Counts
    are observations from the usage log (``memory.selectors.usage``), not a count of
    the facts.
    """
    newest = (
        Fact.objects.filter(
            access.grants.read_q(), context=access.context, predicate=OuterRef("pk")
        )
        .exclude(status=FactStatus.RETRACTED)
        .order_by("-recorded_at", "-pk")
        .values("pk")[:EXAMPLES]
    )
    observed = list(
        Predicate.objects.filter(context=access.context, status=PredicateStatus.OBSERVED)
        .annotate(example_ids=ArraySubquery(newest))
        .order_by("name")
    )
    usage = predicate_usage(access=access, predicate_ids=[p.pk for p in observed])
    items = [
        DriftItem(
            predicate=p,
            fact_count=usage[p.pk].used if p.pk in usage else 0,
            first_seen=p.first_seen_at,
            last_seen=p.last_seen_at or (usage[p.pk].last_used_at if p.pk in usage else None),
        )
        for p in observed
        if drift_is_visible(usage.get(p.pk))
    ]
    items.sort(key=lambda item: -item.fact_count)  # stable: by name within a count
    if with_examples:
        drift_examples_attach(items=items)
    if with_suggestions:
        drift_suggestions_attach(access=access, items=items)
    return items


def drift_suggestions_attach(*, access: ContextAccess, items: list[DriftItem]) -> None:
    """Rank registered predicates for each item (queries: registered predicates; their
    aliases) — for one page of a long drift list, not all of it. Raises
    ServiceUnavailable (``embedder_unavailable``) when the names cannot be embedded."""
    if not items:
        return
    registered = list(
        Predicate.objects.filter(context=access.context, status=PredicateStatus.REGISTERED)
        .prefetch_related("alias_set")
        .order_by("name")
    )
    candidates = _candidates(registered)
    for item in items:
        item.suggestions = _suggest(item.predicate.name, candidates)


def drift_examples_attach(*, items: list[DriftItem]) -> None:
    """The newest few visible facts of each observed predicate: their ids came with the
    predicates (a correlated LIMIT walking fact_predicate_recent), loaded in one query —
    for the items given (one page of a long list)."""
    ids = {item.predicate.pk: list(item.predicate.example_ids) for item in items}  # type: ignore[attr-defined]
    wanted = [pk for pks in ids.values() for pk in pks]
    facts = Fact.objects.filter(pk__in=wanted).select_related("subject", "object", "predicate")
    by_pk = {fact.pk: fact for fact in facts}
    for item in items:
        item.examples = [by_pk[pk] for pk in ids[item.predicate.pk] if pk in by_pk]


@dataclass(frozen=True)
class _Candidates:
    """The registered predicates as the ranking needs them, prepared once per list."""

    names: list[str]
    forms: list[list[tuple[str, frozenset[str]]]]  # (name or alias, its words)
    vectors: npt.NDArray[np.float64]


def _candidates(registered: list[Predicate]) -> _Candidates:
    forms = [
        [
            (form, frozenset(form.split("_")))
            for form in (p.name, *(a.alias for a in p.alias_set.all()))
        ]
        for p in registered
    ]
    vectors = _vectors(settings.MEMORY_EMBED_MODEL, tuple(_describe(p) for p in registered))
    return _Candidates([p.name for p in registered], forms, vectors)


def drift_suggestions(observed: Predicate, registered: list[Predicate]) -> list[Suggestion]:
    """Registered predicates ranked by string, word and embedding similarity."""
    if not registered:
        return []
    return _suggest(observed.name, _candidates(registered))


def _suggest(name: str, candidates: _Candidates) -> list[Suggestion]:
    # One matrix product instead of a Python loop over 384 dimensions per predicate.
    query = _vector(settings.MEMORY_EMBED_MODEL, _words(name))
    similarities = (candidates.vectors @ query).tolist()
    words_of_name = frozenset(name.split("_"))
    ranked = []
    for target, forms, similarity in zip(
        candidates.names, candidates.forms, similarities, strict=True
    ):
        string = max(fuzz.ratio(name, form) for form, _ in forms) / 100.0
        words = max(_jaccard(words_of_name, form_words) for _, form_words in forms)
        embedding = max(0.0, similarity)
        score = WEIGHT_EMBEDDING * embedding + WEIGHT_STRING * string + WEIGHT_WORDS * words
        ranked.append(Suggestion(target, round(score, 4), string, words, embedding))
    ranked.sort(key=lambda s: (-s.score, s.name))
    return [
        Suggestion(
            s.name,
            s.score,
            round(s.string_similarity, 4),
            round(s.shared_words, 4),
            round(s.embedding_similarity, 4),
        )
        for s in ranked[:SUGGESTIONS]
    ]


def _words(name: str) -> str:
    return name.replace("_", " ")


def _describe(predicate: Predicate) -> str:
    return f"{_words(predicate.name)}: {predicate.description}".strip(": ")


def _jaccard(left: frozenset[str], right: frozenset[str]) -> float:
    union = len(left | right)
    return len(left & right) / union if union else 0.0


# The registry changes rarely; its embeddings are cached per distinct registry text, and
# per model: vectors of two models are not comparable. A failure is not cached.
@lru_cache(maxsize=64)
def _vectors(model: str, texts: tuple[str, ...]) -> npt.NDArray[np.float64]:
    return np.asarray(embed_for_request(list(texts), hint=SUGGESTIONS_HINT), dtype=np.float64)


@lru_cache(maxsize=4096)
def _vector(model: str, text: str) -> npt.NDArray[np.float64]:
    vector = np.asarray(embed_for_request([text], hint=SUGGESTIONS_HINT)[0], dtype=np.float64)
    norm = float(np.linalg.norm(vector)) or 1.0
    return vector / norm
