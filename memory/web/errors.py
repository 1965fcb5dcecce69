"""One exception handler: every API error is ``{"error": {"code", "message", "details"}}``."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DataError, IntegrityError
from django.http import Http404, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from memory.infra.transactions import write_conflicted, write_contention
from memory.kernel.errors import DomainError

logger = logging.getLogger(__name__)

_DRF_CODES = {
    exceptions.ParseError: "malformed",
    exceptions.ValidationError: "invalid",
    exceptions.NotAuthenticated: "not_authenticated",
    exceptions.AuthenticationFailed: "authentication_failed",
    exceptions.PermissionDenied: "forbidden",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.NotAcceptable: "not_acceptable",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.Throttled: "throttled",
}


def error_body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details}}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if write_conflicted(exc):
        # A deadlock or serialization failure no service ran again: the write was rolled
        # back as a whole, so the client may send it again (docs/decisions/0119).
        logger.warning("a write broken by concurrent writes reached the API: %s", exc)
        exc = write_contention(exc)
    if isinstance(exc, DomainError):  # the engine's errors, scopes' and the LLM's included
        return _domain_error(exc)
    if isinstance(exc, DjangoValidationError):
        messages = exc.message_dict if hasattr(exc, "error_dict") else exc.messages
        return Response(error_body("invalid", "validation failed", messages), status=400)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    elif isinstance(exc, (IntegrityError, DataError)):
        # A constraint caught what validation missed: the write was refused as a whole.
        logger.warning("database refused a write: %s", exc)
        return Response(
            error_body("constraint_violation", "the database refused this write", str(exc)[:500]),
            status=status.HTTP_409_CONFLICT,
        )
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    code = next((c for cls, c in _DRF_CODES.items() if isinstance(exc, cls)), "error")
    details: Any = None
    if isinstance(exc, exceptions.ValidationError):
        message, details = _body_message(response.data), response.data
    else:
        message = str(getattr(exc, "detail", str(exc)))
    response.data = error_body(code, message, details)
    return response


def _domain_error(exc: DomainError) -> Response:
    response = Response(error_body(exc.code, exc.message, exc.details), status=exc.status)
    retry_after = getattr(exc, "retry_after", None)  # a refusal that passes with time
    if retry_after is not None:
        response["Retry-After"] = str(retry_after)
    return response


def _body_message(errors: Any) -> str:
    """ "the request body is not valid: text: …" naming the fields (the first few)."""
    if not isinstance(errors, dict) or not errors:
        return "the request body is not valid"
    named = []
    for name, problems in list(errors.items())[:5]:
        first = problems[0] if isinstance(problems, list) and problems else problems
        named.append(f"{name}: {first if isinstance(first, str) else 'not valid'}")
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return f"the request body is not valid: {'; '.join(named)}{more}"


def json_error_view(status_code: int, code: str, message: str) -> Any:
    """A handler400/404/500 that answers JSON under /api/ and Django's page elsewhere."""
    from django.views import defaults

    fallback: Any = {
        400: defaults.bad_request,
        404: defaults.page_not_found,
        500: defaults.server_error,
    }[status_code]

    def view(request: Any, exception: Exception | None = None) -> Any:
        if isinstance(exception, RequestDataTooBig) and request.path.startswith("/api/"):
            return body_too_large()
        if request.path.startswith("/api/") and status_code == 404:
            return _not_found(request.path, message)
        if request.path.startswith("/api/"):
            return JsonResponse(error_body(code, message), status=status_code)
        if status_code == 500:
            return fallback(request)
        return fallback(request, exception)

    return view


def _not_found(path: str, message: str) -> JsonResponse:
    """404 under /api/. A path with a trailing slash gets the hint that API paths have
    none (and the path without it, when that is one)."""
    from django.urls import Resolver404, resolve

    if not path.endswith("/") or path.rstrip("/") == "/api":
        return JsonResponse(error_body("not_found", message), status=404)
    bare = path.rstrip("/")
    try:
        resolve(bare)
    except Resolver404:
        details: dict[str, Any] = {}
    else:
        details = {"path": bare}
    hint = f"; try {bare}" if details else ""
    return JsonResponse(
        error_body(
            "not_found", f"{message}: API paths have no trailing slash{hint}", details or None
        ),
        status=404,
    )


def body_too_large() -> JsonResponse:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return JsonResponse(
        error_body(
            "body_too_large",
            f"the request body is larger than the limit of {limit:,} bytes "
            f"({limit / 1024 / 1024:g} MB)",
            {"limit_bytes": limit},
        ),
        status=413,
    )


class BodyLimitMiddleware:
    """An API request whose Content-Length passes DATA_UPLOAD_MAX_MEMORY_SIZE gets a 413
    naming the limit before anything reads it (Django would answer a bare 400)."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        if request.path.startswith("/api/"):
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            if limit is not None and length > limit:
                return body_too_large()
        return self.get_response(request)
