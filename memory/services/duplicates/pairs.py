"""Duplicate candidates: blocked pairs scored by the context's model, stored, withdrawn.

A pair whose match probability reaches MATCH_PROBABILITY is stored as an open
DuplicateCandidate with its explanation; an open pair the finder stored that falls
below it (its evidence gone) is withdrawn. A dismissed pair keeps its row and is never
proposed again. The context's weights (``DuplicateModel``) are estimated here: by every
full scan, and by an incremental check when the context has doubled since.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Count

from memory.infra.pg_arrays import int_array_literal
from memory.matching.blocking import Pair, Rare, keys_holders, pair_of, rare_keys
from memory.matching.model import Model, TypeSample, fit, fits_own_weights
from memory.matching.neighbours import cosines, vector_pairs
from memory.matching.records import records_of
from memory.matching.scoring import (
    DIFFERENT,
    MATCH_PROBABILITY,
    Comparison,
    Record,
    compare,
    name_level,
    pair_type,
)
from memory.matching.weights import AUTO_FIT_UP_TO, model_save
from memory.models import Entity
from memory.models.duplicate import DuplicateCandidate, DuplicateStatus

# Sources of pairs this module stores (and may withdraw); others (an ingest run's
# embedding review band, a curator's dismissal) are left as they are.
FINDER_SOURCES = ("scan", "check")
FIT_SAMPLE = 3_000  # entities whose blocked pairs an incremental re-estimate reads
RANDOM_PAIRS = 10_000  # random pairs of each type u is counted on
MIN_FIT_ENTITIES = 100

Existing = dict[Pair, tuple[int, str, str]]  # pair → (pk, status, source)


# --- the model ----------------------------------------------------------------------------


def _random_pairs(records: Sequence[Record], count: int, seed: int) -> list[Pair]:
    """Random pairs of these entities (of one type): almost all two things, so what u is
    counted on."""
    rng = random.Random(seed)
    if len(records) < 2:
        return []
    pairs = set()
    for _ in range(min(count, len(records) * (len(records) - 1) // 2)):
        a, b = rng.sample(records, 2)
        pairs.add(pair_of(a.id, b.id))
    return sorted(pairs)


def model_fit(
    records: dict[int, Record],
    blocked: Iterable[Pair],
    similarities: dict[Pair, float],
    rare: Rare,
    *,
    with_vectors: bool,
    population: Iterable[int] | None = None,
    type_counts: dict[str, int] | None = None,
) -> Model:
    """Each type's weights from its blocked pairs and random pairs of it (with their
    cosines when the context has vectors). ``population``: the entities drawn uniformly
    whose blocked pairs ``blocked`` holds (every record in a scan; a sample when the
    weights are re-estimated as entities arrive, with ``type_counts`` the context's)."""

    def compared(pairs: Iterable[Pair], sims: dict[Pair, float]) -> list[list[Comparison]]:
        return [
            compare(
                records[a],
                records[b],
                cosine=sims.get((a, b)),
                rare=rare.get(records[a].type, set()),
            )
            for a, b in pairs
            if a in records and b in records
        ]

    drawn: dict[str, list[Record]] = defaultdict(list)
    for pk in sorted(records if population is None else population):
        drawn[records[pk].type].append(records[pk])
    blocked_by_type: dict[str, list[Pair]] = defaultdict(list)
    for a, b in blocked:
        if a in records and b in records and records[a].type == records[b].type:
            blocked_by_type[records[a].type].append((a, b))
    blocked_compared = {t: compared(blocked_by_type.get(t, []), similarities) for t in drawn}
    # A type that gets no weights of its own has only the embedding's comparisons of its
    # random pairs read (``fit``): without vectors its random pairs are not drawn at all,
    # with them only those with a cosine are compared. The model comes out the same.
    own = {t for t, pairs in blocked_compared.items() if fits_own_weights(pairs)}
    randoms = {
        t: _random_pairs(members, RANDOM_PAIRS, seed=17) if t in own or with_vectors else []
        for t, members in drawn.items()
    }
    every_random = sorted({pair for pairs in randoms.values() for pair in pairs})
    random_sims = cosines(vector_pairs(records, every_random)) if with_vectors else {}
    samples = {}
    for type_, members in drawn.items():
        total = (type_counts or {}).get(type_, len(members))
        pairs = randoms[type_]
        if type_ not in own:
            pairs = [pair for pair in pairs if pair in random_sims]
        samples[type_] = TypeSample(
            population=members,
            pairs=_pairs_touching(len(members), total),
            blocked=blocked_compared[type_],
            randoms=compared(pairs, random_sims),
        )
    return fit(samples)


def _pairs_touching(drawn: int, total: int) -> float:
    """Pairs among ``total`` entities with at least one end among ``drawn`` of them."""
    total = max(total, drawn)
    return max(drawn * (total - 1) - drawn * (drawn - 1) / 2, 1.0)


def refit_due(fitted_on: int, counted: int | None) -> bool:
    """Whether a context of ``counted`` live entities has doubled since its weights were
    estimated on ``fitted_on`` (None: past AUTO_FIT_UP_TO, where only a scan refits)."""
    if counted is None or fitted_on >= AUTO_FIT_UP_TO:
        return False
    return counted >= max(MIN_FIT_ENTITIES, 2 * fitted_on)


def refit_if_grown(
    context_id: int, model: Model, fitted_on: int, counted: int | None = None
) -> Model | None:
    """Re-estimate the weights from a sample of the context when it has doubled since the
    last estimate (and is small enough not to wait for a scan): the sampled entities'
    blocked pairs are a fair sample of all blocked pairs. Then re-score the open pairs.
    Returns the new model, or None when nothing was due (no statement at all above
    AUTO_FIT_UP_TO: only a scan re-estimates there). ``counted``: the live entities,
    when the caller has counted them in this transaction (``model_read_for_check``)."""
    if fitted_on >= AUTO_FIT_UP_TO:
        return None
    live = Entity.objects.filter(context_id=context_id, merged_into__isnull=True)
    count = live.count() if counted is None else counted
    if not refit_due(fitted_on, count):
        return None
    ids = list(live.order_by("?").values_list("pk", flat=True)[:FIT_SAMPLE])
    sample = records_of(context_id, ids)
    blocked, rare = keys_holders(context_id, sample)  # their stored keys are current
    others = {x for pair in blocked for x in pair} - set(sample)
    records = sample | records_of(context_id, others)
    similarities = cosines(vector_pairs(records, sorted(blocked)))
    type_counts = dict(live.values_list("type").annotate(n=Count("pk")).order_by())
    new = model_fit(
        records,
        blocked,
        similarities,
        rare,
        with_vectors=bool(similarities),
        population=sample,
        type_counts=type_counts,
    )
    new = new if new.fitted_pairs or new.fields else model
    model_save(context_id, new, count)
    rescore_open(context_id, new)
    return new


# --- scoring and storing ------------------------------------------------------------------


@dataclass
class Scored:
    probability: float
    methods: list[str]
    explain: list[dict[str, Any]]


def needing_cosines(
    records: dict[int, Record], pairs: Iterable[Pair], known: dict[Pair, float], rare: Rare
) -> list[Pair]:
    """The pairs whose cosine the model reads and that are not known yet: only where the
    names differ (``compare``), and both entities may have a vector."""
    return sorted(
        (a, b)
        for a, b in vector_pairs(records, pairs)
        if (a, b) not in known
        and a in records
        and b in records
        and name_level(records[a], records[b], rare.get(records[a].type, set())) == DIFFERENT
    )


def score_pairs(
    model: Model,
    records: dict[int, Record],
    proposed: dict[Pair, set[str]],
    similarities: dict[Pair, float],
    rare: Rare,
) -> dict[Pair, Scored]:
    out = {}
    for (a, b), methods in proposed.items():
        if a not in records or b not in records:
            continue
        x, y = records[a], records[b]
        type_ = pair_type(x, y)
        if type_ is None:
            continue
        comparisons = compare(x, y, cosine=similarities.get((a, b)), rare=rare.get(type_, set()))
        probability, explain = model.score(comparisons, type_)
        found = set(methods)
        if x.key == y.key:
            found.add("key")
        elif y.key in x.alias_keys or x.key in y.alias_keys:
            found.add("alias")
        if any(f["field"].startswith("attr:") and f["agrees"] for f in explain):
            found.add("attributes")
        out[(a, b)] = Scored(probability, sorted(found), explain)
    return out


def existing_pairs(context_id: int, ids: list[int] | None = None) -> Existing:
    """Stored pairs of the context (those involving ``ids`` when given)."""
    if ids is None:
        rows = DuplicateCandidate.objects.filter(context_id=context_id).values_list(
            "pk", "entity_a_id", "entity_b_id", "status", "source"
        )
        return {(a, b): (pk, status, source) for pk, a, b, status, source in rows}
    # The check's read, once per write: one plain statement (compiling the ORM's OR of
    # two IN lists cost a small run more than the read).
    wanted = int_array_literal(sorted(set(ids)))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, entity_a_id, entity_b_id, status, source "  # noqa: S608
            f"FROM {DuplicateCandidate._meta.db_table} WHERE context_id = %s "
            "AND (entity_a_id = ANY(%s::bigint[]) OR entity_b_id = ANY(%s::bigint[]))",
            [context_id, wanted, wanted],
        )
        return {(a, b): (pk, status, source) for pk, a, b, status, source in cursor.fetchall()}


