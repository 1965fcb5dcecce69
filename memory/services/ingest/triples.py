"""Normalization of extracted (or caller-supplied) triples into mentions and fact drafts.

Pure apart from nothing: no database. Names are trimmed and checked, types mapped onto the
closed set (never ``agent``/``service``: those are principals' own), identifiers
canonicalized, dates parsed; subjects and objects, given by name, are tied to the entity
mentions of the same answer. Whatever cannot be used becomes an ``Unresolved`` entry with
its reason and a warning, and the rest goes on. A refused item leaves nothing behind: an
entity only it named is not mentioned (so never created), and what it would have written
is checked before its predicate reaches the registry (``predicate_check``, the value's
secrets here).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from memory.domain.entity_names import (
    entity_clean_name,
    entity_normalize_key,
    entity_type_coerced,
    entity_type_coerced_warning,
    entity_type_normalize,
    identifier_normalize,
)
from memory.domain.predicate_names import predicate_check_text
from memory.domain.screening import secret_refuse
from memory.kernel.errors import ValidationFailed
from memory.llm.schemas import EntityItem, Extraction
from memory.models import FactKind
from memory.services.facts.rules import fact_value_text

Ref = tuple[str, str | None]  # (normalized key, type or None when only named)


@dataclass
class Mention:
    name: str
    type: str | None  # None: named by a fact but not described; matched across types
    key: str
    aliases: list[str] = field(default_factory=list)
    identifiers: list[tuple[str, str]] = field(default_factory=list)
    # Listed among the answer's entities: kept even when no fact of the answer names it.
    described: bool = False

    @property
    def ref(self) -> Ref:
        return (self.key, self.type)


@dataclass
class FactDraft:
    section: str  # relations | attributes | actions
    position: int
    kind: str
    subject: Mention
    predicate: str
    object: Mention | None
    value: Any
    confidence: float
    valid_from: datetime | None
    item: dict[str, Any]


# What a refused item that held a secret is reported as (the run's result is kept).
SECRET_ITEM = {"redacted": "this item held a secret; it is not kept"}


@dataclass(frozen=True)
class Unresolved:
    section: str
    position: int | None  # None: an entity the answer listed (refused as a secret)
    item: dict[str, Any]
    reason: str
    code: str
    # The refusal's details (a strict context's ``canonical`` form), not reported.
    details: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "section": self.section,
            "position": self.position,
            "item": self.item,
            "reason": self.reason,
            "code": self.code,
        }


@dataclass
class NormalizedExtraction:
    mentions: list[Mention]
    facts: list[FactDraft]
    unresolved: list[Unresolved]
    # What was changed on the way in, in words (an unknown entity type stored as "other").
    warnings: list[str] = field(default_factory=list)


def extraction_normalize(
    extraction: Extraction,
    *,
    default_confidence: float,
    predicate_check: Callable[[str], None] = predicate_check_text,
) -> NormalizedExtraction:
    """Mentions and fact drafts of ``extraction``. ``predicate_check`` raises
    ValidationFailed for a predicate no write would take (by default: hostile text); such
    an item is refused before any of its entities is mentioned. An entity only refused
    items named is left out."""
    book = _MentionBook()
    unresolved: list[Unresolved] = []
    refused: list[str] = []  # the refused items, in words
    for position, entity in enumerate(extraction.entities):
        try:
            book.describe(entity, unresolved=unresolved, position=position)
        except ValidationFailed as exc:
            unresolved.append(_unresolved("entities", position, entity.model_dump(), exc))
            refused.append(refusal_warning("entities", position, exc.message))
    facts: list[FactDraft] = []
    sections: list[tuple[str, str, list[Any]]] = [
        ("relations", FactKind.RELATION, list(extraction.relations)),
        ("attributes", FactKind.ATTRIBUTE, list(extraction.attributes)),
        ("actions", FactKind.ACTION, list(extraction.actions)),
    ]
    for section, kind, items in sections:
        for position, item in enumerate(items):
            raw = item.model_dump()
            try:
                facts.append(
                    _draft(
                        book, section, position, kind, item, raw, default_confidence,
                        predicate_check,
                    )
                )  # fmt: skip
            except ValidationFailed as exc:
                unresolved.append(_unresolved(section, position, raw, exc))
                refused.append(refusal_warning(section, position, exc.message))
    mentions = mentions_kept(book.all(), facts)
    return NormalizedExtraction(
        mentions=mentions,
        facts=facts,
        unresolved=unresolved,
        warnings=book.warnings(mentions) + refused,
    )


def refusal_warning(section: str, position: int | None, reason: str) -> str:
    where = section if position is None else f"{section}[{position}]"
    return f"{where}: {reason}; nothing of it was written"


def mentions_kept(mentions: list[Mention], facts: list[FactDraft]) -> list[Mention]:
    """The mentions an answer's entities list, or a fact it keeps names: an entity only
    a refused item named is never created for it."""
    named = {m.ref for f in facts for m in (f.subject, f.object) if m is not None}
    return [m for m in mentions if m.described or m.ref in named]


def _draft(
    book: _MentionBook,
    section: str,
    position: int,
    kind: str,
    item: Any,
    raw: dict[str, Any],
    default_confidence: float,
    predicate_check: Callable[[str], None],
) -> FactDraft:
    predicate: str = (
        item.predicate
        if kind == FactKind.RELATION
        else item.key
        if kind == FactKind.ATTRIBUTE
        else item.verb
    )
    # Before any mention is made: an item refused for its predicate must not leave its
    # entities behind, created for a fact that was never written.
    predicate_check(predicate)
    subject = book.refer(item.subject, item.subject_type)
    object_: Mention | None = None
    value: Any = None
    if kind == FactKind.RELATION:
        object_ = book.refer(item.object, item.object_type)
        when = item.valid_from
    elif kind == FactKind.ATTRIBUTE:
        value = item.value.strip() if isinstance(item.value, str) else item.value
        if value == "":
            raise ValidationFailed("an attribute needs a value", code="missing_value")
        # The fact writer's own check, before the item reaches the writer (and its
        # predicate the registry): a value that is a secret is refused whole.
        secret_refuse(fact_value_text(value), what="the fact value")
        when = item.valid_from
    else:
        if item.object is not None:
            object_ = book.refer(item.object, item.object_type)
        when = item.at
    confidence = item.confidence if item.confidence is not None else default_confidence
    return FactDraft(
        section=section,
        position=position,
        kind=kind,
        subject=subject,
        predicate=predicate,
        object=object_,
        value=value,
        confidence=confidence,
        valid_from=parse_when(when),
        item=raw,
    )


def parse_when(text: str | None) -> datetime | None:
    """An ISO 8601 date or date-time (UTC when no offset is given), or None."""
    if text is None or not text.strip():
        return None
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValidationFailed(
            f"{text[:40]!r} is not an ISO 8601 date (YYYY-MM-DD)", code="invalid_date"
        ) from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _unresolved(
    section: str, position: int, item: dict[str, Any], exc: ValidationFailed
) -> Unresolved:
    kept = SECRET_ITEM if exc.code == SECRET_CODE else item
    return Unresolved(section, position, kept, exc.message, exc.code, exc.details)


class _MentionBook:
    """The mentions of one answer, found by (key, type) and by alias key."""

    def __init__(self) -> None:
        self.by_ref: dict[Ref, Mention] = {}
        self.by_key: dict[str, list[Mention]] = {}
        self._keys: dict[str, tuple[str, str]] = {}  # facts name the same few entities
        self._coerced: dict[tuple[str, str], None] = {}  # (name, type given) stored as other

    def _type(self, name: str, given: str | None) -> str:
        """``given`` on the closed set; an unknown type becomes ``other``, remembered so
        the run can say so (a silent coercion hid a model's mistake)."""
        type_ = entity_type_normalize(given, allow_reserved=False)
        if entity_type_coerced(given, type_):
            self._coerced[(name, given.strip()[:40] if given else "")] = None
        return type_

    def warnings(self, kept: list[Mention]) -> list[str]:
        """The types stored as ``other``, of the ``kept`` mentions (one only a refused
        item named is never stored)."""
        names = {n for m in kept for n in (m.name, *m.aliases)}
        return [
            entity_type_coerced_warning(name, given)
            for name, given in self._coerced
            if name in names
        ]

    def _keyed(self, name: str) -> tuple[str, str]:
        """The cleaned name and its normalized key (raises ValidationFailed)."""
        found = self._keys.get(name)
        if found is None:
            clean = entity_clean_name(name)
            found = self._keys[name] = (clean, entity_normalize_key(clean))
        return found

    def all(self) -> list[Mention]:
        return list(self.by_ref.values())

    def describe(self, item: EntityItem, *, unresolved: list[Unresolved], position: int) -> None:
        name = self._keyed(item.name)[0]
        type_ = self._type(name, item.type)
        mention = self._get_or_add(name, type_)
        mention.described = True
        for alias in item.aliases:
            try:
                clean = entity_clean_name(alias)
            except ValidationFailed:
                continue  # a useless spelling is not worth refusing the entity for
            if clean != mention.name and clean not in mention.aliases:
                mention.aliases.append(clean)
                self._index(entity_normalize_key(clean), mention)
        for identifier in item.identifiers:
            try:
                pair = identifier_normalize(identifier.kind, identifier.value)
            except ValidationFailed as exc:
                unresolved.append(
                    _unresolved("entities", position, {"identifier": identifier.model_dump()}, exc)
                )
                continue
            if pair not in mention.identifiers:
                mention.identifiers.append(pair)

    def refer(self, name: str, type_hint: str | None) -> Mention:
        clean, key = self._keyed(name)
        if type_hint:
            type_ = self._type(clean, type_hint)
            same_type = [m for m in self.by_key.get(key, []) if m.type == type_]
            return same_type[0] if same_type else self._get_or_add(clean, type_)
        described = list(
            {id(m): m for m in self.by_key.get(key, []) if m.type is not None}.values()
        )
        if len({m.type for m in described}) > 1:
            types = " and ".join(sorted(str(m.type) for m in described))
            raise ValidationFailed(
                f"{clean!r} names entities of types {types}; give subject_type/object_type",
                code="ambiguous_entity",
            )
        if described:
            return described[0]
        return self._get_or_add(clean, None)

    def _get_or_add(self, name: str, type_: str | None) -> Mention:
        key = self._keyed(name)[1]  # a clean name cleans to itself
        found = self.by_ref.get((key, type_))
        if found is not None:
            if name != found.name and name not in found.aliases:
                found.aliases.append(name)  # "ACME Inc." after "Acme Corp": one entity
            return found
        mention = Mention(name=name, type=type_, key=key)
        self.by_ref[mention.ref] = mention
        self._index(key, mention)
        return mention

    def _index(self, key: str, mention: Mention) -> None:
        bucket = self.by_key.setdefault(key, [])
        if all(m is not mention for m in bucket):
            bucket.append(mention)


def extraction_drop_secrets(
    normalized: NormalizedExtraction, secrets: list[str]
) -> NormalizedExtraction:
    """Refuse (``secret_refused``) every fact and entity of an answer that carries one of
    ``secrets``, the secrets found in the turn: a model may echo one it was never shown
    (a caller's triples, a model that saw the raw text)."""
    if not secrets:
        return normalized

    def holds(text: str) -> bool:
        return any(secret in text for secret in secrets)

    leaking = {m.ref for m in normalized.mentions if holds(m.name)}
    unresolved = list(normalized.unresolved)
    warnings = list(normalized.warnings)

    def refuse(section: str, position: int | None) -> None:
        unresolved.append(Unresolved(section, position, SECRET_ITEM, SECRET_REASON, SECRET_CODE))
        warnings.append(refusal_warning(section, position, SECRET_REASON))

    for mention in normalized.mentions:
        if mention.described and mention.ref in leaking:
            refuse("entities", None)
    facts = []
    for draft in normalized.facts:
        value = draft.value if isinstance(draft.value, str) else json.dumps(draft.value)
        refs = {draft.subject.ref} | ({draft.object.ref} if draft.object else set())
        if holds(value or "") or holds(draft.predicate) or refs & leaking:
            refuse(draft.section, draft.position)
            continue
        facts.append(draft)
    mentions = mentions_kept([m for m in normalized.mentions if m.ref not in leaking], facts)
    return replace(
        normalized, mentions=mentions, facts=facts, unresolved=unresolved, warnings=warnings
    )


SECRET_CODE = "secret_refused"  # noqa: S105 - an error code, not a secret
SECRET_REASON = (
    "it holds a secret (a password, key, token, code or card number); "  # noqa: S105 - words
    "secrets are never stored as memory"
)
