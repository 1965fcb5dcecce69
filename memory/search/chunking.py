"""Splitting a document into chunks: paragraph first, then sentence, then word.

Sizes (in whitespace-separated words):
- ``CHUNK_MAX_WORDS`` = 150: all-MiniLM-L6-v2 reads at most 256 word pieces and English
  runs at about 1.3–1.6 pieces per word, so 150 words plus the document title prepended
  for indexing stay inside the window — nothing a chunk says is cut off its vector;
- ``CHUNK_MIN_WORDS`` = 40: a chunk is not closed at a paragraph boundary before it has
  this much text, so short paragraphs are packed together instead of becoming
  near-empty chunks with unreliable vectors.

Paragraphs (blank-line separated) are packed whole while they fit. A paragraph that does
not fit is split at sentence ends into pieces of balanced size (a 200-word paragraph
becomes 100 + 100 words, not 150 + 50). A single sentence longer than the maximum is
cut at word boundaries. Chunks never overlap.
"""

from __future__ import annotations

import math
import re

CHUNK_MAX_WORDS = 150
CHUNK_MIN_WORDS = 40

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n+")
# A sentence ends at . ! ? (optionally closed by quotes/brackets) before whitespace and
# a capital, digit or opening quote/bracket: "e.g. the" and "3.5 kg" do not split.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[A-Z0-9\"'(\[])")


def _words(text: str) -> int:
    return len(text.split())


def _sentences(paragraph: str) -> list[str]:
    pieces: list[str] = []
    for sentence in _SENTENCE_END.split(paragraph):
        words = sentence.split()
        for start in range(0, len(words), CHUNK_MAX_WORDS):
            pieces.append(" ".join(words[start : start + CHUNK_MAX_WORDS]))
    return [p for p in pieces if p]


def _split_paragraph(paragraph: str) -> list[str]:
    """Sentences packed into pieces of about equal size, none over the maximum."""
    sentences = _sentences(paragraph)
    total = sum(_words(s) for s in sentences)
    target = math.ceil(total / math.ceil(total / CHUNK_MAX_WORDS))
    pieces: list[list[str]] = [[]]
    size = 0
    for sentence in sentences:
        n = _words(sentence)
        if pieces[-1] and (size + n > CHUNK_MAX_WORDS or size >= target):
            pieces.append([])
            size = 0
        pieces[-1].append(sentence)
        size += n
    return [" ".join(piece) for piece in pieces if piece]


def chunk_text(text: str) -> list[str]:
    """The chunks of ``text`` in order; empty text gives no chunks."""
    chunks: list[str] = []
    current: list[str] = []
    size = 0

    def flush() -> None:
        nonlocal current, size
        if current:
            chunks.append("\n\n".join(current))
        current, size = [], 0

    for raw in _PARAGRAPH_BREAK.split(text.replace("\r\n", "\n").strip()):
        paragraph = raw.strip()
        n = _words(paragraph)
        if not n:
            continue
        if size + n <= CHUNK_MAX_WORDS:
            current.append(paragraph)
            size += n
            continue
        if size >= CHUNK_MIN_WORDS or n <= CHUNK_MAX_WORDS:
            flush()
        if n <= CHUNK_MAX_WORDS:
            current.append(paragraph)
            size = n
            continue
        for piece in _split_paragraph(paragraph):
            m = _words(piece)
            if size + m > CHUNK_MAX_WORDS:
                flush()
            current.append(piece)
            size += m
    flush()
    return chunks
