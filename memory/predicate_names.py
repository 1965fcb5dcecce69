"""Predicate name forms: normalization, refusal of hostile text, and the typo matcher.

Pure functions (no ORM) shared by the registry services, selectors and ingest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rapidfuzz.distance import DamerauLevenshtein

from memory.errors import ValidationFailed

MAX_PREDICATE_LENGTH = 64
# Raw text is capped before any regex work; Fact.raw_predicate holds at most 200 characters.
MAX_RAW_LENGTH = 200

# Only these characters may appear in raw predicate text. Anything else (brackets, quotes,
# slashes, Cypher or SQL fragments) is refused as a whole rather than reduced, so that
# `KNOWS]->() DETACH DELETE n //` can never turn into a plausible-looking predicate.
_ALLOWED_RAW = re.compile(r"[A-Za-z0-9 _-]+")
_CAMEL_LOWER_UPPER = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")  # worksAt → works_At
_CAMEL_ACRONYM = re.compile(r"(?<=[A-Z])(?=[A-Z][a-z])")  # HTTPServer → HTTP_Server
_SEPARATORS = re.compile(r"[\s_-]+")

# Fuzzy snapping only considers tokens at least this long; shorter ones (at, of, to, on,
# by, with...) carry the meaning of the predicate and must match exactly.
_FUZZY_MIN_TOKEN = 4

_KEYBOARD_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
_ROW_OFFSETS = (0.0, 0.5, 1.0)  # how far each QWERTY row is shifted to the right


def predicate_normalize(raw: str) -> str:
    """The snake_case form of ``raw``: ``worksAt``, ``works-at``, ``Works At`` → ``works_at``.

    Total and pure; it does not validate. Call ``predicate_check_text`` first on untrusted
    input.
    """
    text = _CAMEL_LOWER_UPPER.sub("_", raw.strip())
    text = _CAMEL_ACRONYM.sub("_", text)
    return _SEPARATORS.sub("_", text.lower()).strip("_")


def predicate_check_text(raw: str) -> None:
    """Raise ValidationFailed(code="invalid_predicate") unless ``raw`` is a usable predicate.

    Allowed: ASCII letters, digits, spaces, ``_`` and ``-`` (after stripping surrounding
    whitespace), at least one letter or digit, at most 64 characters once normalized.
    """
    stripped = raw.strip()
    shown = repr(raw[:80])
    if not stripped:
        raise ValidationFailed("predicate is empty", code="invalid_predicate")
    if len(stripped) > MAX_RAW_LENGTH or not _ALLOWED_RAW.fullmatch(stripped):
        raise ValidationFailed(
            f"invalid predicate {shown}: use only letters, digits, spaces, '_' and '-'",
            code="invalid_predicate",
        )
    normalized = predicate_normalize(stripped)
    if not normalized:
        raise ValidationFailed(
            f"invalid predicate {shown}: it needs at least one letter or digit",
            code="invalid_predicate",
        )
    if len(normalized) > MAX_PREDICATE_LENGTH:
        raise ValidationFailed(
            f"invalid predicate {shown}: longer than {MAX_PREDICATE_LENGTH} characters",
            code="invalid_predicate",
        )


def fuzzy_typo_match(form: str, candidates: Iterable[str]) -> str | None:
    """The one candidate that ``form`` is a single typo of, else None.

    ``form`` and the candidates are normalized names. The match is deliberately narrow so
    that it fixes slips of the keyboard and never maps onto another concept: the same
    number of ``_`` tokens, all tokens equal except one, and that one differs by a single
    typo-shaped edit (see ``_is_typo``). ``manager`` stays away from ``manages``,
    ``knows`` from ``owns``, ``works_with`` from ``works_at``. An exact candidate wins;
    two or more typo matches are ambiguous and give None.
    """
    pool = set(candidates)
    if form in pool:
        return form
    tokens = form.split("_")
    matches = [c for c in sorted(pool) if _tokens_one_typo_apart(tokens, c.split("_"))]
    return matches[0] if len(matches) == 1 else None


def _tokens_one_typo_apart(tokens: list[str], other: list[str]) -> bool:
    if len(tokens) != len(other):
        return False
    differing = [(a, b) for a, b in zip(tokens, other, strict=True) if a != b]
    return len(differing) == 1 and _is_typo(*differing[0])


def _is_typo(typed: str, word: str) -> bool:
    """Whether ``typed`` is ``word`` with one slip of the keyboard.

    Both at least four characters, the same first letter, Damerau-Levenshtein distance 1,
    and the edit is one of: two neighbouring letters swapped (``wroks``), a doubled letter
    dropped or added (``curent``), a trailing ``s`` dropped or added (``work``), or a
    letter inside the word replaced by a neighbouring key (``wprks``). Other single edits
    mostly make real, different words (``funded``/``founded``, ``manager``/``manages``,
    ``owes``/``owns``, ``port``/``part``) and are left alone.
    """
    if min(len(typed), len(word)) < _FUZZY_MIN_TOKEN or typed[0] != word[0]:
        return False
    if DamerauLevenshtein.distance(typed, word, score_cutoff=1) > 1:
        return False
    if len(typed) == len(word):
        return _is_transposition(typed, word) or _is_adjacent_key_substitution(typed, word)
    longer, shorter = (typed, word) if len(typed) > len(word) else (word, typed)
    return _is_doubled_letter(longer, shorter) or longer == shorter + "s"


def _is_transposition(a: str, b: str) -> bool:
    diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    return len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]]


def _is_adjacent_key_substitution(a: str, b: str) -> bool:
    diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    if len(diff) != 1:
        return False
    i = diff[0]
    # The last letter is where inflection lives (manages/manager, noted/notes): never there.
    return i != len(a) - 1 and b[i] in _KEY_NEIGHBOURS.get(a[i], frozenset())


def _is_doubled_letter(longer: str, shorter: str) -> bool:
    """``longer`` is ``shorter`` with one letter doubled (``current`` / ``curent``)."""
    for i in range(1, len(longer)):
        if longer[i] == longer[i - 1] and longer[:i] + longer[i + 1 :] == shorter:
            return True
    return False


def _key_neighbours() -> dict[str, frozenset[str]]:
    positions = {
        key: (row, col + _ROW_OFFSETS[row])
        for row, keys in enumerate(_KEYBOARD_ROWS)
        for col, key in enumerate(keys)
    }
    return {
        key: frozenset(
            other
            for other, (r2, x2) in positions.items()
            if other != key and abs(r2 - r) <= 1 and abs(x2 - x) <= 1
        )
        for key, (r, x) in positions.items()
    }


_KEY_NEIGHBOURS = _key_neighbours()
