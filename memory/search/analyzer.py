"""The BM25 analyzer: text → the bag of terms that postings and queries are made of.

Two passes over the lowercased text, both Snowball-stemmed (English, PyStemmer):

- the **blank pass** splits on whitespace and strips punctuation from the ends of each
  token only, so ``MLWK3LL/A`` stays one term (``mlwk3ll/a``) and part numbers, paths and
  versions can be found exactly;
- the **class pass** splits each of those tokens at letter/digit/punctuation boundaries
  (``mlwk``, ``3``, ``ll``, ``a``) so a partial query still matches.

Both passes go into one bag. A token the class pass would not split (a plain word such
as ``returning``) is emitted once, not twice: counting it twice would double every term
frequency and document length, which BM25's saturation does not cancel out. This is
Lucene's word-delimiter filter with ``preserveOriginal``.

Lucene's default English stop set is removed (before stemming), because terms like
``the`` occur in every chunk: they add nothing to the ranking but would make every
query read the longest posting lists. Tokens longer than ``MAX_TERM_LENGTH`` characters
(hashes, base64) are dropped.
"""

from __future__ import annotations

import re
import threading
from collections import Counter

MAX_TERM_LENGTH = 100

# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET: short, so that content words stay.
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    ]
)

_EDGE_PUNCTUATION = re.compile(r"^[\W_]+|[\W_]+$")
_CLASS_RUN = re.compile(r"[^\W\d_]+|\d+")


_local = threading.local()


def _stem_words(words: list[str]) -> list[str]:
    # PyStemmer objects are not thread-safe: one per thread (web workers, benchmarks).
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        import Stemmer

        stemmer = _local.stemmer = Stemmer.Stemmer("english")
    return stemmer.stemWords(words)  # type: ignore[no-any-return]


def _word_tokens(word: str) -> list[str]:
    """One lowercased word's blank-pass token and class-pass parts."""
    blank = _EDGE_PUNCTUATION.sub("", word)
    if not blank:
        return []
    if blank.isalpha() or blank.isdigit():
        return [blank]  # a single character class: the class pass adds nothing
    parts = _CLASS_RUN.findall(blank)
    return [blank, *parts] if len(parts) > 1 or (parts and parts[0] != blank) else [blank]


def _kept(token: str) -> bool:
    return token not in STOPWORDS and len(token) <= MAX_TERM_LENGTH


def analyze(text: str) -> list[str]:
    """The terms of ``text`` in order (a bag: repeated terms repeat)."""
    kept = [t for word in text.lower().split() for t in _word_tokens(word) if _kept(t)]
    return _stem_words(kept) if kept else []


def analyze_words(text: str) -> list[list[str]]:
    """The terms of ``text`` grouped by the word they come from: a word's own term with
    its class-pass parts (``cd4``, ``cd``, ``4``), which occur wherever the word does.
    Flattened, the same terms as ``analyze``."""
    words = [[t for t in _word_tokens(w) if _kept(t)] for w in text.lower().split()]
    words = [word for word in words if word]
    stems = iter(_stem_words([t for word in words for t in word]) if words else [])
    return [[next(stems) for _ in word] for word in words]


def term_frequencies(text: str) -> tuple[Counter[str], int]:
    """Each term's count in ``text`` and the document length (terms in the bag)."""
    terms = analyze(text)
    return Counter(terms), len(terms)
