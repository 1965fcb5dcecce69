"""OpenAPI generation for the API's plain ``APIView`` views.

Naming: nested ``InputSerializer`` / ``OutputSerializer`` classes (one per view, HackSoft
style) would all be called "Input"/"Output" in the schema and overwrite each other; this
names them after their view instead (``ContextListApi.InputSerializer`` →
``ContextListInput``).

Request fields document exactly what they accept (``memory.api.fields``): text has no NUL
characters and, when required, a character that is not whitespace; patterns, exclusive
minimums and distinct lists are stated.

Errors: every operation documents the error answers the shared machinery can give it, in
the one error shape (``memory.api.errors``): authentication and permission refusals,
unknown contexts and records, invalid input, refused writes, throttling. A view adds the
statuses only it can give (413, 503, …) in its own ``extend_schema``.
"""

from __future__ import annotations

from typing import Any, Literal

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import force_instance
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

from memory.api.common import ErrorSerializer
from memory.api.fields import (
    NON_BLANK_TEXT_PATTERN,
    TEXT_PATTERN,
    DistinctListField,
    JsonInput,
    PatternField,
    PositiveFloatField,
)

_UNSAFE_METHODS = ("POST", "PUT", "PATCH", "DELETE")

_ERRORS = {
    "400": "The input is not valid; `details` names each problem.",
    "401": "No valid `Authorization: Token …` header (or signed-in session).",
    "403": "The caller's role or scope grants do not allow this.",
    "404": "No such context, or no such record visible to the caller.",
    "409": "The write conflicts with the current state or a database constraint; "
    "nothing was written.",
    "415": "The body's Content-Type is not one this operation reads.",
    "429": "Too many requests: retry after the `Retry-After` seconds.",
}


class MemoryAutoSchema(AutoSchema):
    def get_serializer_name(
        self, serializer: Any, direction: Literal["request", "response"]
    ) -> str:
        name: str = super().get_serializer_name(serializer, direction)
        qualname = type(serializer).__qualname__
        if "." not in qualname or getattr(getattr(serializer, "Meta", None), "ref_name", None):
            return name
        outer, inner = qualname.rsplit(".", 1)
        return outer.replace(".", "").removesuffix("Api") + inner.removesuffix("Serializer")

    def _map_basic_serializer(self, serializer: Any, direction: str) -> dict[str, Any]:
        schema: dict[str, Any] = super()._map_basic_serializer(serializer, direction)
        if direction == "request":
            instance = force_instance(serializer)
            fields = instance.fields
            for name, property_schema in schema["properties"].items():
                _document_request_field(fields.get(name), property_schema)
            if isinstance(instance, JsonInput):
                schema["additionalProperties"] = False  # JsonInput refuses unknown fields
        return schema

    def _get_request_for_media_type(self, serializer: Any, direction: str = "request") -> Any:
        schema, required = super()._get_request_for_media_type(serializer, direction)
        # A body described by a raw schema (the bulk import's CSV or JSON lines) is the
        # whole input of its operation; drf-spectacular calls such bodies optional.
        return schema, required or isinstance(serializer, dict)

    def get_operation(
        self, path: str, path_regex: str, path_prefix: str, method: str, registry: Any
    ) -> dict[str, Any] | None:
        operation: dict[str, Any] | None = super().get_operation(
            path, path_regex, path_prefix, method, registry
        )
        if operation is None:
            return None
        responses = operation["responses"]
        for code in self._error_statuses(operation):
            if code not in responses:
                response = OpenApiResponse(ErrorSerializer, description=_ERRORS[code])
                responses[code] = self._get_response_for_code(response, code)
        return operation

    def _error_statuses(self, operation: dict[str, Any]) -> list[str]:
        has_body = "requestBody" in operation
        parameters = operation.get("parameters", [])
        has_query = any(p["in"] == "query" for p in parameters)
        has_pattern = any("pattern" in p.get("schema", {}) for p in parameters)
        security = operation.get("security", [])
        codes = ["429"]
        if has_body or has_query or has_pattern:
            codes.append("400")
        if security and {} not in security:
            codes += ["401", "403"]
        if "{" in self.path:
            codes.append("404")
        if self.method in _UNSAFE_METHODS:
            codes.append("409")
        if has_body:
            codes.append("415")
        return sorted(codes)


def _document_request_field(field: Any, schema: dict[str, Any]) -> None:
    if isinstance(field, DistinctListField):
        schema["uniqueItems"] = True
    if isinstance(field, PositiveFloatField):
        schema["exclusiveMinimum"] = True
    if isinstance(field, serializers.ListField) and "items" in schema:
        _document_request_field(field.child, schema["items"])
        return
    if not isinstance(field, serializers.CharField) or field.read_only:
        return
    if schema.get("type") != "string" or "enum" in schema or "format" in schema:
        return
    if isinstance(field, PatternField):
        schema["pattern"] = f"^$|{field.pattern}" if field.allow_blank else field.pattern
    elif "pattern" not in schema:
        schema["pattern"] = TEXT_PATTERN if field.allow_blank else NON_BLANK_TEXT_PATTERN
