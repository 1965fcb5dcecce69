"""The drift report: predicates seen in writes but not registered, with suggestions."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
from django.conf import settings
from django.contrib.postgres.expressions import ArraySubquery
from django.db import connection
from django.db.models import Count, OuterRef

from memory.domain.access import ContextAccess, system_access
from memory.domain.drift_ranking import (
    CandidatePredicate,
    ObservedExample,
    RankedSuggestion,
    Ranker,
    Vector,
)
from memory.infra.embeddings import embed_for_request
from memory.models import Context, Fact, FactStatus, FactTrust, Predicate, PredicateStatus
from memory.selectors.usage import (
    drift_is_visible,
    drift_use,
    predicate_usage,
    rejected_claims_usage,
)

EXAMPLES = 3
SUGGESTIONS_HINT = "drift suggestions are ranked by meaning too, so they need it"
# The ranking's own record of a suggestion (score, confident, inverse, kind_match, why).
Suggestion = RankedSuggestion


@dataclass
class DriftItem:
    predicate: Predicate
    fact_count: int
    first_seen: datetime | None
    last_seen: datetime | None
    examples: list[Fact] = field(default_factory=list)
    suggestions: list[Suggestion] = field(default_factory=list)


logger = logging.getLogger(__name__)

# Contexts whose drift suggestions a server computes as soon as its model is loaded.
WARM_CONTEXTS = 20


def drift_suggestions_warm() -> None:
    """Embed each recent context's registry and drift names now (cached per process): the
    first drift page otherwise spends seconds embedding a hundred predicate descriptions.
    Run by a server's embedder warm-up thread, once the model is loaded."""
    try:
        for context in Context.objects.order_by("-pk")[:WARM_CONTEXTS]:
            drift_list(access=system_access(context), with_examples=False)
    except Exception:  # a warm-up is an optimisation: the page computes what is missing
        logger.warning("could not pre-compute drift suggestions", exc_info=True)
    finally:
        connection.close()  # this thread's own connection


def drift_list(
    *, access: ContextAccess, with_suggestions: bool = True, with_examples: bool = True
) -> list[DriftItem]:
    """Observed predicates with the caller's visible use, most used first (queries:
    observed predicates with their example ids; usage; rejected claims; the examples;
    registered predicates with their aliases).

    An observed predicate whose facts all lie outside the caller's grants is not shown,
    nor one only rejected claims use; one with no facts at all (refused in strict mode)
    is registry-wide and shown. Counts are observations from the usage log
    (``memory.selectors.usage``), not a count of the facts; rejected claims not counted.
    """
    newest = (
        Fact.objects.filter(
            access.grants.read_q(), context=access.context, predicate=OuterRef("pk")
        )
        .exclude(status=FactStatus.RETRACTED)
        .exclude(trust=FactTrust.REJECTED)
        .order_by("-recorded_at", "-pk")
        .values("pk")[:EXAMPLES]
    )
    observed = list(
        Predicate.objects.filter(context=access.context, status=PredicateStatus.OBSERVED)
        .annotate(example_ids=ArraySubquery(newest))
        .order_by("name")
    )
    ids = [p.pk for p in observed]
    usage = predicate_usage(access=access, predicate_ids=ids)
    rejected = rejected_claims_usage(access=access, predicate_ids=ids)
    items = []
    for p in observed:
        if not drift_is_visible(usage.get(p.pk), rejected.get(p.pk)):
            continue
        use = drift_use(usage.get(p.pk), rejected.get(p.pk))
        items.append(
            DriftItem(
                predicate=p,
                fact_count=use.used if use is not None else 0,
                first_seen=p.first_seen_at,
                last_seen=p.last_seen_at or (use.last_used_at if use is not None else None),
            )
        )
    items.sort(key=lambda item: -item.fact_count)  # stable: by name within a count
    if with_examples:
        drift_examples_attach(items=items)
    if with_suggestions:
        drift_suggestions_attach(access=access, items=items)
    return items


