"""What a memory export holds: one JSON object a line, its kind in ``record``.

The format is the context's own rows, field by field (each model's concrete fields by
their attribute names, ``subject_id`` and the like holding the exporting database's ids),
so a field a model gains is carried without a change here. Left out: vectors (the worker
embeds the imported rows again; the import embeds items itself), the context row itself
(the header carries its settings), and what belongs to the installation rather than the
memory — users, tokens, runs, audit events, merge undo snapshots, duplicate candidates
(the finder rebuilds them). An item keeps the turn it extracted from (``turn_id``), which
its facts point to, so what it extracted is still taken back when it changes.

Record types, in the order an export writes them (an import reads them in any order):
``header``, ``predicate``, ``predicate_alias``, ``duplicate_model``, ``entity``,
``identifier``, ``turn``, ``document``, ``chunk``, ``keyword``, ``keyword_link``,
``fact``, ``conflict``, ``item``, ``end`` (the counts, checked by the import).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import models

from memory.models import (
    Chunk,
    Conflict,
    Document,
    Entity,
    EntityIdentifier,
    Fact,
    Item,
    Keyword,
    KeywordLink,
    Predicate,
    PredicateAlias,
    Turn,
)
from memory.models.context import SETTING_FIELDS

FORMAT = "memory-desk-export"
FORMAT_VERSION = 1
# Columns an export never carries: vectors are made again from the text.
SKIPPED_COLUMNS = frozenset({"embedding", "embedding_model"})


@dataclass(frozen=True)
class Kind:
    """One line type: its model, and how its rows are found in a context."""

    name: str
    model: type[models.Model]
    context_path: str  # the lookup from the model to its context

    def fields(self) -> list[models.Field]:
        return [
            f
            for f in self.model._meta.concrete_fields
            if f.column not in SKIPPED_COLUMNS and f.attname != "context_id"
        ]

    def field_names(self) -> list[str]:
        return [f.attname for f in self.fields()]


# In dependency order: a row's references are to kinds above it (or to itself).
KINDS: tuple[Kind, ...] = (
    Kind("predicate", Predicate, "context"),
    Kind("predicate_alias", PredicateAlias, "context"),
    Kind("entity", Entity, "context"),
    Kind("identifier", EntityIdentifier, "context"),
    Kind("turn", Turn, "context"),
    Kind("document", Document, "context"),
    Kind("chunk", Chunk, "context"),
    Kind("keyword", Keyword, "context"),
    Kind("keyword_link", KeywordLink, "keyword__context"),
    Kind("fact", Fact, "context"),
    Kind("conflict", Conflict, "context"),
    Kind("item", Item, "context"),
)
KIND_OF_MODEL: dict[type[models.Model], Kind] = {k.model: k for k in KINDS}
KIND_BY_NAME: dict[str, Kind] = {k.name: k for k in KINDS}
# Context settings the header carries (and an import may apply): every one an admin sets.
CONTEXT_SETTINGS = SETTING_FIELDS