def is_finders_open(known: tuple[int, str, str]) -> bool:
    return known[1] == DuplicateStatus.OPEN and known[2] in FINDER_SOURCES


def store(
    context_id: int,
    scored: dict[Pair, Scored],
    existing: Existing,
    *,
    source: str,
    withdraw: Iterable[Pair],
) -> tuple[int, int, int]:
    """Create or update the pairs at or above the match probability; delete the
    finder's open pairs in ``withdraw`` that are not. Returns (stored, new, withdrawn)."""
    new_rows, updates = [], []
    stored = 0
    for (a, b), s in scored.items():
        if s.probability < MATCH_PROBABILITY:
            continue
        stored += 1
        score = round(s.probability, 4)
        known = existing.get((a, b))
        if known is None:
            new_rows.append(
                DuplicateCandidate(
                    context_id=context_id,
                    entity_a_id=a,
                    entity_b_id=b,
                    score=score,
                    methods=s.methods,
                    explain=s.explain,
                    source=source,
                )
            )
        elif is_finders_open(known):
            updates.append(
                DuplicateCandidate(pk=known[0], score=score, methods=s.methods, explain=s.explain)
            )
    if new_rows:
        DuplicateCandidate.objects.bulk_create(new_rows, batch_size=2_000, ignore_conflicts=True)
    if updates:
        DuplicateCandidate.objects.bulk_update(
            updates, ["score", "methods", "explain"], batch_size=2_000
        )
    stale = [
        existing[pair][0]
        for pair in withdraw
        if pair in existing
        and is_finders_open(existing[pair])
        and (pair not in scored or scored[pair].probability < MATCH_PROBABILITY)
    ]
    for start in range(0, len(stale), 10_000):
        DuplicateCandidate.objects.filter(pk__in=stale[start : start + 10_000]).delete()
    return stored, len(new_rows), len(stale)


def rescore_open(context_id: int, model: Model) -> None:
    """Score the finder's open pairs again with ``model``; withdraw those now below."""
    open_pairs = {
        pair: known[0]
        for pair, known in existing_pairs(context_id).items()
        if is_finders_open(known)
    }
    if not open_pairs:
        return
    records = records_of(context_id, {x for pair in open_pairs for x in pair})
    rare = rare_keys(context_id, records)
    similarities = cosines(needing_cosines(records, open_pairs, {}, rare))
    updates, gone = [], []
    for (a, b), pk in open_pairs.items():
        if a not in records or b not in records:
            continue
        type_ = pair_type(records[a], records[b])
        probability, explain = (
            model.score(
                compare(
                    records[a],
                    records[b],
                    cosine=similarities.get((a, b)),
                    rare=rare.get(type_, set()),
                ),
                type_,
            )
            if type_ is not None
            else (0.0, [])
        )
        if probability < MATCH_PROBABILITY:
            gone.append(pk)
        else:
            updates.append(DuplicateCandidate(pk=pk, score=round(probability, 4), explain=explain))
    DuplicateCandidate.objects.bulk_update(updates, ["score", "explain"], batch_size=2_000)
    DuplicateCandidate.objects.filter(pk__in=gone).delete()
