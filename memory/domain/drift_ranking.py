"""Ranking registered predicates as the meaning of an observed (drift) predicate.

Pure: no ORM. The caller passes the registry as ``CandidatePredicate`` rows, the observed
name with a few of its facts as ``ObservedExample`` rows, and an ``embed`` function
(normalized vectors). ``memory.selectors.drift`` feeds it from the database; the benchmark
``benchmarks.drift_suggestions`` feeds it a labelled set.

Each suggestion says how sure it is (``score``, ``confident``), whether the observed name
means the target read backwards (``inverse``: "Acme employs Alex" is "Alex works_at Acme")
and whether the kinds agree (``kind_match``). The signals, strongest first:

1. Spelling: a typo of a registered name or alias (``fuzzy_typo_match``), or exactly a
   registered predicate's ``inverse`` name or one of its inverse aliases.
2. Meaning of the name: the embedding of the observed name's core words against every form
   of each candidate — its name and aliases read forwards, its inverse name and inverse
   aliases read backwards. Voice is handled in words, which embeddings do not see:
   ``managed_by`` and ``has_subsidiary`` are the passive / possessive turn of ``manages``
   and ``subsidiary_of`` (``_parity``).
3. Direction from the facts: the subject and object types of the examples against the
   target's type hints, read both ways, and each example sentence read both ways.

String similarity is not a signal of meaning (``mentored`` is not ``mentioned``); it is
used only through the typo rule.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import Stemmer

from memory.domain.predicate_names import fuzzy_typo_match
from memory.kernel.wording import with_article

Vector = npt.NDArray[np.float64]
Embed = Callable[[list[str]], list[Vector]]

_local = threading.local()  # PyStemmer objects are not thread-safe: one per thread
SUGGESTIONS = 3
# Calibrated on benchmarks/drift_labelled.py (see docs/decisions/0025 and BENCHMARKS):
# a suggestion is confident when its score reaches this and its kind matches. Scores of
# right targets sit mostly above 0.62, novel concepts' best guesses mostly below 0.55.
CONFIDENT_SCORE = 0.6
# How much the best name form, the description and shared word stems count.
WEIGHT_FORM = 0.6
WEIGHT_DESCRIPTION = 0.4
WEIGHT_SHARED_WORDS = 0.3
# A candidate whose kind differs keeps its place in the list for the curator to see, but
# far down and never confident.
KIND_MISMATCH_FACTOR = 0.6
# Examples whose types fit neither reading of the hints lower the score by this much.
TYPE_MISFIT_PENALTY = 0.15
# Direction votes: the name (voice and which form matched), the types, the sentences.
VOTE_NAME = 1.0
VOTE_NAME_BY_MEANING = 0.6
# A relation read one way or the other on this little evidence is not confident.
CONFIDENT_DIRECTION = 0.5
VOTE_TYPES = 1.5
VOTE_SENTENCES = 4.0  # sentence similarity differences are small (a few hundredths)
SPELLING_SCORE = 0.98
_FRAME_WORDS = frozenset({"is", "was", "are", "has", "have", "had", "by", "of", "the", "a"})


@dataclass(frozen=True)
class CandidatePredicate:
    name: str
    kind: str
    description: str = ""
    subject_types: tuple[str, ...] = ()
    object_types: tuple[str, ...] = ()
    inverse: str = ""
    aliases: tuple[str, ...] = ()
    inverse_aliases: tuple[str, ...] = ()

    @property
    def symmetric(self) -> bool:
        return self.inverse == self.name


@dataclass(frozen=True)
class ObservedExample:
    """One fact of the observed predicate, as the ranking needs it."""

    kind: str
    subject_type: str
    subject_text: str
    object_type: str | None = None
    object_text: str = ""


@dataclass(frozen=True)
class RankedSuggestion:
    name: str
    score: float
    confident: bool
    inverse: bool
    kind_match: bool
    # Why: "typo", "inverse_name" (exact registry inverse), or "meaning" (embeddings).
    basis: str
    name_similarity: float = 0.0
    description_similarity: float = 0.0
    direction: float = 0.0  # < 0 reads the target backwards
    reasons: tuple[str, ...] = field(default_factory=tuple)


def core_words(name: str) -> str:
    """The words that carry a name's meaning: ``is_managed_by`` → ``managed``."""
    tokens = name.split("_")
    while len(tokens) > 1 and tokens[0] in _FRAME_WORDS:
        tokens = tokens[1:]
    while len(tokens) > 1 and tokens[-1] in _FRAME_WORDS:
        tokens = tokens[:-1]
    return " ".join(tokens)


