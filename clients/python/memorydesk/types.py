"""Typed results. Each keeps the fields agents use most as attributes and the whole
answer in ``raw``, so a field added by a newer server is never out of reach."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


def _time(text: Any) -> datetime | None:
    return datetime.fromisoformat(text) if isinstance(text, str) and text else None


@dataclass(frozen=True)
class Item:
    """An item: a JSON object under a namespace and a key."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None = None
    score: float | None = None

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> Item:
        return cls(
            namespace=tuple(data["namespace"]),
            key=data["key"],
            value=data["value"],
            created_at=_time(data["created_at"]),  # type: ignore[arg-type]
            updated_at=_time(data["updated_at"]),  # type: ignore[arg-type]
            expires_at=_time(data.get("expires_at")),
            score=data.get("score"),
        )


@dataclass(frozen=True)
class EntityRef:
    id: int
    name: str
    type: str

    @classmethod
    def from_api(cls, data: dict[str, Any] | None) -> EntityRef | None:
        return cls(data["id"], data["name"], data["type"]) if data else None


@dataclass(frozen=True)
class Fact:
    id: int
    subject: EntityRef
    predicate: str
    kind: str
    object: EntityRef | None
    value: Any
    confidence: float | None
    status: str | None
    trust: str | None
    scope: str
    supersedes: int | None
    recorded_at: datetime | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> Fact:
        subject = EntityRef.from_api(data["subject"])
        assert subject is not None
        return cls(
            id=data["id"],
            subject=subject,
            predicate=data["predicate"],
            kind=data["kind"],
            object=EntityRef.from_api(data.get("object")),
            value=data.get("value"),
            confidence=data.get("confidence"),
            status=data.get("status"),
            trust=data.get("trust"),
            scope=data["scope"],
            supersedes=data.get("supersedes"),
            recorded_at=_time(data.get("recorded_at")),
            raw=data,
        )

    @property
    def text(self) -> str:
        """The fact as a sentence-like line: ``Alex works_at Acme``."""
        end = self.object.name if self.object else self.value
        return f"{self.subject.name} {self.predicate} {end}"


@dataclass(frozen=True)
class FactWrite:
    """What writing a fact did: ``outcome`` is created, reobserved, updated, superseded or
    conflict."""

    outcome: str
    fact: Fact
    superseded: int | None
    conflict: int | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> FactWrite:
        return cls(
            outcome=data["outcome"],
            fact=Fact.from_api(data["fact"]),
            superseded=data.get("superseded"),
            conflict=data.get("conflict"),
            raw=data,
        )


@dataclass(frozen=True)
class Action:
    """A curation action's answer (correct, update, restore, review, retract)."""

    fact: Fact | None
    summary: str
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> Action:
        fact = data.get("fact") or data.get("corrected")
        return cls(
            fact=Fact.from_api(fact) if isinstance(fact, dict) else None,
            summary=str(data.get("summary") or data.get("action") or ""),
            raw=data,
        )


@dataclass(frozen=True)
class Entity:
    id: int
    name: str
    type: str
    scope: str
    aliases: list[str]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> Entity:
        return cls(
            id=data["id"],
            name=data["name"],
            type=data.get("type", "other"),
            scope=data["scope"],
            aliases=list(data.get("aliases") or []),
            raw=data,
        )


@dataclass(frozen=True)
class Run:
    """One ingest of a turn. ``result`` is set when the call waited for it."""

    id: int
    scope: str
    mode: str
    outcome: str | None
    error: str | None
    result: dict[str, Any] | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> Run:
        run = data.get("run", data)
        return cls(
            id=run["id"],
            scope=run["scope"],
            mode=run["mode"],
            outcome=run.get("outcome"),
            error=run.get("error"),
            result=data.get("result"),
            raw=data,
        )


@dataclass(frozen=True)
class SearchHit:
    type: str
    id: int
    text: str
    score: float
    scope: str
    explain: dict[str, Any]
    meta: dict[str, Any]

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> SearchHit:
        return cls(
            type=data["type"],
            id=data["id"],
            text=data["text"],
            score=data["score"],
            scope=data["scope"],
            explain=data.get("explain") or {},
            meta=data.get("meta") or {},
        )


@dataclass(frozen=True)
class SearchResults:
    results: list[SearchHit]
    took_ms: float

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> SearchResults:
        return cls([SearchHit.from_api(r) for r in data["results"]], data.get("took_ms", 0.0))


@dataclass(frozen=True)
class ContextBlock:
    """The prompt-ready memory block: ``text`` to put in a prompt, and its parts."""

    text: str
    facts: list[dict[str, Any]]
    passages: list[dict[str, Any]]
    used_tokens: int
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> ContextBlock:
        return cls(
            text=data["text"],
            facts=list(data.get("facts") or []),
            passages=list(data.get("passages") or []),
            used_tokens=int(data.get("used_tokens") or 0),
            raw=data,
        )


@dataclass(frozen=True)
class ImportJob:
    id: int
    status: str | None
    percent: float
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> ImportJob:
        return cls(data["id"], data.get("status"), float(data.get("percent") or 0), data)
