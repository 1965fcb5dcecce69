"""Domain errors raised by services and turned into the API's JSON error shape."""

from __future__ import annotations

from typing import Any


class MemoryError_(Exception):
    """Base class: ``code`` is machine-readable, ``message`` is for people."""

    status = 400
    code = "invalid"

    def __init__(self, message: str, *, code: str | None = None, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        self.details = details


class ValidationFailed(MemoryError_):
    status = 400
    code = "invalid"


class NotFound(MemoryError_):
    status = 404
    code = "not_found"


class PermissionDenied(MemoryError_):
    status = 403
    code = "forbidden"


class Conflict(MemoryError_):
    status = 409
    code = "conflict"


class ServiceUnavailable(MemoryError_):
    status = 503
    code = "unavailable"
