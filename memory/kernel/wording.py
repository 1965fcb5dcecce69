"""Counts in words for messages and audit summaries: "1 fact", "2 facts"."""

from __future__ import annotations


def counted(number: int, one: str, many: str | None = None) -> str:
    """``counted(1, "fact")`` → "1 fact"; ``counted(1234, "entity", "entities")`` →
    "1,234 entities"."""
    return f"{number:,} {one if number == 1 else (many or one + 's')}"


def with_article(word: str) -> str:
    """``with_article("organisation")`` → "an organisation"; ``"person"`` → "a person"
    (by the first letter: the words it is given — types, kinds, roles — have no silent h
    or sounded "yoo")."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"
