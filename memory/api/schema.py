"""OpenAPI generation for the API's plain ``APIView`` views.

Naming: nested ``InputSerializer`` / ``OutputSerializer`` classes (one per view, HackSoft
style) would all be called "Input"/"Output" in the schema and overwrite each other; this
names them after their view instead (``ContextListApi.InputSerializer`` →
``ContextListInput``).

Request fields document exactly what they accept (``memory.api.fields``): text has no NUL
characters and, when required, a character that is not whitespace; patterns, exclusive
minimums and distinct lists are stated.

Grouping: each operation is tagged with the resource its path names (``…/facts/{id}`` →
``facts``; see ``RESOURCE_TAGS``) and has a one-line summary: the view's own
``extend_schema(summary=…)``, else ``SUMMARIES`` below, else the first line of the view
method's (or single-method view's) docstring. ``SPECTACULAR_SETTINGS["TAGS"]`` orders and
describes the groups Swagger UI shows.

Errors: every operation documents the error answers the shared machinery can give it, in
the one error shape (``memory.web.errors``): authentication and permission refusals,
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
    "400": "The input is not valid (an unknown body field or query parameter among it); "
    "`details` names each problem.",
    "401": "No valid `Authorization: Token …` header (or signed-in session).",
    "403": "The caller's role or scope grants do not allow this.",
    "404": "No such context, or no such record visible to the caller.",
    "409": "The write conflicts with the current state or a database constraint; "
    "nothing was written.",
    "415": "The body's Content-Type is not one this operation reads.",
    "429": "Too many requests: retry after the `Retry-After` seconds.",
    "503": "Concurrent writes to the same rows kept breaking this write (`write_contention`, "
    "after it was run again inside the request); nothing was written: send it again after "
    "the `Retry-After` seconds.",
}


API_PREFIX = "/api/v1/"

# Path segments that belong to another resource's group.
RESOURCE_TAGS = {"merges": "entities", "fsck": "contexts", "context": "search"}

# One line per operation, keyed by method and path below API_PREFIX.
SUMMARIES = {
    "GET contexts": "List the contexts you belong to",
    "POST contexts": "Create a context with the standard registry",
    "GET contexts/{ctx}": "Show a context: settings, your role and grants",
    "PATCH contexts/{ctx}": "Change a context's settings",
    "POST contexts/{ctx}/fsck": "Check a context for duplicates, orphans and drift",
    "GET contexts/{ctx}/audit": "List audit events, newest first",
    "POST contexts/{ctx}/audit/{event_id}/undo": "Undo an audited curation action",
    "GET contexts/{ctx}/conflicts": "List open conflicts between single values",
    "POST contexts/{ctx}/conflicts/{conflict_id}/resolve": "Resolve a conflict: keep one value",
    "POST contexts/{ctx}/context": "Build a prompt-ready memory block for a query or entity",
    "GET contexts/{ctx}/documents": "List documents",
    "POST contexts/{ctx}/documents": "Store a document: chunks, postings and keywords",
    "GET contexts/{ctx}/documents/{document_id}": "Show a document with its chunks",
    "DELETE contexts/{ctx}/documents/{document_id}": "Delete a document and its chunks",
    "GET contexts/{ctx}/documents/{document_id}/keywords": "List a document's keywords",
    "GET contexts/{ctx}/drift": "List observed predicates with suggestions",
    "POST contexts/{ctx}/drift/{name}/resolve": "Resolve a drift item: alias, promote or reject",
    "GET contexts/{ctx}/duplicates": "List duplicate candidates, clustered",
    "POST contexts/{ctx}/duplicates/dismiss": "Dismiss duplicate candidates as different",
    "GET contexts/{ctx}/entities": "List or find entities",
    "POST contexts/{ctx}/entities": "Create or match an entity (upsert)",
    "GET contexts/{ctx}/entities/{entity_id}": "Show an entity with its best current facts",
    "PATCH contexts/{ctx}/entities/{entity_id}": "Rename an entity or change its aliases",
    "DELETE contexts/{ctx}/entities/{entity_id}": "Delete an entity",
    "GET contexts/{ctx}/entities/{entity_id}/history": "List every fact about an entity",
    "POST contexts/{ctx}/entities/bulk": "Seed entities from CSV or JSON lines",
    "POST contexts/{ctx}/entities/merge": "Merge entities into a survivor (or preview)",
    "POST contexts/{ctx}/merges/{merge_id}/undo": "Undo a merge",
    "GET contexts/{ctx}/facts": "List or filter facts",
    "POST contexts/{ctx}/facts": "Write one fact",
    "GET contexts/{ctx}/facts/{fact_id}": "Show a fact",
    "DELETE contexts/{ctx}/facts/{fact_id}": "Retract a fact (kept in history)",
    "PATCH contexts/{ctx}/facts/{fact_id}": "Edit a fact: predicate, ends swapped, validity",
    "POST contexts/{ctx}/facts/{fact_id}/correct": "Correct a fact: the new value supersedes",
    "POST contexts/{ctx}/facts/{fact_id}/restore": "Restore a retracted fact",
    "POST contexts/{ctx}/facts/retract": "Retract many facts in one action",
    "GET contexts/{ctx}/export": "Export the memory as JSON lines, or the graph as RDF",
    "POST contexts/{ctx}/import": "Import a memory into an empty context",
    "GET contexts/{ctx}/import/{job_id}": "Show a memory import's progress",
    "POST contexts/{ctx}/facts/{fact_id}/review": "Accept or reject a pending fact",
    "POST contexts/{ctx}/facts/review": "Accept or reject several pending facts",
    "GET contexts/{ctx}/threads": "List conversations (threads)",
    "GET contexts/{ctx}/threads/{thread}": "Show a conversation's turns and their facts",
    "GET contexts/{ctx}/keywords": "List keywords of visible documents",
    "GET contexts/{ctx}/keywords/{text}": "Show a keyword and its documents",
    "GET contexts/{ctx}/keywords/search": "Find keywords near a query by meaning",
    "POST contexts/{ctx}/memories": "Write a memory (LLM extraction, triples or a turn)",
    "GET contexts/{ctx}/predicates": "List the predicate registry",
    "POST contexts/{ctx}/predicates": "Register a predicate",
    "GET contexts/{ctx}/predicates/{name}": "Show a registered predicate",
    "PATCH contexts/{ctx}/predicates/{name}": "Edit a registered predicate (admin)",
    "DELETE contexts/{ctx}/predicates/{name}": "Unregister a predicate",
    "POST contexts/{ctx}/predicates/{name}/aliases": "Add aliases to a predicate",
    "GET contexts/{ctx}/predicates/canonicalize": "Say which predicate a name is stored under",
    "GET contexts/{ctx}/predicates/export": "Export the registry as a file",
    "GET contexts/{ctx}/predicates/shapes": "The registry's constraints as SHACL shapes",
    "GET contexts/{ctx}/constraints/violations": "List the violations of constraints",
    "POST contexts/{ctx}/constraints/exceptions": "Make an entity an exception to a constraint",
    "POST contexts/{ctx}/predicates/import": "Import a registry file",
    "GET contexts/{ctx}/runs": "List ingest runs",
    "GET contexts/{ctx}/runs/{run_id}": "Show an ingest run with its report",
    "POST contexts/{ctx}/runs/{run_id}/retract": "Retract what a run wrote (or preview)",
    "POST contexts/{ctx}/runs/{run_id}/retry": "Retry a failed run",
    "POST contexts/{ctx}/search": "Search chunks, turns, facts or entities",
    "GET contexts/{ctx}/vocabulary": "Show the vocabulary the extraction prompt would use",
    "GET health": "Check that each part of the service is up",
}

# The reconciliation service answers on two roots: the token's and a keyed URL's.
RECONCILE_SUMMARIES = {
    "GET": "Reconciliation manifest, or v0.2 queries=",
    "POST": "Reconcile a batch of names (v0.2 form)",
    "POST /match": "Reconcile a batch of names (1.0-draft)",
    "POST /extend": "Extend reconciled entities with fact values",
    "GET /extend/propose": "Properties a data extension can ask for",
    "GET /preview": "Preview card of an entity",
    "GET /suggest/entity": "Suggest entities by name prefix",
    "GET /suggest/type": "Suggest entity types",
    "GET /suggest/property": "Suggest properties (predicates, attributes)",
}
for _root, _keyed in (
    ("contexts/{ctx}/reconcile", ""),
    ("contexts/{ctx}/reconcile/k/{key}", " (key)"),
):
    for _operation, _summary in RECONCILE_SUMMARIES.items():
        _method, _, _suffix = _operation.partition(" ")
        SUMMARIES[f"{_method} {_root}{_suffix}"] = _summary + _keyed


def resource_tag(path: str) -> str:
    """The resource an API path names: ``/api/v1/contexts/{ctx}/facts/{id}`` → ``facts``,
    ``/api/v1/contexts/{ctx}`` → ``contexts``, ``/api/v1/health`` → ``health``."""
    parts = [p for p in path.removeprefix(API_PREFIX).split("/") if p]
    if len(parts) >= 3 and parts[0] == "contexts":
        segment = parts[2]
    else:
        segment = parts[0] if parts else "api"
    return RESOURCE_TAGS.get(segment, segment)


def _first_line(text: str | None) -> str:
    return (text or "").strip().split("\n", 1)[0].strip()


class MemoryAutoSchema(AutoSchema):
    def get_tags(self) -> list[str]:
        return [resource_tag(self.path)]

    def get_summary(self) -> str | None:
        key = f"{self.method} {self.path.removeprefix(API_PREFIX)}"
        if key in SUMMARIES:
            return SUMMARIES[key]
        handler = getattr(self.view, self.method.lower(), None)
        methods = [m for m in ("get", "post", "put", "patch", "delete") if hasattr(self.view, m)]
        own = _first_line(getattr(handler, "__doc__", None))
        if not own and len(methods) == 1:
            own = _first_line(type(self.view).__doc__)
        return own.rstrip(".") or None

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
        # A read refuses a query parameter it does not document (memory/api/query_check.py).
        if has_body or has_query or has_pattern or self.method == "GET":
            codes.append("400")
        if security and {} not in security:
            codes += ["401", "403"]
        if "{" in self.path:
            codes.append("404")
        if self.method in _UNSAFE_METHODS:
            codes += ["409", "503"]
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
