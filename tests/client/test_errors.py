"""The client's error classes: one per error code the server raises, each below the class
of its HTTP status, made from one table (``memorydesk.errors._CODES``)."""

from __future__ import annotations

import re
from pathlib import Path

import memorydesk
import memorydesk.errors as errors
import pytest
from memorydesk.errors import (
    ERRORS,
    BadRequestError,
    DatabaseError,
    ItemNotFoundError,
    MethodNotAllowedError,
    NotFoundError,
    PermissionDeniedError,
    ScopeForbiddenError,
    ServiceUnavailableError,
    error_for,
)

from memory.web.errors import _DRF_CODES

STATUS_CLASSES = set(errors._BY_STATUS.values())
SERVER = Path(memorydesk.__file__).resolve().parents[3] / "memory"
# ``code="…"`` at a raise, ``code = "…"`` on an error class.
CODE_LITERAL = re.compile(r'\bcode\s*=\s*"([a-z][a-z0-9_]*)"')


def _server_codes() -> set[str]:
    codes = set(_DRF_CODES.values())
    for path in SERVER.rglob("*.py"):
        if "migrations" not in path.parts:
            codes.update(CODE_LITERAL.findall(path.read_text()))
    return codes


def test_every_code_the_server_raises_has_its_class() -> None:
    codes = _server_codes()
    assert len(codes) > 150  # the scan found the server's code, not an empty folder
    assert sorted(codes - set(ERRORS)) == []


def test_each_class_is_named_after_its_code_below_its_status_class() -> None:
    for code, cls in ERRORS.items():
        assert getattr(errors, cls.__name__) is cls
        assert cls.code == code or cls is BadRequestError  # "invalid" is its own code
        assert cls.__module__ == "memorydesk.errors"
        assert cls in STATUS_CLASSES or cls.__bases__[0] in STATUS_CLASSES
        assert 400 <= cls.status < 600
    assert ItemNotFoundError.code == "item_not_found" and ItemNotFoundError.status == 404
    assert ItemNotFoundError.__bases__ == (NotFoundError,)
    assert ScopeForbiddenError.__bases__ == (PermissionDeniedError,)
    assert DatabaseError.code == "database_error"  # no "DatabaseErrorError"
    assert ERRORS["not_found"] is NotFoundError
    assert MethodNotAllowedError.status == 405 and issubclass(
        MethodNotAllowedError, BadRequestError
    )


def test_an_answer_becomes_the_class_of_its_code_or_else_of_its_status() -> None:
    body = {"error": {"code": "scope_forbidden", "message": "no", "details": {"s": 1}}}
    refused = error_for(403, body)
    assert type(refused) is ScopeForbiddenError
    assert (refused.status, refused.details, str(refused)) == (
        403,
        {"s": 1},
        "scope_forbidden (403): no",
    )
    newer = error_for(404, {"error": {"code": "code_of_a_newer_server", "message": "gone"}})
    assert type(newer) is NotFoundError and newer.code == "code_of_a_newer_server"
    assert type(error_for(503, "<html>bad gateway</html>")) is ServiceUnavailableError


def test_a_name_that_is_not_a_code_is_not_a_class() -> None:
    with pytest.raises(AttributeError, match="NoSuchThingError"):
        errors.NoSuchThingError  # noqa: B018
