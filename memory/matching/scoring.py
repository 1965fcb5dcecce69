"""Comparing a pair of entities field by field, for the Fellegi–Sunter model.

Each field of the two entities — the name, each identifier kind, each attribute, the
embedding — is compared by a comparator that returns an agreement *level* (0 = they
disagree, higher = closer; -1 = a side has no value, so the field says nothing).
``duplicate_model`` weighs the levels: for every field and level, ``m`` = P(level | the
pair is one thing) and ``u`` = P(level | two things). ``DEFAULT_M`` / ``DEFAULT_U`` here
are the hand-set weights that stand in until a type's own can be estimated.

Comparators come from rapidfuzz (Jaro–Winkler, token-sort ratio, OSA distance) and
jellyfish (metaphone).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import date
from functools import lru_cache
from typing import Any

import jellyfish
from rapidfuzz import fuzz
from rapidfuzz.distance import OSA, JaroWinkler

from memory.domain.entity_names import LEGAL_SUFFIXES

MISSING = -1
# Levels per comparator kind, best last; their labels are what ``explain`` shows.
LEVELS: dict[str, tuple[str, ...]] = {
    "name": (
        "different",
        "alike or same sounds",
        "one slip apart",
        "same consonants, only they",
        "one telling slip apart",
        "same words",
    ),
    "identifier": ("different", "one slip apart", "equal"),
    "date": ("different", "same year", "day/month swap or one-digit slip", "equal"),
    "code": ("different", "one slip apart", "equal"),
    "number": ("different", "within 5%", "within 1%", "equal"),
    "text": ("different", "faintly alike", "alike", "equal"),
    "embedding": ("far", "near", "close", "very close"),
    # Compared only when the types differ; "other" is an entity nobody typed.
    "type": ("different", "one of them untyped (other)"),
}
# Hand-set weights for a context too small to learn from: m and u per level, best last.
DEFAULT_M: dict[str, tuple[float, ...]] = {
    "name": (0.02, 0.05, 0.16, 0.06, 0.28, 0.43),  # one person, one name: usually the same words
    "identifier": (0.05, 0.10, 0.85),
    "date": (0.02, 0.05, 0.15, 0.78),  # a person's date of birth seldom differs outright
    "code": (0.08, 0.12, 0.80),
    "number": (0.10, 0.05, 0.10, 0.75),
    "text": (0.06, 0.10, 0.24, 0.60),
    # Compared only when the names differ (a vector encodes its name, §21, §46).
    "embedding": (0.3, 0.2, 0.2, 0.3),
    # One thing written once with its type and once without it: a share of duplicates,
    # though a smaller one than among two things (never learnt: hand-set, as the rest
    # here; equal types are what blocking requires of every other pair, weight ~0).
    "type": (0.01, 0.05),
}
DEFAULT_U: dict[str, tuple[float, ...]] = {
    # A slip alone (level 2) stays below the match probability; with one agreeing
    # attribute or identifier it is above.
    "name": (0.9552, 0.03, 0.012, 0.0002, 0.0008, 0.001),
    "identifier": (0.9958, 0.004, 0.0002),  # one e-mail address, two people: rare
    "date": (0.93, 0.065, 0.004, 0.001),
    "code": (0.97, 0.02, 0.01),
    "number": (0.9, 0.05, 0.03, 0.02),
    "text": (0.9, 0.07, 0.02, 0.01),
    "embedding": (0.9, 0.08, 0.015, 0.005),
    "type": (0.2, 0.15),
}
DEFAULT_PRIOR = 0.05  # P(one thing) among blocked pairs before EM says otherwise
MATCH_PROBABILITY = 0.5  # a pair at or above this is a candidate for a curator
SMOOTH = 1e-4  # no level is impossible: a single odd field must not be ±infinite
MAX_WEIGHT = 12.0  # |log2(m/u)| cap, for the same reason
DATE_RE = re.compile(r"^(\d{4})-?(\d{2})-?(\d{2})$")
DMY_RE = re.compile(r"^(\d{1,2})[./](\d{1,2})[./](\d{4})$")
CODE_RE = re.compile(r"^[0-9][0-9 \-]{0,15}$")
NUMBER_RE = re.compile(r"^-?\d+(\.\d+)?$")


@dataclass(frozen=True)
class Record:
    """What the comparators read of one entity."""

    id: int
    type: str
    scope: str
    key: str  # the normalized key
    alias_keys: tuple[str, ...] = ()
    attributes: dict[str, Any] = field(default_factory=dict)
    identifiers: dict[str, frozenset[str]] = field(default_factory=dict)
    # Whether the entity has a vector (None: not read). Pairs without one on both
    # sides have no cosine to ask for.
    has_vector: bool | None = None


@dataclass(frozen=True)
class Comparison:
    field: str  # "name", "id:email", "attr:date_of_birth:date", "embedding"
    kind: str  # a key of LEVELS
    level: int


# --- comparators ----------------------------------------------------------------------


# The keys below are pure functions of a name, and a check or a re-estimate compares each
# name with many others (a fit's thousands of pairs read every sampled name several
# times): each is computed once per distinct name, up to this many names.
NAME_CACHE = 1 << 16


def name_words(key: str) -> list[str]:
    """A normalized name's words without legal forms ("ltd", "gmbh") wherever they stand
    ("freight ltd kamo" is "kamo freight ltd" reordered); all of them if nothing else."""
    words = key.split()
    kept = [w for w in words if w not in LEGAL_SUFFIXES]
    return kept or words


@lru_cache(maxsize=NAME_CACHE)
def sorted_tokens(key: str) -> str:
    return " ".join(sorted(set(name_words(key))))


@lru_cache(maxsize=NAME_CACHE)
def sound_key(key: str) -> str:
    return " ".join(sorted({jellyfish.metaphone(t) for t in name_words(key) if t}))


def _word_consonants(word: str) -> str:
    """A word's first letter and its consonants in order, doubled letters once, "ph" as
    f and c as k: what a respelling of the same sounds keeps (Pollock and Zamora's
    skeleton key: "catherine" and "kathryn" are both "kthrn")."""
    word = word.replace("ph", "f").replace("c", "k")
    head, rest = word[:1], _VOWELS.sub("", word[1:])
    return _DOUBLED.sub(r"\1", head + rest)


_VOWELS = re.compile(r"[aeiouy]")
_DOUBLED = re.compile(r"(.)\1+")


@lru_cache(maxsize=NAME_CACHE)
def consonant_key(key: str) -> str:
    return " ".join(sorted(_word_consonants(w) for w in name_words(key)))


LONG_WORD = 7  # one slip in a shorter word more often spells another name ("kamo"/"kama")
# Agreeing on this many consonants of the words that differ seldom happens by chance
# (each is one of ~15 letters); two or three often do ("kamo"/"kima").
RESPELT_CONSONANTS = 5


def name_level(a: Record, b: Record, rare: Collection[str] = frozenset()) -> int:
    """The best level over both entities' names and aliases. ``rare``: blocking keys few
    entities of the type hold — ``t:`` sounds of words (sharing one tells two names of
    one slip apart from two names that merely look alike, docs/decisions/0021) and
    ``k:`` consonant keys only the pair has (§46)."""
    best = 0
    for x in (a.key, *a.alias_keys):
        for y in (b.key, *b.alias_keys):
            best = max(best, _name_pair_level(x, y, rare))
            if best == SAME_WORDS:
                return best
    return best


SAME_WORDS, TELLING_SLIP, RESPELT, SLIP, ALIKE, DIFFERENT = 5, 4, 3, 2, 1, 0


def _name_pair_level(x: str, y: str, rare: Collection[str]) -> int:
    """5 the same words (legal forms aside); 4 one slip apart where the slip is not all
    that tells them apart (in a long word, beside a rare shared word, or a swap or
    doubled letter, which seldom spell another name); 3 the same consonants in an order
    only these two names have, the words that differ holding at least
    RESPELT_CONSONANTS of them (a respelling of the same sounds); 2 one slip or very
    alike otherwise; 1 the same sounds, alike, or initials of the other's words; 0
    different (or different numbers)."""
    if not x or not y:
        return DIFFERENT
    if _numbers(x) != _numbers(y):  # "Apollo 11" / "Apollo 13", "Room 1" / "Room 2"
        return DIFFERENT
    if sorted_tokens(x) == sorted_tokens(y):
        return SAME_WORDS
    x, y = " ".join(name_words(x)), " ".join(name_words(y))
    similarity = max(JaroWinkler.similarity(x, y), fuzz.token_sort_ratio(x, y) / 100.0)
    slip = _one_slip_word(x, y)
    if slip is not None or similarity >= 0.94:
        shared = set(x.split()) & set(y.split())
        if slip is not None and (slip[0] >= LONG_WORD or (slip[1] and slip[0] >= 4)):
            return TELLING_SLIP
        if any("t:" + jellyfish.metaphone(w) in rare for w in shared):
            return TELLING_SLIP
    if _respelt(x, y, rare):
        return RESPELT
    if slip is not None or similarity >= 0.94:
        return SLIP
    if similarity >= 0.88 or sound_key(x) == sound_key(y) or _initials_agree(x, y):
        return ALIKE
    return DIFFERENT


def _initials_agree(x: str, y: str) -> bool:
    """The names share a word and every other word of one is the initial of a word of
    the other ("k telisuva" / "kamori telisuva", "telisuva k" / "kamori telisuva")."""
    apart = _words_apart(x, y)
    if apart is None or not set(x.split()) & set(y.split()):
        return False
    only_x, only_y = apart
    if not only_x or len(only_x) != len(only_y):
        return False
    initials, words = (only_x, only_y) if all(len(w) == 1 for w in only_x) else (only_y, only_x)
    if not all(len(w) == 1 for w in initials):
        return False
    return sorted(initials) == sorted(w[0] for w in words)


def _words_apart(x: str, y: str) -> tuple[list[str], list[str]] | None:
    """The words only ``x`` has and the words only ``y`` has, for two names of as many
    words; None when their lengths differ."""
    mine, theirs = x.split(), y.split()
    if len(mine) != len(theirs):
        return None
    return sorted(set(mine) - set(theirs)), sorted(set(theirs) - set(mine))


def _respelt(x: str, y: str, rare: Collection[str]) -> bool:
    key = consonant_key(x)
    if key != consonant_key(y) or "k:" + key not in rare:
        return False
    differing = set(x.split()) - set(y.split())
    return sum(len(_word_consonants(w)) for w in differing) >= RESPELT_CONSONANTS


@lru_cache(maxsize=NAME_CACHE)
def _numbers(key: str) -> tuple[str, ...]:
    return tuple(sorted(token for token in key.split() if any(ch.isdigit() for ch in token)))


def _one_slip_word(x: str, y: str) -> tuple[int, bool] | None:
    """Same words but one, and that one a single slip (letter dropped, added, replaced,
    two swapped): the shorter spelling's length, and whether the slip is two letters
    swapped or one doubled (typing slips that seldom spell another name); None
    otherwise."""
    apart = _words_apart(x, y)
    if apart is None or len(apart[0]) != 1 or len(apart[1]) != 1:
        return None
    u, v = apart[0][0], apart[1][0]
    if OSA.distance(u, v, score_cutoff=1) > 1:
        return None
    return min(len(u), len(v)), _swapped(u, v) or _doubled(u, v) or _doubled(v, u)


def _swapped(u: str, v: str) -> bool:
    diff = [i for i, (p, q) in enumerate(zip(u, v, strict=False)) if p != q]
    return len(u) == len(v) and len(diff) == 2 and diff[1] == diff[0] + 1


def _doubled(longer: str, shorter: str) -> bool:
    """``longer`` is ``shorter`` with one of its letters typed twice."""
    if len(longer) != len(shorter) + 1:
        return False
    return any(
        longer[i] == longer[i - 1] and longer[:i] + longer[i + 1 :] == shorter
        for i in range(1, len(longer))
    )


def identifier_level(xs: frozenset[str], ys: frozenset[str]) -> int:
    if xs & ys:
        return 2
    for x in xs:
        for y in ys:
            if min(len(x), len(y)) >= 5 and OSA.distance(x, y, score_cutoff=1) <= 1:
                return 1
    return 0


def parse_date(value: str) -> date | None:
    text = value.strip()
    match = DATE_RE.match(text)
    if match:
        year, month, day = (int(g) for g in match.groups())
    elif match := DMY_RE.match(text):
        day, month, year = (int(g) for g in match.groups())
    else:
        return None
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _date_digits(value: str) -> str:
    return re.sub(r"\D", "", value)


def date_level(x: str, y: str) -> int:
    dx, dy = parse_date(x), parse_date(y)
    if dx is not None and dy is not None:
        if dx == dy:
            return 3
        if (dx.year, dx.month, dx.day) == (dy.year, dy.day, dy.month):
            return 2
        ix, iy = dx.isoformat(), dy.isoformat()
        if sum(p != q for p, q in zip(ix, iy, strict=True)) == 1 or OSA.distance(ix, iy) == 1:
            return 2
        return 1 if dx.year == dy.year else 0
    # One side is a date with a slip that makes it no date (month 13): compare digits.
    gx, gy = _date_digits(x), _date_digits(y)
    if gx == gy:
        return 3
    if len(gx) == len(gy) == 8 and OSA.distance(gx, gy, score_cutoff=1) <= 1:
        return 2
    return 1 if gx[:4] == gy[:4] else 0


def equal_key(kind: str, value: str) -> str:
    """What the ``kind``'s comparator calls equal, as one string: two values are at its
    top level exactly when their keys are the same (dates by their day, codes without
    spaces and dashes, text without case and extra spaces)."""
    if kind == "date":
        day = parse_date(value)
        return day.isoformat() if day is not None else _date_digits(value)
    if kind == "code":
        return re.sub(r"[\s\-]", "", value)
    if kind == "number":
        return str(float(value))
    return " ".join(value.lower().split())


def code_level(x: str, y: str) -> int:
    gx, gy = equal_key("code", x), equal_key("code", y)
    if gx == gy:
        return 2
    return 1 if OSA.distance(gx, gy, score_cutoff=1) <= 1 else 0


def number_level(x: float, y: float) -> int:
    if x == y:
        return 3
    spread = abs(x - y) / max(abs(x), abs(y))
    return 2 if spread <= 0.01 else 1 if spread <= 0.05 else 0


def text_level(x: str, y: str) -> int:
    a, b = equal_key("text", x), equal_key("text", y)
    if a == b:
        return 3
    similarity = max(JaroWinkler.similarity(a, b), fuzz.token_sort_ratio(a, b) / 100.0)
    return 2 if similarity >= 0.92 else 1 if similarity >= 0.8 else 0


def embedding_level(cosine: float | None) -> int:
    if cosine is None:
        return MISSING
    return 3 if cosine >= 0.95 else 2 if cosine >= 0.88 else 1 if cosine >= 0.75 else 0


def attribute_kind(key: str, x: str, y: str) -> str:
    """How to compare two values of one attribute: as dates, codes (postcodes, numbers
    of a house or a record: digits, where one slip matters), numbers, or text."""
    if DATE_RE.match(x.strip()) or DMY_RE.match(x.strip()):
        return "date"
    if CODE_RE.match(x) and CODE_RE.match(y) and "." not in x + y:
        return "code"
    if NUMBER_RE.match(x) and NUMBER_RE.match(y):
        return "number"
    return "text"


def attribute_scalar(value: Any) -> str | None:
    """An attribute's value as the comparators read it; None for no value or a nested one."""
    if value is None or isinstance(value, (dict, list)):
        return None
    text = str(value).strip()
    return text[:200] or None


