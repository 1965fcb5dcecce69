"""Input fields whose OpenAPI description is exactly what they accept.

The schema is a contract clients (and the API fuzzer) generate requests from: text a field
documents as valid must not be refused, and text it documents as invalid must not be
accepted. Patterns here use ASCII classes only, so the JSON-schema (ECMA) reading and
Python's agree, and they are matched against the text as sent (no trimming first).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty

from memory.domain.predicate_names import MAX_PREDICATE_LENGTH
from memory.kernel.errors import ValidationFailed
from memory.kernel.scopes import MAX_SCOPE_LENGTH, ScopeError
from memory.web.json_codec import json_value_encodable

# What Python's str.strip() and str.split() treat as whitespace, as a character class:
# DRF trims it before deciding that a required text is blank.
WHITESPACE = r"\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# DRF refuses NUL characters in any text field (PostgreSQL cannot store them).
TEXT_PATTERN = r"^[^\x00]*$"
NON_BLANK_TEXT_PATTERN = rf"^[^\x00]*[^\x00{WHITESPACE}][^\x00]*$"
# Text that is not only whitespace (for text the code strips but does not store).
NOT_ONLY_WHITESPACE_PATTERN = rf"[^{WHITESPACE}]"

_SEGMENT = r"[A-Za-z0-9][A-Za-z0-9_.@:-]*"
# memory.kernel.scopes.scope_validate, which also drops slashes around the path.
SCOPE_PATTERN = rf"^/*{_SEGMENT}(/{_SEGMENT})*/*$"
# A scope filter: a scope, everything below one (``P/*``), or every scope (``*``).
SCOPE_FILTER_PATTERN = rf"^(\*|/*{_SEGMENT}(/{_SEGMENT})*/*(/\*)?)$"
# memory.domain.predicate_names.predicate_check_text: letters, digits, spaces, '_' and '-'.
PREDICATE_TEXT_PATTERN = r"^[A-Za-z0-9 _-]*[A-Za-z0-9][A-Za-z0-9 _-]*$"
PREDICATE_TEXT_HELP = (
    "a predicate in any form (worksAt, works-at, works at, an alias); at most "
    f"{MAX_PREDICATE_LENGTH} characters, also once normalized to snake_case"
)


class PatternField(serializers.CharField):
    """Text matching ``pattern`` as a whole; ``MemoryAutoSchema`` documents the pattern."""

    def __init__(self, pattern: str, *, message: str, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)
        self.pattern = pattern
        self.pattern_message = message
        self._regex = re.compile(pattern)

    def to_internal_value(self, data: Any) -> str:
        value: str = super().to_internal_value(data)
        if not self._regex.fullmatch(value):
            raise self.refusal(value)
        return value

    def refusal(self, value: str) -> Exception:
        return serializers.ValidationError(self.pattern_message)


class ScopeField(PatternField):
    """A scope as ``memory.kernel.scopes.scope_validate`` reads it."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", MAX_SCOPE_LENGTH)
        message = "a scope is path segments of letters, digits and _.@:- separated by '/'"
        super().__init__(SCOPE_PATTERN, message=message, **kwargs)

    def refusal(self, value: str) -> Exception:
        return _scope_error(value)


class ScopeFilterField(PatternField):
    """A scope pattern narrowing a read: ``P``, ``P/*`` or ``*``."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", MAX_SCOPE_LENGTH + 2)
        super().__init__(SCOPE_FILTER_PATTERN, message="a scope filter is P, P/* or *", **kwargs)

    def refusal(self, value: str) -> Exception:
        return _scope_error(value)


class PredicateTextField(PatternField):
    """A predicate in any form; its normalized length is checked where it is resolved."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", MAX_PREDICATE_LENGTH)
        kwargs.setdefault("help_text", PREDICATE_TEXT_HELP)
        message = "use only letters, digits, spaces, '_' and '-', with a letter or digit"
        super().__init__(PREDICATE_TEXT_PATTERN, message=message, **kwargs)

    def refusal(self, value: str) -> Exception:
        return _predicate_error(value)


