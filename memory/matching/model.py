"""The Fellegi–Sunter model that weighs ``duplicate_scoring``'s comparisons, and its fit.

A pair's log-odds of being one thing is its prior's plus log2(m/u) of every compared
field's level, so agreeing fields add weight and strong disagreements (two different
dates of birth, two different identifiers of one kind) subtract it.

Two frames (docs/decisions/0059):

- **A type's own weights, over all its pairs** (Splink's frame), where the type's blocked
  pairs let EM tell one thing from two — at least two identifiers or attributes besides
  the name, each compared on a fifth of them. The prior is the share of *all* pairs of
  the type that are one thing; ``u`` of each level is how often two random entities of
  the type show it: counted on random pairs, equal attribute values counted exactly from
  their frequencies, and the levels the blocks gather whole (names one slip apart or
  closer, an equal identifier, close vectors) counted on the blocked pairs less their
  expected duplicates. ``m`` and the prior are estimated by EM with ``u`` fixed.
- **The hand-set defaults, over blocked pairs**, for every other type (bare names: EM on
  names alone finds any split it likes) and for contexts too small to learn from. Only
  the embedding's ``u`` is counted there, on random pairs.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memory.matching.scoring import (
    DEFAULT_M,
    DEFAULT_PRIOR,
    DEFAULT_U,
    LEVELS,
    MAX_WEIGHT,
    MISSING,
    SAME_WORDS,
    SLIP,
    SMOOTH,
    Comparison,
    Record,
    attribute_comparison,
    attribute_scalar,
    equal_key,
)

MIN_FIT_PAIRS = 200  # fewer blocked pairs of a type than this: the defaults
MIN_FIELD_PAIRS = 30  # a field with less expected duplicate mass keeps its default m
EM_ROUNDS = 30
# In a type's all-pairs frame the prior is ~2^-18 at 100k entities: weights must be
# able to reach past it, and u of a level seen once in a billion pairs is that small.
TYPED_MAX_WEIGHT = 40.0
TYPED_U_FLOOR = 1e-12
ATTRIBUTE_SAMPLE = 10_000  # pairs of an attribute's holders its lower levels are counted on
# Fields no fit ever sees (a type's pairs all share the type): always the hand-set weights.
HAND_SET_ONLY = frozenset({"type"})


@dataclass
class FieldWeights:
    kind: str
    m: list[float]
    u: list[float]

    def weight(self, level: int, *, typed: bool = False) -> float:
        floor, cap = (TYPED_U_FLOOR, TYPED_MAX_WEIGHT) if typed else (SMOOTH, MAX_WEIGHT)
        ratio = max(self.m[level], SMOOTH) / max(self.u[level], floor)
        return max(-cap, min(cap, math.log2(ratio)))


@dataclass
class TypeModel:
    """One type's weights over all its pairs: ``prior`` = share of the ``pairs`` that are
    one thing; a field it has not seen says nothing (weight 0)."""

    prior: float
    pairs: float
    fields: dict[str, FieldWeights]
    fitted_pairs: int


@dataclass
class Model:
    """The context's weights: per type where a type's own could be estimated, otherwise
    the defaults (``prior``, ``fields``: the embedding's u) over blocked pairs."""

    prior: float = DEFAULT_PRIOR
    fields: dict[str, FieldWeights] = field(default_factory=dict)
    fitted_pairs: int = 0  # blocked pairs EM saw, all types; 0 = the defaults
    types: dict[str, TypeModel] = field(default_factory=dict)

    def weights_of(self, name: str, kind: str) -> FieldWeights:
        known = self.fields.get(name)
        if known is not None and known.kind == kind:
            return known
        return FieldWeights(kind, list(DEFAULT_M[kind]), list(DEFAULT_U[kind]))

    def score(
        self, comparisons: Sequence[Comparison], type_: str | None = None
    ) -> tuple[float, list[dict[str, Any]]]:
        """The match probability and, per field, its level and weight (log2 m/u)."""
        typed = self.types.get(type_) if type_ is not None else None
        prior = min(max(typed.prior if typed else self.prior, 1e-15), 1 - 1e-6)
        log_odds = math.log2(prior / (1 - prior))
        # Where the score starts, so the weights add up to the pair's log2 odds.
        among = f"pairs of {type_} entities" if typed else "pairs found alike"
        explain: list[dict[str, Any]] = [
            {
                "field": "prior",
                "level": f"1 in {round(1 / prior):,} {among}",
                "agrees": False,
                "weight": round(log_odds, 2),
            }
        ]
        for c in comparisons:
            if typed is None:
                weight = self.weights_of(c.field, c.kind).weight(c.level)
            else:
                known = typed.fields.get(c.field)
                usable = known is not None and known.kind == c.kind
                if usable and known:
                    weight = known.weight(c.level, typed=True)
                elif c.kind in HAND_SET_ONLY:  # no fit sees it: the hand-set weight
                    weight = self.weights_of(c.field, c.kind).weight(c.level)
                else:
                    weight = 0.0
            log_odds += weight
            explain.append(
                {
                    "field": c.field,
                    "level": LEVELS[c.kind][c.level],
                    "agrees": c.level > 0 and weight > 0,
                    "weight": round(weight, 2),
                }
            )
        probability = 1.0 / (1.0 + 2.0 ** (-log_odds))
        return probability, explain

    def to_json(self) -> dict[str, Any]:
        return {
            "prior": self.prior,
            "fitted_pairs": self.fitted_pairs,
            "fields": _fields_json(self.fields),
            "types": {
                name: {
                    "prior": t.prior,
                    "pairs": t.pairs,
                    "fitted_pairs": t.fitted_pairs,
                    "fields": _fields_json(t.fields),
                }
                for name, t in self.types.items()
            },
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Model:
        if not data:
            return cls()
        return cls(
            prior=float(data.get("prior", DEFAULT_PRIOR)),
            fitted_pairs=int(data.get("fitted_pairs", 0)),
            fields=_fields_of(data.get("fields", {})),
            types={
                name: TypeModel(
                    prior=float(t["prior"]),
                    pairs=float(t.get("pairs", 0)),
                    fitted_pairs=int(t.get("fitted_pairs", 0)),
                    fields=_fields_of(t.get("fields", {})),
                )
                for name, t in data.get("types", {}).items()
            },
        )


def _fields_json(fields: Mapping[str, FieldWeights]) -> dict[str, Any]:
    return {k: {"kind": f.kind, "m": f.m, "u": f.u} for k, f in fields.items()}


def _fields_of(data: Mapping[str, Any]) -> dict[str, FieldWeights]:
    return {
        k: FieldWeights(v["kind"], list(v["m"]), list(v["u"]))
        for k, v in data.items()
        if v.get("kind") in LEVELS and len(v["m"]) == len(LEVELS[v["kind"]])
    }


# --- the fit ------------------------------------------------------------------------------


@dataclass
class TypeSample:
    """What a type's fit reads: ``population``, entities of the type drawn uniformly (all
    of them in a scan); ``pairs``, how many pairs of the type the ``blocked`` pairs were
    drawn from (those with an end in the population); ``randoms``, random pairs of the
    population compared."""

    population: Sequence[Record]
    pairs: float
    blocked: list[list[Comparison]]
    randoms: list[list[Comparison]]


def fit(samples: Mapping[str, TypeSample]) -> Model:
    """Each type's own weights where its blocked pairs identify them; the defaults (with
    the embedding's u counted on random pairs) for the rest."""
    randoms = [c for sample in samples.values() for c in sample.randoms]
    defaults = _unidentified(randoms)
    types = {
        name: _fit_type(sample, defaults)
        for name, sample in sorted(samples.items())
        if fits_own_weights(sample.blocked)
    }
    defaults.types = types
    defaults.fitted_pairs = sum(t.fitted_pairs for t in types.values())
    return defaults


def _fit_type(sample: TypeSample, defaults: Model) -> TypeModel:
    kinds, columns = _level_columns(sample.blocked)
    u = _u_from_random(sample.randoms, kinds)
    u |= _attribute_u(sample.population, kinds)
    gathered = _gathered_levels(kinds, sample.population, sample.pairs)
    m = {name: np.array(DEFAULT_M[kind]) for name, kind in kinds.items()}
    # EM starts from the judgement of the weights the type would otherwise have: from
    # "nothing is one thing" an equal identifier's u starts at its upper bound and never
    # comes down from it.
    posterior = _default_posterior(columns, kinds, defaults)
    prior = float(np.clip(posterior.sum() / sample.pairs, 1e-15, 0.5))
    for _ in range(EM_ROUNDS):
        for name, (wanted, among) in gathered.items():
            u[name] = _u_gathered(u[name], columns[name], posterior, wanted, among)
        posterior = _posterior(columns, m, u, prior)
        prior = float(np.clip(posterior.sum() / sample.pairs, 1e-15, 0.5))
        for name, col in columns.items():
            seen = col >= 0
            if posterior[seen].sum() >= MIN_FIELD_PAIRS:
                counts = np.bincount(col[seen], weights=posterior[seen], minlength=len(m[name]))
                m[name] = (counts + 1e-3) / (counts.sum() + 1e-3 * len(counts))
    fields = {
        name: FieldWeights(kind, _rounded(m[name]), _rounded(u[name]))
        for name, kind in kinds.items()
    }
    return TypeModel(
        prior=prior, pairs=sample.pairs, fields=fields, fitted_pairs=len(sample.blocked)
    )


def _level_columns(
    pairs: Sequence[Sequence[Comparison]],
) -> tuple[dict[str, str], dict[str, np.ndarray]]:
    """Each field's kind, and its level in every pair (MISSING where not compared)."""
    kinds: dict[str, str] = {}
    for comparisons in pairs:
        for c in comparisons:
            kinds.setdefault(c.field, c.kind)
    kinds = dict(sorted(kinds.items()))
    index = {name: i for i, name in enumerate(kinds)}
    levels = np.full((len(pairs), len(kinds)), MISSING, dtype=np.int8)
    for row, comparisons in enumerate(pairs):
        for c in comparisons:
            levels[row, index[c.field]] = c.level
    return kinds, {name: levels[:, i] for name, i in index.items()}


def _posterior(
    columns: Mapping[str, np.ndarray],
    m: Mapping[str, np.ndarray],
    u: Mapping[str, np.ndarray],
    prior: float,
) -> np.ndarray:
    """EM's E-step: each pair's probability of being one thing."""
    rows = len(next(iter(columns.values()))) if columns else 0
    log_m, log_u = np.zeros(rows), np.zeros(rows)
    for name, col in columns.items():
        seen = col >= 0
        log_m[seen] += np.log(np.maximum(m[name][col[seen]], SMOOTH))
        log_u[seen] += np.log(np.maximum(u[name][col[seen]], TYPED_U_FLOOR))
    odds = np.clip(log_m - log_u + math.log(prior / (1 - prior)), -60, 60)
    return 1.0 / (1.0 + np.exp(-odds))


def _default_posterior(
    columns: Mapping[str, np.ndarray], kinds: Mapping[str, str], defaults: Model
) -> np.ndarray:
    """Each blocked pair's match probability under ``defaults`` (the blocked frame)."""
    rows = len(next(iter(columns.values()))) if columns else 0
    log_odds = np.full(rows, math.log2(defaults.prior / (1 - defaults.prior)))
    for name, col in columns.items():
        field_weights = defaults.weights_of(name, kinds[name])
        weights = np.array([field_weights.weight(level) for level in range(len(field_weights.m))])
        seen = col >= 0
        log_odds[seen] += weights[col[seen]]
    return 1.0 / (1.0 + np.exp2(-np.clip(log_odds, -60, 60)))


def _rounded(values: np.ndarray) -> list[float]:
    return [float(f"{v:.6g}") for v in values]


def _gathered_levels(
    kinds: Mapping[str, str], population: Sequence[Record], pairs: float
) -> dict[str, tuple[range, float]]:
    """Levels the blocks gather whole, per field, and how many pairs they are a share of:
    names one slip apart or closer and close vectors among all pairs, an equal identifier
    among the pairs that both hold one of its kind."""
    out: dict[str, tuple[range, float]] = {}
    for name, kind in kinds.items():
        if kind == "name":
            out[name] = (range(SLIP, SAME_WORDS + 1), pairs)
        elif kind == "embedding":
            out[name] = (range(1, len(LEVELS[kind])), pairs)
        elif kind == "identifier":
            held = sum(1 for r in population if name[3:] in r.identifiers)
            share = held / max(len(population), 1)
            out[name] = (range(2, 3), max(pairs * share * share, 1.0))
    return out


def _u_gathered(
    u: np.ndarray, column: np.ndarray, posterior: np.ndarray, wanted: range, among: float
) -> np.ndarray:
    """u of the gathered levels: the blocked pairs at each, less the expected duplicates
    among them, out of ``among`` pairs (one pair at least: never impossible)."""
    out = u.copy()
    for level in wanted:
        out[level] = max(float(((column == level) * (1.0 - posterior)).sum()), 1.0) / among
    out[0] = max(1.0 - out[1:].sum(), 1e-6)
    return out


def _attribute_u(population: Sequence[Record], kinds: Mapping[str, str]) -> dict[str, np.ndarray]:
    """u of each attribute among the entities holding it: equal values exactly, from how
    often each value occurs (a country one of 40 agrees by chance 1 time in 40, a date of
    birth 1 in 25,000), and the other levels on random pairs of holders."""
    rng = random.Random(23)
    out = {}
    for name, kind in kinds.items():
        if not name.startswith("attr:"):
            continue
        key = name[len("attr:") :].rsplit(":", 1)[0]
        values = (attribute_scalar(r.attributes.get(key)) for r in population)
        holders = [value for value in values if value is not None]
        if len(holders) < 2:
            continue
        counts = Counter(_equal_key_or_text(kind, value) for value in holders)
        n = len(holders)
        equal = sum(c * (c - 1) for c in counts.values()) / (n * (n - 1))
        top = len(LEVELS[kind]) - 1
        seen = np.zeros(top + 1)
        for _ in range(min(ATTRIBUTE_SAMPLE, n * (n - 1) // 2)):
            x, y = rng.sample(holders, 2)
            c = attribute_comparison(key, x, y)
            if c is not None and c.field == name and c.level < top:
                seen[c.level] += 1
        below = seen.sum()
        lower = seen / below * (1.0 - equal) if below else np.array((*DEFAULT_U[kind][:top], 0.0))
        lower[top] = equal
        floor = 0.5 / ATTRIBUTE_SAMPLE
        u = np.maximum(lower, floor)
        out[name] = u / u.sum()
    return out


def _equal_key_or_text(kind: str, value: str) -> str:
    """``equal_key``, for a value its attribute's other holders compare as ``kind`` but
    that is not of it itself (a number among codes): then its text."""
    try:
        return equal_key(kind, value)
    except ValueError:
        return equal_key("text", value)


def _unidentified(randoms: list[list[Comparison]]) -> Model:
    """The defaults, but u of the embedding still counted on random pairs (as Splink
    estimates u, whatever the rest): how often two different things' vectors are this
    close is a property of the context's vectors, not a guess. The name's levels are too
    rare among random pairs to count (docs/decisions/0046)."""
    seen = sum(1 for comparisons in randoms for c in comparisons if c.field == "embedding")
    if seen < MIN_FIELD_PAIRS:
        return Model()
    u = _u_from_random(randoms, {"embedding": "embedding"})["embedding"]
    weights = FieldWeights("embedding", list(DEFAULT_M["embedding"]), u.round(6).tolist())
    return Model(fields={"embedding": weights})


def fits_own_weights(blocked: list[list[Comparison]]) -> bool:
    """Whether a type with these blocked pairs gets its own weights (``fit``): enough
    pairs, and identifiable. Otherwise only the embedding's comparisons among its random
    pairs are read."""
    return len(blocked) >= MIN_FIT_PAIRS and _identifiable(blocked)


def _identifiable(blocked: list[list[Comparison]]) -> bool:
    """EM separates "one thing" from "two" only with several conditionally independent
    fields: besides the name (and the embedding, which encodes the name), at least two
    identifiers or attributes each compared on a fifth of the pairs. On names alone it
    finds any split it likes (at 30k planted entities: "names one slip apart")."""
    counts: dict[str, int] = {}
    for comparisons in blocked:
        for c in comparisons:
            if c.field not in ("name", "embedding"):
                counts[c.field] = counts.get(c.field, 0) + 1
    return sum(n >= len(blocked) / 5 for n in counts.values()) >= 2


def _u_from_random(
    random_pairs: Iterable[Sequence[Comparison]], kinds: Mapping[str, str]
) -> dict[str, np.ndarray]:
    counts = {name: np.zeros(len(LEVELS[kind])) for name, kind in kinds.items()}
    for comparisons in random_pairs:
        for c in comparisons:
            if c.field in counts and kinds[c.field] == c.kind:
                counts[c.field][c.level] += 1
    u = {}
    for name, kind in kinds.items():
        # Fifty pseudo-pairs of the default: rare levels never seen at random stay rare,
        # not impossible, and a field seldom compared at random keeps its default.
        prior = np.array(DEFAULT_U[kind]) * 50
        u[name] = (counts[name] + prior) / (counts[name].sum() + prior.sum())
    return u