def drift_suggestions_attach(*, access: ContextAccess, items: list[DriftItem]) -> None:
    """Rank registered predicates for each item (``memory.domain.drift_ranking``; queries:
    registered predicates; their aliases) — for one page of a long drift list, not all of
    it. Attach examples first: their kinds and types are evidence. Raises
    ServiceUnavailable (``embedder_unavailable``) when the names cannot be embedded."""
    if not items:
        return
    ranker = drift_ranker(context=access.context)
    ranker.prepare([item.predicate.name for item in items])  # one embedding batch for all
    for item in items:
        item.suggestions = ranker.rank(item.predicate.name, [_example(f) for f in item.examples])


def drift_ranker(*, context: Context) -> Ranker:
    """The context's registered predicates prepared for ranking (two queries)."""
    registered = (
        Predicate.objects.filter(context=context, status=PredicateStatus.REGISTERED)
        .prefetch_related("alias_set")
        .order_by("name")
    )
    return Ranker([_candidate(p) for p in registered], _embed)


def drift_suggestions(observed: Predicate, registered: list[Predicate]) -> list[Suggestion]:
    """Registered predicates ranked for ``observed`` (no examples)."""
    return Ranker([_candidate(p) for p in registered], _embed).rank(observed.name)


def _candidate(predicate: Predicate) -> CandidatePredicate:
    aliases = list(predicate.alias_set.all())
    return CandidatePredicate(
        name=predicate.name,
        kind=predicate.kind,
        description=predicate.description,
        subject_types=tuple(predicate.subject_types),
        object_types=tuple(predicate.object_types),
        inverse=predicate.inverse,
        aliases=tuple(a.alias for a in aliases if not a.inverse),
        inverse_aliases=tuple(a.alias for a in aliases if a.inverse),
    )


def _example(fact: Fact) -> ObservedExample:
    return ObservedExample(
        kind=fact.kind,
        subject_type=fact.subject.type,
        subject_text=fact.subject.name,
        object_type=fact.object.type if fact.object is not None else None,
        object_text=fact.object.name if fact.object is not None else fact.value_text[:200],
    )


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


# Vectors are cached per (model, text) — registry texts, drift names, example sentences —
# so that a page whose items shifted (one was aliased) or a second visit embeds only what it
# has not seen: the first look at a name reads its example sentences both ways (~0.8 s a
# name on two cores), later ones cost nothing. Vectors of two models are not comparable,
# hence the model in the key. About 15 MB at the bound; a failure is not cached.
VECTOR_CACHE_SIZE = 5_000
_vector_cache: OrderedDict[tuple[str, str], Vector] = OrderedDict()
_vector_cache_lock = threading.Lock()
_vector_cache_counts = {"hits": 0, "misses": 0}


def drift_vector_cache_info() -> dict[str, int]:
    """Texts served from the cache and texts embedded, since the process started."""
    with _vector_cache_lock:
        return {**_vector_cache_counts, "size": len(_vector_cache)}


def _embed(texts: list[str]) -> list[Vector]:
    model = settings.MEMORY_EMBED_MODEL
    found: dict[str, Vector] = {}
    with _vector_cache_lock:
        for text in texts:
            vector = _vector_cache.get((model, text))
            if vector is not None:
                _vector_cache.move_to_end((model, text))
                found[text] = vector
        _vector_cache_counts["hits"] += len(found)
    missing = sorted(set(texts) - set(found))
    if missing:
        vectors = np.asarray(embed_for_request(missing, hint=SUGGESTIONS_HINT), dtype=np.float64)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        fresh = dict(zip(missing, vectors / np.where(norms == 0, 1.0, norms), strict=True))
        found.update(fresh)
        with _vector_cache_lock:
            _vector_cache_counts["misses"] += len(missing)
            for text, vector in fresh.items():
                _vector_cache[(model, text)] = vector
            while len(_vector_cache) > VECTOR_CACHE_SIZE:
                _vector_cache.popitem(last=False)
    return [found[text] for text in texts]


def drift_current_fact_counts(*, access: ContextAccess, names: list[str]) -> dict[str, int]:
    """How many current facts each observed predicate of ``names`` holds in the context:
    what rejecting it retracts (every scope's, not only those the caller can read)."""
    rows = (
        Fact.objects.filter(
            context=access.context,
            predicate__name__in=names,
            predicate__status=PredicateStatus.OBSERVED,
            status=FactStatus.CURRENT,
        )
        .values_list("predicate__name")
        .annotate(count=Count("pk"))
    )
    return {name: count for name, count in rows}
