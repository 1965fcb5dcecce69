"""Property ids, in queries, suggestions and data extension: ``id:KIND`` an identifier
kind, ``attr:KEY`` an attribute key, ``fact:PREDICATE`` a predicate's current facts
(data extension only). A bare id is an identifier kind the context uses, else an
attribute key (else, in data extension, a predicate).
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass
from typing import Any

from memory.domain.access import ContextAccess
from memory.kernel.errors import ValidationFailed
from memory.models import EntityIdentifier


@dataclass(frozen=True)
class PropertyRef:
    kind: str  # "id", "attr" or "fact"
    key: str

    @property
    def id(self) -> str:
        return f"{self.kind}:{self.key}"


def identifier_kinds(access: ContextAccess) -> set[str]:
    return set(
        EntityIdentifier.objects.filter(access.grants.read_q(), context=access.context)
        .values_list("kind", flat=True)
        .distinct()
    )


class IdentifierKinds:
    """The context's identifier kinds, read the first time a bare property id needs
    them (a batch of ``attr:`` and ``id:`` properties never does)."""

    def __init__(self, access: ContextAccess) -> None:
        self.access = access
        self._kinds: set[str] | None = None

    def __contains__(self, kind: object) -> bool:
        if self._kinds is None:
            self._kinds = identifier_kinds(self.access)
        return kind in self._kinds


def property_resolve(
    pid: str, *, identifier_kinds: Container[str], predicates: set[str] | None = None
) -> PropertyRef:
    """What a property id names (module docstring); ValidationFailed if it names nothing."""
    text = pid.strip()
    kind, sep, key = text.partition(":")
    if sep and kind in ("id", "attr", "fact") and key.strip():
        if kind == "fact" and predicates is None:
            raise ValidationFailed(
                f"property {text[:80]!r}: facts are not compared when matching; use id: "
                "or attr: properties",
                code="invalid_property",
            )
        return PropertyRef(kind, key.strip())
    if not text:
        raise ValidationFailed("a property id cannot be empty", code="invalid_property")
    if text in identifier_kinds:
        return PropertyRef("id", text)
    if predicates is not None and text in predicates:
        return PropertyRef("fact", text)
    return PropertyRef("attr", text)


def is_scalar(value: Any) -> bool:
    """A value a reconciler can show in one cell (not a list, an object or empty text)."""
    return isinstance(value, (str, int, float, bool)) and value != ""