_PREPOSITIONS = frozenset({"on", "in", "at", "to", "with", "for", "from", "into", "about"})


def reads_opposite(name: str, form: str) -> bool:
    """Whether ``name`` says with its words what ``form`` says backwards: the passive
    ``X_by`` against the active (``owned_by`` / ``owns``, ``was_attended_by`` /
    ``attended``) and the possessive ``has_X`` against ``X_of`` (``has_part`` /
    ``part_of``). A participle before another preposition is the same voice as ``_by``
    (``blocked_on`` / ``blocked_by``, ``employed_at`` / ``employed_by``)."""
    a, b = name.split("_"), form.split("_")
    a_by, b_by = len(a) > 1 and a[-1] == "by", len(b) > 1 and b[-1] == "by"
    by_flip = False
    if a_by != b_by:
        other = b if a_by else a
        content = [t for t in other if t not in _FRAME_WORDS]
        by_flip = not (
            len(content) > 1 and content[-1] in _PREPOSITIONS and content[0].endswith("ed")
        )
    has_flip = (len(a) > 1 and a[0] in ("has", "have")) != (len(b) > 1 and b[0] in ("has", "have"))
    return by_flip != has_flip


def observed_kind(examples: Sequence[ObservedExample]) -> str | None:
    kinds = Counter(e.kind for e in examples)
    return kinds.most_common(1)[0][0] if kinds else None


