"""Predicate name forms: normalization, refusal of hostile text, and the typo matcher.

Pure functions (no ORM) shared by the registry services, selectors and ingest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from rapidfuzz.distance import DamerauLevenshtein

from memory.kernel.errors import ValidationFailed

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
# A registered name of this many letters (underscores aside) may be two slips away.
_TWO_SLIP_MIN_LETTERS = 6
_NOT_A_TYPO = 3

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
    """The one candidate that ``form`` is a typo of, else None.

    ``form`` and the candidates are normalized names. The match is deliberately narrow so
    that it fixes slips of the keyboard and never maps onto another concept: the same
    number of ``_`` tokens, short tokens (``at``, ``to``, ``on``) equal, and the differing
    tokens each a typo of the candidate's token (see ``_token_typo_cost``), at most one
    slip in all for a candidate under six letters and two for a longer one
    (``curent_titel``, ``acquird``). ``manager`` stays away from ``manages``, ``knows``
    from ``owns``, ``works_on`` from ``works_at``, ``hates`` from ``hosted``. An exact
    candidate wins; two or more typo matches are ambiguous and give None.
    """
    pool = set(candidates)
    if form in pool:
        return form
    tokens = form.split("_")
    matches = [c for c in sorted(pool) if _is_typo_of(tokens, c)]
    return matches[0] if len(matches) == 1 else None


def _is_typo_of(tokens: list[str], candidate: str) -> bool:
    other = candidate.split("_")
    if len(tokens) != len(other):
        return False
    budget = 2 if len(candidate.replace("_", "")) >= _TWO_SLIP_MIN_LETTERS else 1
    spent = 0
    for typed, word in zip(tokens, other, strict=True):
        if typed != word:
            spent += _token_typo_cost(typed, word)
            if spent > budget:
                return False
    return spent > 0


def _token_typo_cost(typed: str, word: str) -> int:
    """How many slips turn ``word`` into ``typed`` (3 meaning "not a typo").

    One typo-shaped edit (``_is_typo``) counts 1 even between real words (``work`` for
    ``works``). Otherwise ``typed`` must not be an English word or an inflection of one —
    ``funded``, ``owes``, ``hates`` and ``notes`` are other concepts, not slips — and then
    up to two edits of the kinds hands make count: two neighbouring letters swapped, a
    letter dropped, a letter typed twice or in between, a neighbouring key hit.
    """
    if _is_typo(typed, word):
        return 1
    if min(len(typed), len(word)) < _FUZZY_MIN_TOKEN or typed[0] != word[0]:
        return _NOT_A_TYPO
    if is_english_word(typed):
        return _NOT_A_TYPO
    return _slips(typed, word, _NOT_A_TYPO - 1)


def _slips(typed: str, word: str, budget: int) -> int:
    """The fewest typo-shaped edits (at most ``budget``) from ``word`` to ``typed``, else
    _NOT_A_TYPO. Explores edits only at the first difference, so it stays tiny."""
    i = 0
    while i < len(typed) and i < len(word) and typed[i] == word[i]:
        i += 1
    if i == len(typed) and i == len(word):
        return 0
    if budget == 0:
        return _NOT_A_TYPO
    options: list[tuple[str, str]] = []
    if (
        i + 1 < len(typed)
        and i + 1 < len(word)
        and typed[i] == word[i + 1]
        and typed[i + 1] == word[i]
    ):
        options.append((typed[i + 2 :], word[i + 2 :]))  # swapped neighbours
    if i < len(word):
        options.append((typed[i:], word[i + 1 :]))  # a letter dropped
    if i < len(typed):
        options.append((typed[i + 1 :], word[i:]))  # a letter added
    if (
        i < len(typed)
        and i < len(word)
        and i != len(word) - 1
        and typed[i] in _KEY_NEIGHBOURS.get(word[i], frozenset())
    ):
        options.append((typed[i + 1 :], word[i + 1 :]))  # a neighbouring key
    best = _NOT_A_TYPO
    for rest_typed, rest_word in options:
        best = min(best, 1 + _slips(rest_typed, rest_word, budget - 1))
    return best


_INFLECTIONS = ("ies", "es", "s", "ed", "d", "ing", "er", "ers")


def is_english_word(token: str) -> bool:
    """Whether ``token`` is an English word or a regular inflection of one (``hates``,
    ``hosted``, ``mentoring``): the word lists carry base forms only."""
    words = _english_words()
    if token in words:
        return True
    for suffix in _INFLECTIONS:
        if token.endswith(suffix) and len(token) - len(suffix) >= 3:
            stem = token[: -len(suffix)]
            if stem in words or (suffix == "ies" and stem + "y" in words):
                return True
            # Doubled final consonant before the ending: planned, stopping.
            if len(stem) > 3 and stem[-1] == stem[-2] and stem[:-1] in words:
                return True
    return False


@lru_cache(maxsize=1)
def _english_words() -> frozenset[str]:
    # Two dictionaries shipped inside the package (about 260k lower-case words, 0.1 s).
    from english_words import get_english_words_set

    return frozenset(get_english_words_set(["web2", "gcide"], lower=True, alpha=True))


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