class PositiveFloatField(serializers.FloatField):
    """A number above 0 (DRF's ``min_value`` is inclusive); documented as exclusive."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 0)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> float:
        value: float = super().to_internal_value(data)
        if value <= 0:
            raise serializers.ValidationError("must be above 0")
        return value


class DistinctListField(serializers.ListField):
    """A list that names each item once; documented with ``uniqueItems``."""

    def to_internal_value(self, data: Any) -> list[Any]:
        values: list[Any] = super().to_internal_value(data)
        if len(set(values)) != len(values):
            raise serializers.ValidationError("list each item once")
        return values


def predicate_text_schema() -> dict[str, Any]:
    """The schema of a predicate named in a path (``predicates/{name}``)."""
    return {"type": "string", "pattern": PREDICATE_TEXT_PATTERN, "maxLength": MAX_PREDICATE_LENGTH}


def predicate_path_check(name: str) -> str:
    """Hold a predicate named in a path to ``predicate_text_schema`` (400 otherwise)."""
    if len(name) > MAX_PREDICATE_LENGTH or not re.fullmatch(PREDICATE_TEXT_PATTERN, name):
        raise _predicate_error(name)
    return name


# Refusals with the codes the services give for the same text (``invalid_scope``,
# ``invalid_predicate``), so a client sees one code whichever layer refused.
def _scope_error(value: str) -> Exception:
    return ScopeError(
        f"invalid scope {value[:80]!r}: use path segments of letters, digits and _.@:- "
        f"separated by '/', at most {MAX_SCOPE_LENGTH} characters"
    )


def _predicate_error(value: str) -> Exception:
    return ValidationFailed(
        f"invalid predicate {value[:80]!r}: use only letters, digits, spaces, '_' and '-' "
        f"(at most {MAX_PREDICATE_LENGTH} characters)",
        code="invalid_predicate",
    )


class JsonInput(serializers.Serializer):
    """A JSON request body whose values must have the JSON types the schema documents.

    DRF's fields are lenient for form data: a text field takes ``5``, a boolean ``1`` or
    ``"yes"``, a number ``"0.5"``. In JSON the type is part of the contract, so ``{"wait":
    0}`` is refused here rather than read as false.
    """

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            errors: dict[str, list[str]] = {}
            # A misspelt or unsupported field must not vanish silently.
            for name in sorted(set(data) - set(self.fields)):
                errors[str(name)[:100]] = [
                    f"unknown field; this body takes {', '.join(sorted(self.fields))}"
                ]
            for field in self._writable_fields:
                problem = _json_type_problem(field, data.get(field.field_name, empty))
                if problem:
                    errors[str(field.field_name)] = [problem]
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)


def _json_type_problem(field: serializers.Field, value: Any) -> str | None:
    if value is empty or value is None:
        return None  # required and null are the field's own checks
    if isinstance(field, serializers.ListField) and isinstance(value, list):
        problems = (_json_type_problem(field.child, item) for item in value)
        return next((p for p in problems if p), None)
    if isinstance(field, serializers.BooleanField):
        expected, ok = "true or false", isinstance(value, bool)
    elif isinstance(field, serializers.IntegerField):
        expected, ok = "an integer", isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(field, serializers.FloatField):
        expected = "a number"
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif isinstance(field, serializers.CharField):
        expected, ok = "a string", isinstance(value, str)
        # DRF trims the text before it checks max_length; the schema's maxLength is about
        # the text as sent, so " " + 300 letters must not pass a 300-character limit.
        if ok and field.max_length is not None and len(value) > field.max_length:
            return str(field.error_messages["max_length"]).format(max_length=field.max_length)
    else:
        return None
    return None if ok else f"must be {expected}"


def _inline_refs(schema: Any, definitions: dict[str, Any]) -> Any:
    """A JSON schema with its ``$ref``s to ``$defs`` replaced by their definitions (the
    OpenAPI document has no ``$defs`` for them to point at)."""
    if isinstance(schema, dict):
        if "$ref" in schema:
            return _inline_refs(definitions[schema["$ref"].rsplit("/", 1)[-1]], definitions)
        options = schema.get("anyOf")
        if isinstance(options, list) and {"type": "null"} in options:
            # JSON Schema's "X or null" is OpenAPI 3.0's "X, nullable".
            rest = [o for o in options if o != {"type": "null"}]
            merged = {k: v for k, v in schema.items() if k != "anyOf"}
            merged |= rest[0] if len(rest) == 1 else {"anyOf": rest}
            merged["nullable"] = True
            return _inline_refs(merged, definitions)
        return {k: _inline_refs(v, definitions) for k, v in schema.items() if k != "$defs"}
    if isinstance(schema, list):
        return [_inline_refs(item, definitions) for item in schema]
    return schema


def _text_patterns(schema: Any) -> Any:
    """Say of each text what the item shapes refuse (memory/llm/schemas.py): NUL
    characters, and — a required text is stripped first — one of only whitespace."""
    if isinstance(schema, dict):
        out = {k: _text_patterns(v) for k, v in schema.items()}
        if out.get("type") == "string" and "pattern" not in out:
            out["pattern"] = NON_BLANK_TEXT_PATTERN if out.get("minLength") else TEXT_PATTERN
        return out
    if isinstance(schema, list):
        return [_text_patterns(item) for item in schema]
    return schema


def triples_schema() -> dict[str, Any]:
    """The ``triples`` body as the ingest service validates it (memory/llm/schemas.py)."""
    from memory.llm.schemas import TriplesInput

    schema = TriplesInput.model_json_schema()
    inlined: dict[str, Any] = _text_patterns(_inline_refs(schema, schema.get("$defs", {})))
    inlined.pop("title", None)
    inlined["description"] = (
        "The graph to write as given (with `infer: triples` or `preview`): entities, "
        "relations, attributes and actions; unknown fields are refused."
    )
    inlined["nullable"] = True
    return inlined


@extend_schema_field(triples_schema())
class TriplesField(serializers.JSONField):
    """``triples``: checked in full by the ingest service (per-item errors); typed here
    for the OpenAPI schema."""

    def to_internal_value(self, data: Any) -> Any:
        # DRF's JSONField proves a value encodable by encoding it with the standard
        # library, which on a 2,000-fact body took longer than reading the body. orjson
        # decides it first; only what orjson cannot write gets DRF's own check (and its
        # refusal), so the field takes and refuses exactly what it did.
        as_sent = not self.binary and not getattr(data, "is_json_string", False)
        if as_sent and json_value_encodable(data):
            return data
        return super().to_internal_value(data)
