"""Errors: one class per API error code, each below the class of its HTTP status.

Every refusal of the API is ``{"error": {"code", "message", "details"}}`` with a 4xx or
5xx status. ``raise_for`` raises the class of the code (``ScopeForbiddenError``,
``ItemNotFoundError``…), or of the status for a code this version does not know, so a
caller catches as narrowly as it likes: ``except memorydesk.NotFoundError``.

The classes of the codes are made at import from one table (``_CODES``: each code under
the class of its status), named after the code: ``item_not_found`` → ``ItemNotFoundError``
(``database_error`` → ``DatabaseError``: no second "Error"); a code named like a status
class (``not_found``) is that class. ``tests/client/test_errors.py`` checks that every
code the server raises has its class here.
"""

from __future__ import annotations

from typing import Any


class MemoryDeskError(Exception):
    """Any error answered by Memory Desk (or the transport reaching it)."""

    status: int = 0
    code: str = "error"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        status: int | None = None,
        details: Any = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.details = details
        self.retry_after = retry_after

    def __str__(self) -> str:
        return f"{self.code} ({self.status}): {self.message}" if self.status else self.message


class TransportError(MemoryDeskError):
    """The server could not be reached, or did not answer in time (after the retries)."""

    code = "transport_error"


class BadRequestError(MemoryDeskError):
    status = 400
    code = "invalid"


class AuthenticationError(MemoryDeskError):
    status = 401
    code = "not_authenticated"


class PermissionDeniedError(MemoryDeskError):
    status = 403
    code = "forbidden"


class NotFoundError(MemoryDeskError):
    status = 404
    code = "not_found"


class ConflictError(MemoryDeskError):
    status = 409
    code = "conflict"


class PayloadTooLargeError(MemoryDeskError):
    status = 413
    code = "text_too_large"


class RateLimitError(MemoryDeskError):
    status = 429
    code = "throttled"


class ServerError(MemoryDeskError):
    status = 500
    code = "server_error"


class ServiceUnavailableError(MemoryDeskError):
    status = 503
    code = "unavailable"


_BY_STATUS: dict[int, type[MemoryDeskError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    429: RateLimitError,
    500: ServerError,
    502: ServiceUnavailableError,
    503: ServiceUnavailableError,
    504: ServiceUnavailableError,
}


# Every error code of the API under the class of its HTTP status; ``code:status`` where
# the code's own status is not its class's (a 405 is a bad request too).
_CODES: dict[type[MemoryDeskError], str] = {
    BadRequestError: """
        alias_onto_self ambiguous_entity bad_request bad_target empty_file empty_text
        export_truncated invalid invalid_action invalid_agent invalid_batch_size
        invalid_body invalid_budget_tokens invalid_checks invalid_constraint
        invalid_correction invalid_cursor invalid_date invalid_dismiss invalid_entity
        invalid_export invalid_extend invalid_facts invalid_field invalid_filter
        invalid_flags invalid_format invalid_grants invalid_graph_alpha invalid_id
        invalid_identifier invalid_index invalid_infer invalid_k invalid_key
        invalid_kind invalid_limit invalid_match_conditions invalid_merge invalid_mode
        invalid_name invalid_namespace invalid_note invalid_op invalid_predicate
        invalid_prefix invalid_property invalid_query invalid_registry_file invalid_role
        invalid_said_at invalid_scope invalid_sort invalid_source invalid_target
        invalid_text invalid_thread invalid_thresholds invalid_title invalid_triples
        invalid_trust invalid_ttl invalid_type invalid_user invalid_username
        invalid_validity invalid_value invalid_version inverse_not_relation
        inverse_predicate malformed method_not_allowed:405 missing_file missing_object
        missing_prefix missing_query missing_scope missing_target missing_text
        missing_triples missing_value name_too_long no_facts not_a_member not_a_relation
        not_acceptable:406 predicate_kind_mismatch predicate_not_registered
        registry_import_failed rejected_predicate secret_refused thread_needs_turns
        too_many_aliases too_many_ops too_many_queries too_many_rows undecodable
        unexpected_object unexpected_triples unknown_field unknown_parameter
        unknown_predicate unsupported_media_type:415 value_too_long weak_password
        wrong_context wrong_entity_type
    """,
    AuthenticationError: """
        authentication_failed not_authenticated
    """,
    PermissionDeniedError: """
        forbidden role_required scope_forbidden staff_required untrusted_retract
    """,
    NotFoundError: """
        alias_not_found conflict_not_found constraint_not_found context_not_found
        document_not_found entity_not_found event_not_found fact_not_found
        import_not_found item_not_found keyword_not_found merge_not_found
        namespace_not_found not_found run_not_found thread_not_found token_not_found
        turn_not_found
    """,
    ConflictError: """
        already_retracted already_undone conflict conflict_resolved conflict_stale
        constraint_violation context_exists context_not_empty correction_stale
        drift_not_open entity_has_merges entity_key_taken entity_merged fact_not_current
        fact_not_pending fact_not_retracted identical_fact identifier_taken
        import_not_failed kind_mismatch last_admin not_undoable nothing_to_retract
        predicate_collision predicate_exists_as_observed run_not_failed run_not_finished
        several_values token_revoked undo_blocked user_exists
    """,
    PayloadTooLargeError: """
        file_too_large text_too_large
    """,
    RateLimitError: """
        throttled
    """,
    ServerError: """
        database_error internal server_error
    """,
    ServiceUnavailableError: """
        chat_model_not_configured embedder_unavailable embedding_unavailable
        llm_call_failed:502 llm_error:502 llm_http_error:502 llm_invalid_output:502
        llm_not_configured llm_rate_limited llm_timeout llm_unreachable unavailable
        write_contention
    """,
}


def _class_name(code: str) -> str:
    return "".join(part.capitalize() for part in code.removesuffix("_error").split("_")) + "Error"


def _error_class(code: str, status: int, base: type[MemoryDeskError]) -> type[MemoryDeskError]:
    name = _class_name(code)
    if name == base.__name__:
        return base
    doc = f"The API's ``{code}`` error (HTTP {status})."
    return type(
        name, (base,), {"code": code, "status": status, "__module__": __name__, "__doc__": doc}
    )


ERRORS: dict[str, type[MemoryDeskError]] = {}
for _base, _entries in _CODES.items():
    for _code, _, _status in (entry.partition(":") for entry in _entries.split()):
        ERRORS[_code] = _error_class(_code, int(_status or _base.status), _base)
globals().update({cls.__name__: cls for cls in ERRORS.values()})


def __getattr__(name: str) -> type[MemoryDeskError]:
    """Only for type checkers: the classes made above from ``_CODES`` are the module's
    own names at run time, and to mypy each is a ``MemoryDeskError`` class."""
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def error_for(status: int, body: Any, *, retry_after: float | None = None) -> MemoryDeskError:
    """The exception for an error answer (``body`` as decoded JSON, or anything else)."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        error = {"code": "", "message": f"HTTP {status}", "details": body}
    code = str(error.get("code") or "")
    cls = (
        ERRORS.get(code)
        or _BY_STATUS.get(status)
        or (ServerError if status >= 500 else BadRequestError)
    )
    return cls(
        str(error.get("message") or f"HTTP {status}"),
        code=code or None,
        status=status,
        details=error.get("details"),
        retry_after=retry_after,
    )