class Ranker:
    """The registry prepared once (its vectors embedded in one batch) for many names."""

    def __init__(self, candidates: Sequence[CandidatePredicate], embed: Embed) -> None:
        self.candidates = list(candidates)
        self.embed = embed
        self._forms: list[list[tuple[str, int]]] = [
            [(c.name, 1), *((a, 1) for a in c.aliases)]
            + (
                []
                if not c.inverse or c.symmetric
                else [(c.inverse, -1), *((a, -1) for a in c.inverse_aliases)]
            )
            for c in self.candidates
        ]
        texts = sorted(
            {core_words(form) for forms in self._forms for form, _ in forms}
            | {_description_text(c) for c in self.candidates}
            | {c.description for c in self.candidates if c.description}
        )
        self._stems = {
            c.name: frozenset().union(_stems(c.description), *(_stems(form) for form, _ in forms))
            for c, forms in zip(self.candidates, self._forms, strict=True)
        }
        vectors = embed(texts) if texts else []
        self._vectors: dict[str, Vector] = dict(zip(texts, vectors, strict=True))
        forward_forms = {c.name: c for c in self.candidates}
        for candidate in self.candidates:
            for alias in candidate.aliases:
                forward_forms.setdefault(alias, candidate)
        self._forward_forms = forward_forms
        backward: dict[str, CandidatePredicate] = {}
        for candidate in self.candidates:
            if candidate.inverse and not candidate.symmetric:
                for form in (candidate.inverse, *candidate.inverse_aliases):
                    if form not in forward_forms:
                        backward.setdefault(form, candidate)
        self._backward_forms = backward

    def rank(
        self, name: str, examples: Sequence[ObservedExample] = (), *, limit: int = SUGGESTIONS
    ) -> list[RankedSuggestion]:
        """The best ``limit`` registered predicates for observed ``name``, best first."""
        if not self.candidates:
            return []
        kind = observed_kind(examples)
        spelled = self._by_spelling(name, kind)
        self._prefetch([core_words(name), name.replace("_", " ")])
        query = self._vector_of(core_words(name))
        description_query = self._vector_of(name.replace("_", " "))
        pairs = list(zip(self.candidates, self._forms, strict=True))
        first = [
            self._by_meaning(name, examples, kind, c, forms, query, description_query, False)
            for c, forms in pairs
        ]
        # Reading the example sentences both ways costs embeddings: only for the few
        # candidates that can make the list.
        shortlist = {r.name for r in sorted(first, key=lambda r: -r.score)[: limit + 2]}
        chosen = [(c, forms) for c, forms in pairs if c.name in shortlist]
        self._prefetch(
            [
                t
                for c, _ in chosen
                for triple in self._sentence_triples(name, examples, c)
                for t in triple
            ]
        )
        ranked = [r for r in first if r.name not in shortlist] + [
            self._by_meaning(name, examples, kind, c, forms, query, description_query, True)
            for c, forms in chosen
        ]
        if spelled is not None:
            ranked = [spelled, *(r for r in ranked if r.name != spelled.name)]
        ranked.sort(key=lambda r: (-r.score, r.name))
        return ranked[:limit]

    # --- signals ----------------------------------------------------------------------

    def _by_spelling(self, name: str, kind: str | None) -> RankedSuggestion | None:
        backwards = self._backward_forms.get(name)
        if backwards is not None:
            return self._spelled(backwards, kind, inverse=True, basis="inverse_name")
        typo = fuzzy_typo_match(name, self._forward_forms)
        if typo is not None:
            return self._spelled(self._forward_forms[typo], kind, inverse=False, basis="typo")
        typo = fuzzy_typo_match(name, self._backward_forms)
        if typo is not None:
            return self._spelled(self._backward_forms[typo], kind, inverse=True, basis="typo")
        return None

    def _spelled(
        self, candidate: CandidatePredicate, kind: str | None, *, inverse: bool, basis: str
    ) -> RankedSuggestion:
        kind_match = kind is None or kind == candidate.kind
        score = SPELLING_SCORE if kind_match else SPELLING_SCORE * KIND_MISMATCH_FACTOR
        return RankedSuggestion(
            candidate.name,
            round(score, 4),
            kind_match,
            inverse,
            kind_match,
            basis,
            reasons=(f"{basis.replace('_', ' ')} of {candidate.name}",),
        )

    def _by_meaning(
        self,
        name: str,
        examples: Sequence[ObservedExample],
        kind: str | None,
        candidate: CandidatePredicate,
        forms: list[tuple[str, int]],
        query: Vector,
        description_query: Vector,
        with_sentences: bool,
    ) -> RankedSuggestion:
        own_stems = _stems(name)
        best_similarity, best_direction = -1.0, 1
        forward_best, backward_best = -1.0, -1.0
        # The form sharing a word stem with the name (managed_by / manages) says the
        # direction by its words; without one, the closest form in meaning does, weakly.
        kin_similarity, kin_direction = -1.0, 0
        for form, reading in forms:
            similarity = float(self._vectors[core_words(form)] @ query)
            way = reading * (-1 if reads_opposite(name, form) else 1)
            if way > 0:
                forward_best = max(forward_best, similarity)
            else:
                backward_best = max(backward_best, similarity)
            if similarity > best_similarity:
                best_similarity, best_direction = similarity, way
            if own_stems & _stems(form) and similarity > kin_similarity:
                kin_similarity, kin_direction = similarity, way
        description = max(
            float(self._vectors[_description_text(candidate)] @ description_query),
            float(self._vectors[candidate.description] @ description_query)
            if candidate.description
            else 0.0,
        )
        shared = _shared_stems(name, self._stems[candidate.name])
        score = (
            WEIGHT_FORM * max(best_similarity, 0.0)
            + WEIGHT_DESCRIPTION * max(description, 0.0)
            + WEIGHT_SHARED_WORDS * shared
        )
        reasons: list[str] = []
        kind_match = kind is None or kind == candidate.kind
        if not kind_match:
            score *= KIND_MISMATCH_FACTOR
            reasons.append(
                f"its facts are {kind}s, {candidate.name} is {with_article(candidate.kind)}"
            )
        forward_fit, backward_fit = _type_fits(examples, candidate)
        if examples and candidate.kind == "relation" and forward_fit == backward_fit == 0:
            score -= TYPE_MISFIT_PENALTY
            reasons.append(f"the example types fit neither reading of {candidate.name}'s hints")
        direction = 0.0
        if not candidate.symmetric and candidate.kind == "relation":
            if kin_direction:
                direction += VOTE_NAME * kin_direction
            else:
                margin = abs(forward_best - backward_best) if backward_best > -1 else 1.0
                direction += VOTE_NAME_BY_MEANING * best_direction * min(1.0, margin * 10)
            if examples:
                direction += VOTE_TYPES * (forward_fit - backward_fit) / len(examples)
                if with_sentences:
                    direction += VOTE_SENTENCES * self._sentence_vote(name, examples, candidate)
        inverse = direction < 0
        settled = (
            candidate.symmetric
            or not forms_backward(forms)
            or abs(direction) >= (CONFIDENT_DIRECTION)
        )
        if not settled:
            reasons.append("the direction is unclear")
        if inverse:
            reasons.append(f"reads as the inverse of {candidate.name}")
        score = max(0.0, min(score, 1.0))
        return RankedSuggestion(
            candidate.name,
            round(score, 4),
            kind_match and score >= CONFIDENT_SCORE and settled,
            inverse,
            kind_match,
            "meaning",
            round(best_similarity, 4),
            round(description, 4),
            round(direction, 4),
            tuple(reasons),
        )

    def _sentence_vote(
        self, name: str, examples: Sequence[ObservedExample], candidate: CandidatePredicate
    ) -> float:
        """Mean of sim(observed sentence, target read forwards) − sim(…, read backwards)
        over the relation examples that have both ends."""
        triples = self._sentence_triples(name, examples, candidate)
        if not triples:
            return 0.0
        votes = []
        for said, forwards, backwards in triples:
            vector = self._vector_of(said)
            votes.append(
                float(vector @ self._vector_of(forwards) - vector @ self._vector_of(backwards))
            )
        return sum(votes) / len(votes)

    @staticmethod
    def _sentence_triples(
        name: str, examples: Sequence[ObservedExample], candidate: CandidatePredicate
    ) -> list[tuple[str, str, str]]:
        pairs = [e for e in examples if e.kind == "relation" and e.object_text][:3]
        verb, target = name.replace("_", " "), candidate.name.replace("_", " ")
        return [
            (
                f"{e.subject_text} {verb} {e.object_text}",
                f"{e.subject_text} {target} {e.object_text}",
                f"{e.object_text} {target} {e.subject_text}",
            )
            for e in pairs
        ]

    def prepare(self, names: Sequence[str]) -> None:
        """Embed the words of many names in one batch before ranking each of them."""
        self._prefetch([t for n in names for t in (core_words(n), n.replace("_", " "))])

    def _prefetch(self, texts: list[str]) -> None:
        missing = sorted({t for t in texts if t not in self._vectors})
        if missing:
            self._vectors.update(zip(missing, self.embed(missing), strict=True))

    def _vector_of(self, text: str) -> Vector:
        vector = self._vectors.get(text)
        if vector is None:
            vector = self.embed([text])[0]
            self._vectors[text] = vector
        return vector


