"""The reconciliation service's root (the 0.2 manifest, or the 1.0-draft one; the 0.2
match ``queries=`` and extension ``extend=``) and the 1.0-draft ``POST match``: reading
queries in either version's shape, answering candidates in it."""

from __future__ import annotations

import json
from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiTypes, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from memory.api.reconcile.extend import extend_meta, extend_request
from memory.api.reconcile.views import ReconcileView, json_object, type_ref
from memory.domain.access import ContextAccess
from memory.kernel.errors import ValidationFailed
from memory.models import ENTITY_TYPES
from memory.selectors.reconcile.extend import extend_rows
from memory.selectors.reconcile.match import (
    MAX_QUERIES,
    ReconcileCandidate,
    ReconcileQuery,
    query_build,
    reconcile_ids,
    reconcile_match,
)
from memory.selectors.reconcile.properties import IdentifierKinds

VERSIONS = ["0.2", "1.0-draft"]
PREVIEW_SIZE = {"width": 400, "height": 220}


def _param(request: Request, name: str) -> str | None:
    """A parameter from the query string or a form body (0.2 clients send either)."""
    value = request.query_params.get(name)
    if value is None and request.method == "POST":
        if not hasattr(request.data, "get"):
            raise ValidationFailed(
                "a POST here carries a form with queries= or extend=", code="invalid_body"
            )
        value = request.data.get(name)
        upload = request.FILES.get(name) if value is None else None
        if upload is not None:  # a multipart field sent as a file part
            try:
                value = upload.read().decode("utf-8")
            except UnicodeDecodeError:
                raise ValidationFailed(
                    f"{name} is not UTF-8 text", code=f"invalid_{name}"
                ) from None
    if value is not None and not isinstance(value, str):
        raise ValidationFailed(f"{name} is JSON text in a string", code=f"invalid_{name}")
    return value


