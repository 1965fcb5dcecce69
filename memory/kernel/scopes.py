"""Scopes and grants.

A scope is a ``/``-separated path inside a context (``org/acme/user/alex``). A grant is
``read:PATTERN`` or ``write:PATTERN``; PATTERN is ``P`` (exactly P), ``P/*`` (P and
everything below it) or ``*`` (every scope). A write grant implies read on its pattern.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from django.db.models import Q

from memory.kernel.errors import ValidationFailed

SCOPE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@:-]*(/[A-Za-z0-9][A-Za-z0-9_.@:-]*)*$")
MAX_SCOPE_LENGTH = 300

Access = Literal["read", "write"]


class ScopeError(ValidationFailed, ValueError):
    """A scope or grant that is not well formed (a ValueError too, for parsers)."""

    code = "invalid_scope"


def scope_validate(scope: str) -> str:
    """Return ``scope`` without surrounding slashes, or raise ScopeError."""
    cleaned = scope.strip().strip("/")
    if not cleaned or len(cleaned) > MAX_SCOPE_LENGTH or not SCOPE_RE.match(cleaned):
        raise ScopeError(
            f"invalid scope {scope[:80]!r}: use path segments of letters, digits and _.@:- "
            f"separated by '/', at most {MAX_SCOPE_LENGTH} characters"
        )
    return cleaned


@dataclass(frozen=True)
class Grant:
    access: Access
    pattern: str  # "*", "P" or "P/*"

    @property
    def base(self) -> str:
        return self.pattern[:-2] if self.pattern.endswith("/*") else self.pattern

    @property
    def recursive(self) -> bool:
        return self.pattern == "*" or self.pattern.endswith("/*")

    def matches(self, scope: str) -> bool:
        if self.pattern == "*":
            return True
        if self.recursive:
            return scope == self.base or scope.startswith(self.base + "/")
        return scope == self.pattern

    def covers_pattern(self, base: str, recursive: bool) -> bool:
        """Whether every scope of (base, recursive) is matched by this grant."""
        if self.pattern == "*":
            return True
        if self.recursive:
            return base == self.base or base.startswith(self.base + "/")
        return not recursive and base == self.pattern

    def __str__(self) -> str:
        return f"{self.access}:{self.pattern}"


def grant_parse(text: str) -> list[Grant]:
    """Parse ``read,write:org/acme/*`` (or ``read:*``) into grants."""
    accesses, sep, pattern = text.strip().partition(":")
    if not sep:
        raise ScopeError(f"grant {text!r} must look like 'read:PATTERN' or 'read,write:PATTERN'")
    pattern = pattern.strip()
    if pattern != "*":
        base = pattern[:-2] if pattern.endswith("/*") else pattern
        base = scope_validate(base)
        pattern = base + "/*" if pattern.endswith("/*") else base
    grants: list[Grant] = []
    for access in accesses.split(","):
        access = access.strip()
        if access not in ("read", "write"):
            raise ScopeError(f"grant access must be 'read' or 'write', got {access!r}")
        grants.append(Grant(access, pattern))  # type: ignore[arg-type]
    return grants


def grants_parse(texts: list[str]) -> list[Grant]:
    return [grant for text in texts for grant in grant_parse(text)]


@dataclass(frozen=True)
class Grants:
    """The scope grants of one caller in one context."""

    items: tuple[Grant, ...]

    @classmethod
    def from_strings(cls, texts: list[str]) -> Grants:
        return cls(tuple(grants_parse(texts)))

    @classmethod
    def everything(cls) -> Grants:
        return cls((Grant("read", "*"), Grant("write", "*")))

    def _of(self, access: Access) -> list[Grant]:
        # write implies read
        return [g for g in self.items if g.access == access or access == "read"]

    def can_read(self, scope: str) -> bool:
        return any(g.matches(scope) for g in self._of("read"))

    def can_write(self, scope: str) -> bool:
        return any(g.matches(scope) for g in self._of("write"))

    def read_q(self, field: str = "scope") -> Q:
        """A filter matching exactly the records these grants may read."""
        return _patterns_q(self._of("read"), field)

    def narrowed(self, patterns: list[str]) -> Grants:
        """Read grants intersected with requested scope patterns (e.g. a search filter)."""
        kept: list[Grant] = []
        for raw in patterns:
            requested = grant_parse(f"read:{raw}")[0]
            for grant in self._of("read"):
                if grant.covers_pattern(requested.base, requested.recursive):
                    kept.append(requested)
                elif requested.covers_pattern(grant.base, grant.recursive):
                    kept.append(Grant("read", grant.pattern))
        return Grants(tuple(dict.fromkeys(kept)))

    def __str__(self) -> str:
        return ", ".join(str(g) for g in self.items)


def _patterns_q(grants: list[Grant], field: str) -> Q:
    query = Q(pk__in=[])  # matches nothing: no grant, no rows
    for grant in grants:
        if grant.pattern == "*":
            return Q()
        if grant.recursive:
            query |= Q(**{field: grant.base}) | Q(**{f"{field}__startswith": grant.base + "/"})
        else:
            query |= Q(**{field: grant.pattern})
    return query
