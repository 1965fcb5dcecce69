"""Keyphrases with RAKE (rake-nltk), configured so it never needs NLTK data.

rake-nltk's defaults call ``nltk.sent_tokenize`` (the punkt model) and NLTK's stopword
corpus, neither of which may be downloaded at run time. We pass everything explicitly:
``RAKE_STOPWORDS``, a regex sentence splitter and a regex word tokenizer that turns any
punctuation into a phrase break.

Choices (measured on Inspec, docs/BENCHMARKS.md):
- phrases of 1–3 words (``MAX_PHRASE_WORDS``): longer stop-word-free runs are mostly
  run-on noun piles, and rake-nltk drops (does not split) them;
- phrases without a letter (numbers, years) are dropped;
- the score is rake-nltk's default degree/frequency ratio. A word scores at least 1,
  so every phrase scores ≥ 1 and the 0.8 floor of the spec
  (``KEYWORD_MIN_SCORE``) keeps all candidates; the top-5 cut does the selecting.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

from memory.search.stopwords import RAKE_STOPWORDS

KEYWORDS_PER_DOCUMENT = 5
KEYWORD_MIN_SCORE = 0.8
MAX_PHRASE_WORDS = 3
MAX_KEYWORD_CHARS = 120

# Sentence ends and blank lines break phrases; a single newline is a wrapped line.
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?;:])\s+|\n\s*\n")
_WORD_OR_BREAK = re.compile(r"[^\W_]+(?:[-'][^\W_]+)*|[^\w\s]+|_+")
_BREAK = "."
_PUNCTUATION = frozenset(string.punctuation) | {_BREAK}


@dataclass(frozen=True)
class Keyphrase:
    text: str
    score: float


def sentences_split(text: str) -> list[str]:
    return [s for s in _SENTENCE_SPLIT.split(text) if s.strip()]


def words_split(sentence: str) -> list[str]:
    """Words, with every run of punctuation reduced to one phrase break."""
    return [token if token[0].isalnum() else _BREAK for token in _WORD_OR_BREAK.findall(sentence)]


def keyphrase_words(text: str) -> str:
    """``text`` as RAKE sees it: lowercase words separated by single spaces."""
    return " ".join(w for w in words_split(text.lower()) if w != _BREAK)


def keyphrases_extract(
    text: str, *, limit: int = KEYWORDS_PER_DOCUMENT, min_score: float = KEYWORD_MIN_SCORE
) -> list[Keyphrase]:
    """The best ``limit`` keyphrases of ``text`` scoring at least ``min_score``."""
    from rake_nltk import Rake

    rake = Rake(
        stopwords=set(RAKE_STOPWORDS),
        punctuations=set(_PUNCTUATION),
        max_length=MAX_PHRASE_WORDS,
        sentence_tokenizer=sentences_split,
        word_tokenizer=words_split,
    )
    rake.extract_keywords_from_text(text)
    found: dict[str, float] = {}
    for score, phrase in rake.get_ranked_phrases_with_scores():
        if len(found) >= limit or score < min_score:
            break
        if phrase in found or len(phrase) > MAX_KEYWORD_CHARS:
            continue
        if not any(ch.isalpha() for ch in phrase):
            continue
        found[phrase] = float(score)
    return [Keyphrase(text=t, score=s) for t, s in found.items()]
