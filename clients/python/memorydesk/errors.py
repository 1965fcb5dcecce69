"""Errors: one class per API error code, each below the class of its HTTP status.

Every refusal of the API is ``{"error": {"code", "message", "details"}}`` with a 4xx or
5xx status. ``raise_for`` raises the class of the code (``ScopeForbiddenError``,
``ItemNotFoundError``…), or of the status for a code this version does not know, so a
caller catches as narrowly as it likes: ``except memorydesk.NotFoundError``.

Generated from the server's error codes; ``tests/client/test_errors.py`` checks that every
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


class AliasNotFoundError(NotFoundError):
    code = "alias_not_found"


class AliasOntoSelfError(BadRequestError):
    code = "alias_onto_self"


class AlreadyRetractedError(ConflictError):
    code = "already_retracted"


class AlreadyUndoneError(ConflictError):
    code = "already_undone"


class AmbiguousEntityError(BadRequestError):
    code = "ambiguous_entity"


class AuthenticationFailedError(AuthenticationError):
    code = "authentication_failed"


class BadTargetError(BadRequestError):
    code = "bad_target"


class ChatModelNotConfiguredError(ServiceUnavailableError):
    code = "chat_model_not_configured"


class ConflictNotFoundError(NotFoundError):
    code = "conflict_not_found"


class ConflictResolvedError(ConflictError):
    code = "conflict_resolved"


class ConflictStaleError(ConflictError):
    code = "conflict_stale"


class ConstraintViolationError(ConflictError):
    code = "constraint_violation"


class ContextExistsError(ConflictError):
    code = "context_exists"


class ContextNotEmptyError(ConflictError):
    code = "context_not_empty"


class ContextNotFoundError(NotFoundError):
    code = "context_not_found"


class CorrectionStaleError(ConflictError):
    code = "correction_stale"


class DatabaseError(ServerError):
    code = "database_error"


class DocumentNotFoundError(NotFoundError):
    code = "document_not_found"


class DriftNotOpenError(ConflictError):
    code = "drift_not_open"


class EmbedderUnavailableError(ServiceUnavailableError):
    code = "embedder_unavailable"


class EmbeddingUnavailableError(ServiceUnavailableError):
    code = "embedding_unavailable"


class EmptyFileError(BadRequestError):
    code = "empty_file"


class EmptyTextError(BadRequestError):
    code = "empty_text"


class EntityHasMergesError(ConflictError):
    code = "entity_has_merges"


class EntityKeyTakenError(ConflictError):
    code = "entity_key_taken"


class EntityMergedError(ConflictError):
    code = "entity_merged"


class EntityNotFoundError(NotFoundError):
    code = "entity_not_found"


class EventNotFoundError(NotFoundError):
    code = "event_not_found"


class ExportTruncatedError(BadRequestError):
    code = "export_truncated"


class FactNotCurrentError(ConflictError):
    code = "fact_not_current"


class FactNotFoundError(NotFoundError):
    code = "fact_not_found"


class FactNotPendingError(ConflictError):
    code = "fact_not_pending"


class FactNotRetractedError(ConflictError):
    code = "fact_not_retracted"


class FileTooLargeError(PayloadTooLargeError):
    code = "file_too_large"


class ForbiddenError(PermissionDeniedError):
    code = "forbidden"


class IdenticalFactError(ConflictError):
    code = "identical_fact"


class IdentifierTakenError(ConflictError):
    code = "identifier_taken"


class ImportNotFailedError(ConflictError):
    code = "import_not_failed"


class ImportNotFoundError(NotFoundError):
    code = "import_not_found"


class InternalError(ServerError):
    code = "internal"


class InvalidError(BadRequestError):
    code = "invalid"


class InvalidActionError(BadRequestError):
    code = "invalid_action"


class InvalidAgentError(BadRequestError):
    code = "invalid_agent"


class InvalidBatchSizeError(BadRequestError):
    code = "invalid_batch_size"


class InvalidBodyError(BadRequestError):
    code = "invalid_body"


class InvalidBudgetTokensError(BadRequestError):
    code = "invalid_budget_tokens"


class InvalidChecksError(BadRequestError):
    code = "invalid_checks"


class InvalidCorrectionError(BadRequestError):
    code = "invalid_correction"


class InvalidCursorError(BadRequestError):
    code = "invalid_cursor"


class InvalidDateError(BadRequestError):
    code = "invalid_date"


class InvalidDismissError(BadRequestError):
    code = "invalid_dismiss"


class InvalidEntityError(BadRequestError):
    code = "invalid_entity"


class InvalidExportError(BadRequestError):
    code = "invalid_export"


class InvalidExtendError(BadRequestError):
    code = "invalid_extend"


class InvalidFactsError(BadRequestError):
    code = "invalid_facts"


class InvalidFieldError(BadRequestError):
    code = "invalid_field"


class InvalidFilterError(BadRequestError):
    code = "invalid_filter"


class InvalidFlagsError(BadRequestError):
    code = "invalid_flags"


class InvalidFormatError(BadRequestError):
    code = "invalid_format"


class InvalidGrantsError(BadRequestError):
    code = "invalid_grants"


class InvalidGraphAlphaError(BadRequestError):
    code = "invalid_graph_alpha"


class InvalidIdError(BadRequestError):
    code = "invalid_id"


class InvalidIdentifierError(BadRequestError):
    code = "invalid_identifier"


class InvalidIndexError(BadRequestError):
    code = "invalid_index"


class InvalidInferError(BadRequestError):
    code = "invalid_infer"


class InvalidKError(BadRequestError):
    code = "invalid_k"


class InvalidKeyError(BadRequestError):
    code = "invalid_key"


class InvalidKindError(BadRequestError):
    code = "invalid_kind"


class InvalidLimitError(BadRequestError):
    code = "invalid_limit"


class InvalidMatchConditionsError(BadRequestError):
    code = "invalid_match_conditions"


class InvalidMergeError(BadRequestError):
    code = "invalid_merge"


class InvalidModeError(BadRequestError):
    code = "invalid_mode"


class InvalidNameError(BadRequestError):
    code = "invalid_name"


class InvalidNamespaceError(BadRequestError):
    code = "invalid_namespace"


class InvalidNoteError(BadRequestError):
    code = "invalid_note"


class InvalidOpError(BadRequestError):
    code = "invalid_op"


class InvalidPredicateError(BadRequestError):
    code = "invalid_predicate"


class InvalidPrefixError(BadRequestError):
    code = "invalid_prefix"


class InvalidPropertyError(BadRequestError):
    code = "invalid_property"


class InvalidQueryError(BadRequestError):
    code = "invalid_query"


class InvalidRegistryFileError(BadRequestError):
    code = "invalid_registry_file"


class InvalidRoleError(BadRequestError):
    code = "invalid_role"


class InvalidSaidAtError(BadRequestError):
    code = "invalid_said_at"


class InvalidScopeError(BadRequestError):
    code = "invalid_scope"


class InvalidSortError(BadRequestError):
    code = "invalid_sort"


class InvalidSourceError(BadRequestError):
    code = "invalid_source"


class InvalidTargetError(BadRequestError):
    code = "invalid_target"


class InvalidTextError(BadRequestError):
    code = "invalid_text"


class InvalidThreadError(BadRequestError):
    code = "invalid_thread"


class InvalidThresholdsError(BadRequestError):
    code = "invalid_thresholds"


class InvalidTitleError(BadRequestError):
    code = "invalid_title"


class InvalidTriplesError(BadRequestError):
    code = "invalid_triples"


class InvalidTrustError(BadRequestError):
    code = "invalid_trust"


class InvalidTtlError(BadRequestError):
    code = "invalid_ttl"


class InvalidTypeError(BadRequestError):
    code = "invalid_type"


class InvalidUserError(BadRequestError):
    code = "invalid_user"


class InvalidUsernameError(BadRequestError):
    code = "invalid_username"


class InvalidValidityError(BadRequestError):
    code = "invalid_validity"


class InvalidValueError(BadRequestError):
    code = "invalid_value"


class InvalidVersionError(BadRequestError):
    code = "invalid_version"


class InverseNotRelationError(BadRequestError):
    code = "inverse_not_relation"


class InversePredicateError(BadRequestError):
    code = "inverse_predicate"


class ItemNotFoundError(NotFoundError):
    code = "item_not_found"


class KeywordNotFoundError(NotFoundError):
    code = "keyword_not_found"


class KindMismatchError(ConflictError):
    code = "kind_mismatch"


class LastAdminError(ConflictError):
    code = "last_admin"


class LlmCallFailedError(ServiceUnavailableError):
    code = "llm_call_failed"
    status = 502


class LlmError(ServiceUnavailableError):
    code = "llm_error"
    status = 502


class LlmHttpError(ServiceUnavailableError):
    code = "llm_http_error"
    status = 502


class LlmInvalidOutputError(ServiceUnavailableError):
    code = "llm_invalid_output"
    status = 502


class LlmNotConfiguredError(ServiceUnavailableError):
    code = "llm_not_configured"


class LlmRateLimitedError(ServiceUnavailableError):
    code = "llm_rate_limited"


class LlmTimeoutError(ServiceUnavailableError):
    code = "llm_timeout"


class LlmUnreachableError(ServiceUnavailableError):
    code = "llm_unreachable"


class MalformedError(BadRequestError):
    code = "malformed"


class MergeNotFoundError(NotFoundError):
    code = "merge_not_found"


class MethodNotAllowedError(BadRequestError):
    code = "method_not_allowed"
    status = 405


class MissingFileError(BadRequestError):
    code = "missing_file"


class MissingObjectError(BadRequestError):
    code = "missing_object"


class MissingPrefixError(BadRequestError):
    code = "missing_prefix"


class MissingQueryError(BadRequestError):
    code = "missing_query"


class MissingScopeError(BadRequestError):
    code = "missing_scope"


class MissingTargetError(BadRequestError):
    code = "missing_target"


class MissingTextError(BadRequestError):
    code = "missing_text"


class MissingTriplesError(BadRequestError):
    code = "missing_triples"


class MissingValueError(BadRequestError):
    code = "missing_value"


class NameTooLongError(BadRequestError):
    code = "name_too_long"


class NoFactsError(BadRequestError):
    code = "no_facts"


class NotAMemberError(BadRequestError):
    code = "not_a_member"


class NotARelationError(BadRequestError):
    code = "not_a_relation"


class NotAcceptableError(BadRequestError):
    code = "not_acceptable"
    status = 406


class NotAuthenticatedError(AuthenticationError):
    code = "not_authenticated"


class NotUndoableError(ConflictError):
    code = "not_undoable"


class NothingToRetractError(ConflictError):
    code = "nothing_to_retract"


class PredicateCollisionError(ConflictError):
    code = "predicate_collision"


class PredicateExistsAsObservedError(ConflictError):
    code = "predicate_exists_as_observed"


class PredicateKindMismatchError(BadRequestError):
    code = "predicate_kind_mismatch"


class PredicateNotRegisteredError(BadRequestError):
    code = "predicate_not_registered"


class RegistryImportFailedError(BadRequestError):
    code = "registry_import_failed"


class RejectedPredicateError(BadRequestError):
    code = "rejected_predicate"


class RoleRequiredError(PermissionDeniedError):
    code = "role_required"


class RunNotFailedError(ConflictError):
    code = "run_not_failed"


class RunNotFinishedError(ConflictError):
    code = "run_not_finished"


class RunNotFoundError(NotFoundError):
    code = "run_not_found"


class ScopeForbiddenError(PermissionDeniedError):
    code = "scope_forbidden"


class SecretRefusedError(BadRequestError):
    code = "secret_refused"


class SeveralValuesError(ConflictError):
    code = "several_values"


class StaffRequiredError(PermissionDeniedError):
    code = "staff_required"


class TextTooLargeError(PayloadTooLargeError):
    code = "text_too_large"


class ThreadNeedsTurnsError(BadRequestError):
    code = "thread_needs_turns"


class ThreadNotFoundError(NotFoundError):
    code = "thread_not_found"


class ThrottledError(RateLimitError):
    code = "throttled"


class TokenNotFoundError(NotFoundError):
    code = "token_not_found"


class TokenRevokedError(ConflictError):
    code = "token_revoked"


class TooManyAliasesError(BadRequestError):
    code = "too_many_aliases"


class TooManyOpsError(BadRequestError):
    code = "too_many_ops"


class TooManyQueriesError(BadRequestError):
    code = "too_many_queries"


class TooManyRowsError(BadRequestError):
    code = "too_many_rows"


class TurnNotFoundError(NotFoundError):
    code = "turn_not_found"


class UnavailableError(ServiceUnavailableError):
    code = "unavailable"


class UndecodableError(BadRequestError):
    code = "undecodable"


class UndoBlockedError(ConflictError):
    code = "undo_blocked"


class UnexpectedObjectError(BadRequestError):
    code = "unexpected_object"


class UnexpectedTriplesError(BadRequestError):
    code = "unexpected_triples"


class UnknownFieldError(BadRequestError):
    code = "unknown_field"


class UnknownParameterError(BadRequestError):
    code = "unknown_parameter"


class UnknownPredicateError(BadRequestError):
    code = "unknown_predicate"


class UnsupportedMediaTypeError(BadRequestError):
    code = "unsupported_media_type"
    status = 415


class UserExistsError(ConflictError):
    code = "user_exists"


class ValueTooLongError(BadRequestError):
    code = "value_too_long"


class WeakPasswordError(BadRequestError):
    code = "weak_password"


class WrongContextError(BadRequestError):
    code = "wrong_context"


class WrongEntityTypeError(BadRequestError):
    code = "wrong_entity_type"


ERRORS: dict[str, type[MemoryDeskError]] = {
    "alias_not_found": AliasNotFoundError,
    "alias_onto_self": AliasOntoSelfError,
    "already_retracted": AlreadyRetractedError,
    "already_undone": AlreadyUndoneError,
    "ambiguous_entity": AmbiguousEntityError,
    "authentication_failed": AuthenticationFailedError,
    "bad_request": BadRequestError,
    "bad_target": BadTargetError,
    "chat_model_not_configured": ChatModelNotConfiguredError,
    "conflict": ConflictError,
    "conflict_not_found": ConflictNotFoundError,
    "conflict_resolved": ConflictResolvedError,
    "conflict_stale": ConflictStaleError,
    "constraint_violation": ConstraintViolationError,
    "context_exists": ContextExistsError,
    "context_not_empty": ContextNotEmptyError,
    "context_not_found": ContextNotFoundError,
    "correction_stale": CorrectionStaleError,
    "database_error": DatabaseError,
    "document_not_found": DocumentNotFoundError,
    "drift_not_open": DriftNotOpenError,
    "embedder_unavailable": EmbedderUnavailableError,
    "embedding_unavailable": EmbeddingUnavailableError,
    "empty_file": EmptyFileError,
    "empty_text": EmptyTextError,
    "entity_has_merges": EntityHasMergesError,
    "entity_key_taken": EntityKeyTakenError,
    "entity_merged": EntityMergedError,
    "entity_not_found": EntityNotFoundError,
    "event_not_found": EventNotFoundError,
    "export_truncated": ExportTruncatedError,
    "fact_not_current": FactNotCurrentError,
    "fact_not_found": FactNotFoundError,
    "fact_not_pending": FactNotPendingError,
    "fact_not_retracted": FactNotRetractedError,
    "file_too_large": FileTooLargeError,
    "forbidden": ForbiddenError,
    "identical_fact": IdenticalFactError,
    "identifier_taken": IdentifierTakenError,
    "import_not_failed": ImportNotFailedError,
    "import_not_found": ImportNotFoundError,
    "internal": InternalError,
    "invalid": InvalidError,
    "invalid_action": InvalidActionError,
    "invalid_agent": InvalidAgentError,
    "invalid_batch_size": InvalidBatchSizeError,
    "invalid_body": InvalidBodyError,
    "invalid_budget_tokens": InvalidBudgetTokensError,
    "invalid_checks": InvalidChecksError,
    "invalid_correction": InvalidCorrectionError,
    "invalid_cursor": InvalidCursorError,
    "invalid_date": InvalidDateError,
    "invalid_dismiss": InvalidDismissError,
    "invalid_entity": InvalidEntityError,
    "invalid_export": InvalidExportError,
    "invalid_extend": InvalidExtendError,
    "invalid_facts": InvalidFactsError,
    "invalid_field": InvalidFieldError,
    "invalid_filter": InvalidFilterError,
    "invalid_flags": InvalidFlagsError,
    "invalid_format": InvalidFormatError,
    "invalid_grants": InvalidGrantsError,
    "invalid_graph_alpha": InvalidGraphAlphaError,
    "invalid_id": InvalidIdError,
    "invalid_identifier": InvalidIdentifierError,
    "invalid_index": InvalidIndexError,
    "invalid_infer": InvalidInferError,
    "invalid_k": InvalidKError,
    "invalid_key": InvalidKeyError,
    "invalid_kind": InvalidKindError,
    "invalid_limit": InvalidLimitError,
    "invalid_match_conditions": InvalidMatchConditionsError,
    "invalid_merge": InvalidMergeError,
    "invalid_mode": InvalidModeError,
    "invalid_name": InvalidNameError,
    "invalid_namespace": InvalidNamespaceError,
    "invalid_note": InvalidNoteError,
    "invalid_op": InvalidOpError,
    "invalid_predicate": InvalidPredicateError,
    "invalid_prefix": InvalidPrefixError,
    "invalid_property": InvalidPropertyError,
    "invalid_query": InvalidQueryError,
    "invalid_registry_file": InvalidRegistryFileError,
    "invalid_role": InvalidRoleError,
    "invalid_said_at": InvalidSaidAtError,
    "invalid_scope": InvalidScopeError,
    "invalid_sort": InvalidSortError,
    "invalid_source": InvalidSourceError,
    "invalid_target": InvalidTargetError,
    "invalid_text": InvalidTextError,
    "invalid_thread": InvalidThreadError,
    "invalid_thresholds": InvalidThresholdsError,
    "invalid_title": InvalidTitleError,
    "invalid_triples": InvalidTriplesError,
    "invalid_trust": InvalidTrustError,
    "invalid_ttl": InvalidTtlError,
    "invalid_type": InvalidTypeError,
    "invalid_user": InvalidUserError,
    "invalid_username": InvalidUsernameError,
    "invalid_validity": InvalidValidityError,
    "invalid_value": InvalidValueError,
    "invalid_version": InvalidVersionError,
    "inverse_not_relation": InverseNotRelationError,
    "inverse_predicate": InversePredicateError,
    "item_not_found": ItemNotFoundError,
    "keyword_not_found": KeywordNotFoundError,
    "kind_mismatch": KindMismatchError,
    "last_admin": LastAdminError,
    "llm_call_failed": LlmCallFailedError,
    "llm_error": LlmError,
    "llm_http_error": LlmHttpError,
    "llm_invalid_output": LlmInvalidOutputError,
    "llm_not_configured": LlmNotConfiguredError,
    "llm_rate_limited": LlmRateLimitedError,
    "llm_timeout": LlmTimeoutError,
    "llm_unreachable": LlmUnreachableError,
    "malformed": MalformedError,
    "merge_not_found": MergeNotFoundError,
    "method_not_allowed": MethodNotAllowedError,
    "missing_file": MissingFileError,
    "missing_object": MissingObjectError,
    "missing_prefix": MissingPrefixError,
    "missing_query": MissingQueryError,
    "missing_scope": MissingScopeError,
    "missing_target": MissingTargetError,
    "missing_text": MissingTextError,
    "missing_triples": MissingTriplesError,
    "missing_value": MissingValueError,
    "name_too_long": NameTooLongError,
    "no_facts": NoFactsError,
    "not_a_member": NotAMemberError,
    "not_a_relation": NotARelationError,
    "not_acceptable": NotAcceptableError,
    "not_authenticated": NotAuthenticatedError,
    "not_found": NotFoundError,
    "not_undoable": NotUndoableError,
    "nothing_to_retract": NothingToRetractError,
    "predicate_collision": PredicateCollisionError,
    "predicate_exists_as_observed": PredicateExistsAsObservedError,
    "predicate_kind_mismatch": PredicateKindMismatchError,
    "predicate_not_registered": PredicateNotRegisteredError,
    "registry_import_failed": RegistryImportFailedError,
    "rejected_predicate": RejectedPredicateError,
    "role_required": RoleRequiredError,
    "run_not_failed": RunNotFailedError,
    "run_not_finished": RunNotFinishedError,
    "run_not_found": RunNotFoundError,
    "scope_forbidden": ScopeForbiddenError,
    "secret_refused": SecretRefusedError,
    "server_error": ServerError,
    "several_values": SeveralValuesError,
    "staff_required": StaffRequiredError,
    "text_too_large": TextTooLargeError,
    "thread_needs_turns": ThreadNeedsTurnsError,
    "thread_not_found": ThreadNotFoundError,
    "throttled": ThrottledError,
    "token_not_found": TokenNotFoundError,
    "token_revoked": TokenRevokedError,
    "too_many_aliases": TooManyAliasesError,
    "too_many_ops": TooManyOpsError,
    "too_many_queries": TooManyQueriesError,
    "too_many_rows": TooManyRowsError,
    "turn_not_found": TurnNotFoundError,
    "unavailable": UnavailableError,
    "undecodable": UndecodableError,
    "undo_blocked": UndoBlockedError,
    "unexpected_object": UnexpectedObjectError,
    "unexpected_triples": UnexpectedTriplesError,
    "unknown_field": UnknownFieldError,
    "unknown_parameter": UnknownParameterError,
    "unknown_predicate": UnknownPredicateError,
    "unsupported_media_type": UnsupportedMediaTypeError,
    "user_exists": UserExistsError,
    "value_too_long": ValueTooLongError,
    "weak_password": WeakPasswordError,
    "wrong_context": WrongContextError,
    "wrong_entity_type": WrongEntityTypeError,
}


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