def attribute_comparison(key: str, a: Any, b: Any) -> Comparison | None:
    """Two values of attribute ``key`` compared by their kind; None if a side has none."""
    x, y = attribute_scalar(a), attribute_scalar(b)
    if x is None or y is None:
        return None
    kind = attribute_kind(key, x, y)
    if kind == "date":
        level = date_level(x, y)
    elif kind == "code":
        level = code_level(x, y)
    elif kind == "number":
        level = number_level(float(x), float(y))
    else:
        level = text_level(x, y)
    return Comparison(f"attr:{key}:{kind}", kind, level)


UNTYPED = "other"  # the type of an entity nobody typed (entity_type_normalize's fallback)


def pair_type(a: Record, b: Record) -> str | None:
    """The type a pair is scored as: theirs when they share it, the typed one's when the
    other is untyped (``other``: a name written without its type may well be the typed
    entity of that name, and the difference is weighed, not a veto); None for two
    different known types, which are never one thing ("Apple" the organisation and the
    product)."""
    if a.type == b.type:
        return a.type
    if UNTYPED in (a.type, b.type):
        return b.type if a.type == UNTYPED else a.type
    return None


def compare(
    a: Record, b: Record, *, cosine: float | None = None, rare: Collection[str] = frozenset()
) -> list[Comparison]:
    """Every field both entities have, with its level (``rare``: see ``name_level``), and
    their types when they differ."""
    names = name_level(a, b, rare)
    out = [Comparison("name", "name", names)]
    if a.type != b.type:
        out.append(Comparison("type", "type", int(UNTYPED in (a.type, b.type))))
    for kind in sorted(a.identifiers.keys() & b.identifiers.keys()):
        level = identifier_level(a.identifiers[kind], b.identifiers[kind])
        out.append(Comparison(f"id:{kind}", "identifier", level))
    for key in sorted(a.attributes.keys() & b.attributes.keys()):
        if (found := attribute_comparison(key, a.attributes[key], b.attributes[key])) is not None:
            out.append(found)
    # A vector encodes its entity's name (§21): it is evidence of its own only when the
    # names differ, where a close vector is what a synonym the model knows looks like.
    # Names that differ in their numbers ("Apollo 11" / "Apollo 13") stay two things.
    numbers_differ = _numbers(a.key) != _numbers(b.key)
    if names == DIFFERENT and not numbers_differ and (level := embedding_level(cosine)) != -1:
        out.append(Comparison("embedding", "embedding", level))
    return out