# Words that say nothing about which concept a name means.
_STOP_STEMS = frozenset(
    {"the", "a", "an", "of", "or", "and", "to", "in", "at", "on", "by", "is", "was", "with"}
    | {"for", "subject", "object", "has", "be", "it", "its", "that", "this", "from", "into"}
)


def _stems(text: str) -> frozenset[str]:
    words = text.lower().replace("_", " ").replace(",", " ").replace(";", " ").split()
    return frozenset(
        _british(_stemmer().stemWord(w)) for w in words if w.isalpha() and w not in _STOP_STEMS
    )


def _stemmer() -> Stemmer.Stemmer:
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = Stemmer.Stemmer("english")
    return stemmer


def _british(stem: str) -> str:
    """One spelling for ``organized`` and ``organised``: the registry is British."""
    return stem.replace("iz", "is") if "iz" in stem else stem


def _shared_stems(name: str, candidate_stems: frozenset[str]) -> float:
    """The share of the name's content words whose stems the candidate's name, aliases or
    description use (``acquainted_with`` and knows' "personally acquainted")."""
    own = _stems(name)
    return len(own & candidate_stems) / len(own) if own else 0.0


def forms_backward(forms: list[tuple[str, int]]) -> bool:
    return any(reading < 0 for _, reading in forms)


def _description_text(candidate: CandidatePredicate) -> str:
    words = candidate.name.replace("_", " ")
    return f"{words}: {candidate.description}".strip(": ")


def _type_fits(
    examples: Sequence[ObservedExample], candidate: CandidatePredicate
) -> tuple[int, int]:
    """How many relation examples fit the hints read forwards, and read backwards. With no
    hints on a side, any type fits it."""
    forward = backward = 0
    for e in examples:
        if e.kind != "relation" or e.object_type is None:
            continue
        forward += _fits(e.subject_type, candidate.subject_types) and _fits(
            e.object_type, candidate.object_types
        )
        backward += _fits(e.object_type, candidate.subject_types) and _fits(
            e.subject_type, candidate.object_types
        )
    return forward, backward


def _fits(entity_type: str, hints: tuple[str, ...]) -> bool:
    return not hints or entity_type in hints
