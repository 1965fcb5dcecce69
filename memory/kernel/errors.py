"""The domain error tree: every refusal the engine raises (services, scopes, the LLM
layer) is a ``DomainError``, which each face maps once — the API's exception handler to
its JSON error shape, the dashboard's view wrapper to a 4xx/5xx page."""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    """Base class: ``code`` is machine-readable, ``message`` is for people."""

    status = 400
    code = "invalid"

    def __init__(self, message: str, *, code: str | None = None, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        self.details = details


class ValidationFailed(DomainError):
    status = 400
    code = "invalid"


class NotFound(DomainError):
    status = 404
    code = "not_found"


class PermissionDenied(DomainError):
    status = 403
    code = "forbidden"


class Conflict(DomainError):
    status = 409
    code = "conflict"


class ServiceUnavailable(DomainError):
    status = 503
    code = "unavailable"
