"""What a question asks, read from its words alone (no database): the words that may name
a relation, the type of thing it asks for, and the spans that may name an entity.

The memory context block links the spans to entities and matches the words against the
predicates of the registry (``memory.selectors.fact_relevance``).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from memory.domain.entity_names import TYPE_SYNONYMS, entity_normalize_key
from memory.models.entity import ENTITY_TYPES, EntityType
from memory.search.analyzer import analyze

# Words that shape a question but never name a relation or an entity.
QUESTION_WORDS = frozenset(
    {
        "who", "whom", "whose", "what", "which", "where", "when", "why", "how", "does",
        "do", "did", "done", "has", "have", "had", "can", "could", "would", "should",
        "s", "me", "tell", "know", "about", "anything", "currently", "now", "today",
        "someone", "somebody", "any", "one", "ones", "kind", "sort", "name", "i", "we",
        "you", "our", "my", "your", "his", "her", "its", "him", "she", "he", "from",
    }
)  # fmt: skip
MAX_NAME_WORDS = 6  # the longest span tried as an entity's name
_TOKEN = re.compile(r"[\w@.+\-']+", re.UNICODE)
_POSSESSIVE = re.compile(r"(?:'s|’s|'|’)$")
_EDGE = re.compile(r"^[\W_]+|[\W_]+$")


@dataclass(frozen=True)
class Span:
    """Words ``start``..``end`` (exclusive) of the question and their entity key."""

    start: int
    end: int
    text: str
    key: str


@dataclass(frozen=True)
class Question:
    text: str
    tokens: tuple[str, ...]  # the question's words as written, possessives dropped
    terms: frozenset[str]  # stemmed content words (BM25's analyzer), question words out
    wants: str | None  # the entity type asked for: who → person, where → location, …
    wants_value: bool  # when / how many / what … is: an attribute's value answers it

    def spans(self) -> list[Span]:
        """Every run of up to ``MAX_NAME_WORDS`` words that could be a name, longest
        first (a run of question words or stopwords alone is no name)."""
        found: list[Span] = []
        n = len(self.tokens)
        for length in range(min(MAX_NAME_WORDS, n), 0, -1):
            for start in range(0, n - length + 1):
                words = self.tokens[start : start + length]
                if all(_is_function_word(w) for w in words):
                    continue
                text = " ".join(words)
                key = entity_normalize_key(text)
                if key:
                    found.append(Span(start, start + length, text, key))
        return found

    def terms_outside(self, covered: set[int]) -> frozenset[str]:
        """The content terms of the words outside ``covered`` (a linked name's words are
        the entity, not the relation asked about)."""
        words = [w for i, w in enumerate(self.tokens) if i not in covered]
        return _content_terms(" ".join(words))


def question_read(text: str) -> Question:
    tokens = tuple(_tokens(text))
    lowered = [t.casefold() for t in tokens]
    return Question(
        text=text,
        tokens=tokens,
        terms=_content_terms(" ".join(tokens)),
        wants=_wanted_type(lowered),
        wants_value=_wants_value(lowered),
    )


def _tokens(text: str) -> list[str]:
    text = unicodedata.normalize("NFKC", text)
    out = []
    for raw in _TOKEN.findall(text):
        word = _EDGE.sub("", _POSSESSIVE.sub("", raw))
        if word:
            out.append(word)
    return out


def _is_function_word(word: str) -> bool:
    lowered = word.casefold()
    return lowered in QUESTION_WORDS or lowered in _stopwords()


@lru_cache(maxsize=1)
def _stopwords() -> frozenset[str]:
    from memory.search.analyzer import STOPWORDS

    return STOPWORDS


# Everyday words for a relation that no predicate name or description uses: each brings
# the words the standard predicates are named and described with ("Who is Dana's boss?"
# asks about her line manager: reports_to, manages). The question's own words stay.
RELATION_PARAPHRASES: dict[str, str] = {
    "boss": "manager", "supervisor": "manager", "superior": "manager",
    "employer": "employed works", "employers": "employed works", "job": "title",
    "hometown": "lives", "home": "lives", "reside": "lives", "resides": "lives",
    "birthplace": "born", "allergy": "allergic", "allergies": "allergic",
    "language": "speaks", "languages": "speaks", "leader": "leads", "lead": "leads",
    "founder": "founded", "founders": "founded", "mentee": "mentors", "mentor": "mentors",
    "coworker": "works with", "coworkers": "works with", "teammate": "works with",
    "teammates": "works with", "colleague": "works with", "colleagues": "works with",
    "headquartered": "located", "headquarters": "located", "based": "located",
}  # fmt: skip


def _content_terms(text: str) -> frozenset[str]:
    words = [w for w in text.split() if w.casefold() not in QUESTION_WORDS]
    words += [
        RELATION_PARAPHRASES[w.casefold()] for w in words if w.casefold() in RELATION_PARAPHRASES
    ]
    return frozenset(analyze(" ".join(words)))


_TYPE_WORDS: dict[str, str] = {
    **{t: t for t in ENTITY_TYPES},
    **TYPE_SYNONYMS,
    "organisation": EntityType.ORGANISATION,
    "employer": EntityType.ORGANISATION,
    "companies": EntityType.ORGANISATION,
    "town": EntityType.LOCATION,
    "location": EntityType.LOCATION,
    "product": EntityType.PRODUCT,
    "project": EntityType.PROJECT,
    "person": EntityType.PERSON,
    "colleague": EntityType.PERSON,
    "manager": EntityType.PERSON,
}


def _wanted_type(words: list[str]) -> str | None:
    """who → person; where → location; which/what + a type word (``which company``,
    ``what city``) → that type; otherwise nothing in particular."""
    for i, word in enumerate(words):
        if word in {"who", "whom", "whose"}:
            return str(EntityType.PERSON)
        if word == "where":
            return str(EntityType.LOCATION)
        if word in {"which", "what"}:
            for follower in words[i + 1 : i + 3]:
                found = _TYPE_WORDS.get(follower) or _TYPE_WORDS.get(follower.rstrip("s"))
                if found:
                    return str(found)
    return None


def _wants_value(words: list[str]) -> bool:
    """A question answered by a value rather than an entity: when, how many/much/old,
    or ``what`` not followed by a type word."""
    if any(w in {"when", "how"} for w in words):
        return True
    return "what" in words and _wanted_type(words) is None