def _json_param(text: str, name: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise ValidationFailed(f"{name} is not valid JSON", code=f"invalid_{name}") from None


def _limit(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise ValidationFailed("limit must be a whole number", code="invalid_limit")
    return int(value)


def _types(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    values = value if isinstance(value, list) else [value]
    if not all(isinstance(v, str) for v in values):
        raise ValidationFailed("type must be a type id or a list of them", code="invalid_type")
    return list(values)


def _values(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def query_v02(raw: Any, kinds: IdentifierKinds) -> ReconcileQuery:
    query = json_object(raw, "each query")
    name = query.get("query", "")
    if not isinstance(name, str):
        raise ValidationFailed("query must be a string", code="invalid_query")
    properties = query.get("properties") or []
    if not isinstance(properties, list):
        raise ValidationFailed("properties must be a list", code="invalid_query")
    pairs = []
    for item in properties:
        item = json_object(item, "each property")
        pid = item.get("pid")
        if not isinstance(pid, str) or "v" not in item:
            raise ValidationFailed("each property needs pid and v", code="invalid_property")
        pairs.append((pid, _values(item["v"])))
    return query_build(
        name=name,
        types=_types(query.get("type")),
        properties=pairs,
        limit=_limit(query.get("limit")),
        identifier_kinds=kinds,
    )


def query_v1(raw: Any, kinds: IdentifierKinds) -> tuple[ReconcileQuery | None, list[str]]:
    """A 1.0-draft query, or the entity ids its ``id`` conditions name."""
    query = json_object(raw, "each query")
    conditions = query.get("conditions")
    if not isinstance(conditions, list) or not conditions:
        raise ValidationFailed("each query needs a list of conditions", code="invalid_query")
    names: list[str] = []
    ids: list[str] = []
    pairs = []
    for condition in conditions:
        condition = json_object(condition, "each condition")
        match_type = condition.get("matchType")
        if "propertyValue" not in condition:
            raise ValidationFailed("each condition needs propertyValue", code="invalid_query")
        values = _values(condition["propertyValue"])
        if match_type == "name":
            names += [v for v in values if isinstance(v, str)]
        elif match_type == "id":
            ids += [str(v.get("id", "")) if isinstance(v, dict) else str(v) for v in values]
        elif match_type == "property":
            pid = condition.get("propertyId")
            if not isinstance(pid, str):
                raise ValidationFailed(
                    "a property condition needs propertyId", code="invalid_property"
                )
            pairs.append((pid, values))
        else:
            raise ValidationFailed("matchType must be name, id or property", code="invalid_query")
    if ids and not names and not pairs:
        return None, ids
    built = query_build(
        name=" ".join(names),
        types=_types(query.get("type")),
        properties=pairs,
        limit=_limit(query.get("limit")),
        identifier_kinds=kinds,
    )
    return built, []


def candidate_json(c: ReconcileCandidate, *, v1: bool) -> dict[str, Any]:
    return {
        "id": str(c.entity_id),
        "name": c.name,
        "description": c.description,
        "type": [type_ref(c.type)],
        "score": c.score,
        "match": c.match,
        "features": [
            {"id": f.id, "name": f"{f.id}: {f.level}", "value": f.weight} for f in c.features
        ]
        if v1 or c.features
        else [],
    }


# --- the root: manifest, 0.2 match and extension ------------------------------------------


class ReconcileRootApi(ReconcileView):
    @extend_schema(
        parameters=[
            OpenApiParameter("queries", OpenApiTypes.STR, description="0.2 query batch (JSON)"),
            OpenApiParameter("extend", OpenApiTypes.STR, description="0.2 extension (JSON)"),
            OpenApiParameter("version", OpenApiTypes.STR, enum=VERSIONS),
        ],
        responses={200: OpenApiTypes.OBJECT},
        description="The manifest (0.2 by default), or the 0.2 match (`queries=`) or data "
        "extension (`extend=`).",
    )
    def get(self, request: Request, ctx: str, key: str = "") -> Response:
        access = self.access(request, ctx)
        queries = _param(request, "queries")
        if queries is not None:
            return Response(self.match_v02(access, queries))
        extend = _param(request, "extend")
        if extend is not None:
            return Response(self.extend_v02(access, extend, request, ctx))
        version = request.query_params.get("version", "0.2")
        if version not in VERSIONS:
            raise ValidationFailed(
                f"version must be one of {', '.join(VERSIONS)}", code="invalid_version"
            )
        return Response(manifest(access, self.base_url(request, ctx), request, version))

    @extend_schema(
        request={
            media: {
                "type": "object",
                "properties": {"queries": {"type": "string"}, "extend": {"type": "string"}},
                "anyOf": [{"required": ["queries"]}, {"required": ["extend"]}],
            }
            for media in (
                "application/x-www-form-urlencoded",
                "multipart/form-data",
                "application/json",
            )
        },
        responses={200: OpenApiTypes.OBJECT},
        description="The 0.2 match (`queries=`) or data extension (`extend=`) as a form.",
    )
    def post(self, request: Request, ctx: str, key: str = "") -> Response:
        if _param(request, "queries") is None and _param(request, "extend") is None:
            raise ValidationFailed(
                "a POST here carries a form with queries= or extend=", code="invalid_body"
            )
        return self.get(request, ctx, key)

    def match_v02(self, access: ContextAccess, text: str) -> dict[str, Any]:
        batch = json_object(_json_param(text, "queries"), "queries")
        if len(batch) > MAX_QUERIES:
            raise ValidationFailed(
                f"at most {MAX_QUERIES} queries a batch", code="too_many_queries"
            )
        kinds = IdentifierKinds(access)
        built = {name: query_v02(query, kinds) for name, query in batch.items()}
        results = reconcile_match(access=access, queries=list(built.values()))
        return {
            name: {"result": [candidate_json(c, v1=False) for c in candidates]}
            for name, candidates in zip(built, results, strict=True)
        }

    def extend_v02(
        self, access: ContextAccess, text: str, request: Request, ctx: str
    ) -> dict[str, Any]:
        ids, columns = extend_request(access, _json_param(text, "extend"))
        rows = extend_rows(access=access, ids=ids, columns=columns)
        return {"meta": extend_meta(columns), "rows": rows}


def manifest(access: ContextAccess, base: str, request: Request, version: str) -> dict[str, Any]:
    slug = access.context.slug
    entity_page = request.build_absolute_uri(f"/c/{slug}/entities/")
    common: dict[str, Any] = {
        "versions": VERSIONS,
        "name": f"Memory Desk: {access.context.name}",
        "identifierSpace": entity_page,
        "schemaSpace": request.build_absolute_uri(f"/c/{slug}/registry/"),
        "documentation": request.build_absolute_uri("/api/docs/"),
        "defaultTypes": [type_ref(t) for t in ENTITY_TYPES],
        "view": {"url": entity_page + "{{id}}/"},
    }
    if version == "1.0-draft":
        return common | {
            "suggest": {"entity": True, "type": True, "property": True},
            "preview": PREVIEW_SIZE,
            "extend": {"proposeProperties": True, "propertySettings": []},
        }
    service = {"service_url": base}
    return common | {
        "preview": {"url": base + "/preview?id={{id}}", **PREVIEW_SIZE},
        "suggest": {
            "entity": service
            | {"service_path": "/suggest/entity", "flyout_service_path": "/preview?id=${id}"},
            "type": service | {"service_path": "/suggest/type"},
            "property": service | {"service_path": "/suggest/property"},
        },
        "extend": {
            "propose_properties": service | {"service_path": "/extend/propose"},
            "property_settings": [],
        },
    }


# --- 1.0-draft match ---------------------------------------------------------------------


class ReconcileMatchApi(ReconcileView):
    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses={200: OpenApiTypes.OBJECT},
        description="1.0-draft reconciliation: `{queries: [{type, limit, conditions}]}` → "
        "`{results: [{candidates}]}`.",
    )
    def post(self, request: Request, ctx: str, key: str = "") -> Response:
        access = self.access(request, ctx)
        body = json_object(request.data, "the body")
        queries = body.get("queries")
        if not isinstance(queries, list):
            raise ValidationFailed("the body needs a list of queries", code="invalid_query")
        if len(queries) > MAX_QUERIES:
            raise ValidationFailed(
                f"at most {MAX_QUERIES} queries a batch", code="too_many_queries"
            )
        kinds = IdentifierKinds(access)
        built = [query_v1(q, kinds) for q in queries]
        matched = iter(
            reconcile_match(access=access, queries=[q for q, _ in built if q is not None])
        )
        results = []
        for query, ids in built:
            candidates = next(matched) if query is not None else reconcile_ids(access, ids)
            results.append({"candidates": [candidate_json(c, v1=True) for c in candidates]})
        return Response({"results": results})
