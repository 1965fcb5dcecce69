"""The W3C Entity Reconciliation API (0.2 and 1.0-draft) over one context.

``/api/v1/contexts/{ctx}/reconcile`` answers with the API token header (or a dashboard
session); ``/api/v1/contexts/{ctx}/reconcile/k/{key}`` with a read-only key in the path,
for clients that cannot send headers (OpenRefine). Below either root:

- ``GET`` the root: the 0.2 manifest, listing both versions (``?version=1.0-draft``: the
  1.0-draft manifest; the two disagree on how suggest services are described);
  ``queries=`` (GET or a form POST) the 0.2 match, ``extend=`` the 0.2 data extension;
- ``POST match`` and ``POST extend`` (JSON): the 1.0-draft match and extension;
- ``GET suggest/entity|type|property?prefix=``, ``GET preview?id=``,
  ``GET extend/propose?type=``.

Every answer carries CORS headers for any origin (no cookies are honoured cross-site:
the header or the key is the credential). See docs/decisions/0085 and 0086.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any

from django.http import HttpResponse
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, OpenApiTypes, extend_schema
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle, SimpleRateThrottle
from rest_framework.views import APIView

from memory.api.common import access_for
from memory.domain.access import ContextAccess
from memory.kernel.errors import NotFound, ValidationFailed
from memory.kernel.scopes import Grants
from memory.models import ENTITY_TYPES, ApiToken, Role, TokenPurpose
from memory.selectors import reconcile as rc
from memory.services.tokens import token_authenticate

VERSIONS = ["0.2", "1.0-draft"]
PREVIEW_SIZE = {"width": 400, "height": 220}
CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
    "Access-Control-Allow-Headers": "Authorization, Content-Type",
    "Access-Control-Max-Age": "86400",
}


class ReconcileKeyThrottle(SimpleRateThrottle):
    """Requests through one reconciliation key (OpenRefine sends a batch of 10 rows a
    request: the anonymous rate would stall it)."""

    scope = "reconcile_key"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        key = view.kwargs.get("key")
        return f"throttle_reconcile_{ApiToken.digest_of(key)[:32]}" if key else None


class ReconcileView(APIView):
    """Shared: who is asking (header or key), CORS, the service's URLs."""

    parser_classes = [JSONParser, FormParser, MultiPartParser]

    def get_authenticators(self) -> list[Any]:
        if self.kwargs.get("key"):
            return []  # the key in the path is the credential, and the only one
        return super().get_authenticators()

    def get_permissions(self) -> Sequence[Any]:
        if self.kwargs.get("key") or self.request.method == "OPTIONS":
            return [AllowAny()]  # a CORS preflight carries no credentials
        return super().get_permissions()

    def get_throttles(self) -> list[BaseThrottle]:
        if self.kwargs.get("key"):
            return [ReconcileKeyThrottle()]
        return super().get_throttles()

    def options(self, request: Any, *args: Any, **kwargs: Any) -> Response:
        return Response(status=204)

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)
        for name, value in CORS_HEADERS.items():
            response[name] = value
        return response

    def access(self, request: Request, ctx: str) -> ContextAccess:
        key = self.kwargs.get("key")
        if not key:
            return access_for(request, ctx)
        return reconcile_key_access(ctx, key)

    def base_url(self, request: Request, ctx: str) -> str:
        key = self.kwargs.get("key")
        if key:
            path = reverse("api-reconcile-key", kwargs={"ctx": ctx, "key": key})
        else:
            path = reverse("api-reconcile", kwargs={"ctx": ctx})
        return request.build_absolute_uri(path)


def reconcile_key_access(ctx: str, key: str) -> ContextAccess:
    """The read-only access a reconciliation key grants (404 for any key that is not a
    live one of this context: a wrong key tells nothing)."""
    token = token_authenticate(key, purpose=TokenPurpose.RECONCILE, context_slug=ctx)
    if token is None:
        raise NotFound(f"context {ctx[:100]!r} not found", code="context_not_found")
    read_only = [g for g in Grants.from_strings(token.grants).items if g.access == "read"]
    return ContextAccess(
        context=token.context, user=token.user, role=Role.VIEWER, grants=Grants(tuple(read_only))
    )


# --- reading requests ---------------------------------------------------------------------


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


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValidationFailed(f"{what} must be a JSON object", code="invalid_query")
    return value


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


def query_v02(raw: Any, kinds: rc.IdentifierKinds) -> rc.ReconcileQuery:
    query = _object(raw, "each query")
    name = query.get("query", "")
    if not isinstance(name, str):
        raise ValidationFailed("query must be a string", code="invalid_query")
    properties = query.get("properties") or []
    if not isinstance(properties, list):
        raise ValidationFailed("properties must be a list", code="invalid_query")
    pairs = []
    for item in properties:
        item = _object(item, "each property")
        pid = item.get("pid")
        if not isinstance(pid, str) or "v" not in item:
            raise ValidationFailed("each property needs pid and v", code="invalid_property")
        pairs.append((pid, _values(item["v"])))
    return rc.query_build(
        name=name,
        types=_types(query.get("type")),
        properties=pairs,
        limit=_limit(query.get("limit")),
        identifier_kinds=kinds,
    )


def query_v1(raw: Any, kinds: rc.IdentifierKinds) -> tuple[rc.ReconcileQuery | None, list[str]]:
    """A 1.0-draft query, or the entity ids its ``id`` conditions name."""
    query = _object(raw, "each query")
    conditions = query.get("conditions")
    if not isinstance(conditions, list) or not conditions:
        raise ValidationFailed("each query needs a list of conditions", code="invalid_query")
    names: list[str] = []
    ids: list[str] = []
    pairs = []
    for condition in conditions:
        condition = _object(condition, "each condition")
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
    built = rc.query_build(
        name=" ".join(names),
        types=_types(query.get("type")),
        properties=pairs,
        limit=_limit(query.get("limit")),
        identifier_kinds=kinds,
    )
    return built, []


def _type_ref(type_: str) -> dict[str, str]:
    return {"id": type_, "name": type_}


def candidate_json(c: rc.ReconcileCandidate, *, v1: bool) -> dict[str, Any]:
    return {
        "id": str(c.entity_id),
        "name": c.name,
        "description": c.description,
        "type": [_type_ref(c.type)],
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
        batch = _object(_json_param(text, "queries"), "queries")
        if len(batch) > rc.MAX_QUERIES:
            raise ValidationFailed(
                f"at most {rc.MAX_QUERIES} queries a batch", code="too_many_queries"
            )
        kinds = rc.IdentifierKinds(access)
        built = {name: query_v02(query, kinds) for name, query in batch.items()}
        results = rc.reconcile_match(access=access, queries=list(built.values()))
        return {
            name: {"result": [candidate_json(c, v1=False) for c in candidates]}
            for name, candidates in zip(built, results, strict=True)
        }

    def extend_v02(
        self, access: ContextAccess, text: str, request: Request, ctx: str
    ) -> dict[str, Any]:
        ids, columns = _extend_request(access, _json_param(text, "extend"))
        rows = rc.extend_rows(access=access, ids=ids, columns=columns)
        return {"meta": _extend_meta(columns), "rows": rows}


def manifest(access: ContextAccess, base: str, request: Request, version: str) -> dict[str, Any]:
    slug = access.context.slug
    entity_page = request.build_absolute_uri(f"/c/{slug}/entities/")
    common: dict[str, Any] = {
        "versions": VERSIONS,
        "name": f"Memory Desk: {access.context.name}",
        "identifierSpace": entity_page,
        "schemaSpace": request.build_absolute_uri(f"/c/{slug}/registry/"),
        "documentation": request.build_absolute_uri("/api/docs/"),
        "defaultTypes": [_type_ref(t) for t in ENTITY_TYPES],
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


# --- 1.0-draft match and extension --------------------------------------------------------


class ReconcileMatchApi(ReconcileView):
    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses={200: OpenApiTypes.OBJECT},
        description="1.0-draft reconciliation: `{queries: [{type, limit, conditions}]}` → "
        "`{results: [{candidates}]}`.",
    )
    def post(self, request: Request, ctx: str, key: str = "") -> Response:
        access = self.access(request, ctx)
        body = _object(request.data, "the body")
        queries = body.get("queries")
        if not isinstance(queries, list):
            raise ValidationFailed("the body needs a list of queries", code="invalid_query")
        if len(queries) > rc.MAX_QUERIES:
            raise ValidationFailed(
                f"at most {rc.MAX_QUERIES} queries a batch", code="too_many_queries"
            )
        kinds = rc.IdentifierKinds(access)
        built = [query_v1(q, kinds) for q in queries]
        matched = iter(
            rc.reconcile_match(access=access, queries=[q for q, _ in built if q is not None])
        )
        results = []
        for query, ids in built:
            candidates = next(matched) if query is not None else rc.reconcile_ids(access, ids)
            results.append({"candidates": [candidate_json(c, v1=True) for c in candidates]})
        return Response({"results": results})


def _extend_request(access: ContextAccess, raw: Any) -> tuple[list[str], list[rc.ExtendColumn]]:
    body = _object(raw, "the extension request")
    ids, properties = body.get("ids"), body.get("properties")
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise ValidationFailed("ids must be a list of entity ids", code="invalid_extend")
    if not isinstance(properties, list):
        raise ValidationFailed("properties must be a list", code="invalid_extend")
    pids = []
    for item in properties:
        item = _object(item, "each property")
        if not isinstance(item.get("id"), str):
            raise ValidationFailed("each property needs an id", code="invalid_extend")
        pids.append(item["id"])
    return ids, rc.extend_columns(access=access, pids=pids)


def _extend_meta(columns: list[rc.ExtendColumn]) -> list[dict[str, Any]]:
    meta = []
    for column in columns:
        entry: dict[str, Any] = {"id": column.ref.id, "name": column.name}
        if column.object_type:
            entry["type"] = _type_ref(column.object_type)
        meta.append(entry)
    return meta


class ReconcileExtendApi(ReconcileView):
    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses={200: OpenApiTypes.OBJECT},
        description="1.0-draft data extension: `{ids, properties: [{id}]}` → `{meta, rows}`.",
    )
    def post(self, request: Request, ctx: str, key: str = "") -> Response:
        access = self.access(request, ctx)
        ids, columns = _extend_request(access, request.data)
        rows = rc.extend_rows(access=access, ids=ids, columns=columns)
        return Response(
            {
                "meta": _extend_meta(columns),
                "rows": [
                    {
                        "id": i,
                        "properties": [
                            {"id": pid, "values": values} for pid, values in rows[i].items()
                        ],
                    }
                    for i in ids
                ],
            }
        )


class ReconcileProposeApi(ReconcileView):
    @extend_schema(
        parameters=[
            OpenApiParameter("type", OpenApiTypes.STR, enum=list(ENTITY_TYPES)),
            OpenApiParameter("limit", {"type": "integer", "minimum": 1, "maximum": 200}),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, ctx: str, key: str = "") -> Response:
        access = self.access(request, ctx)
        type_ = request.query_params.get("type") or None
        if type_ is not None and type_ not in ENTITY_TYPES:
            raise ValidationFailed(f"unknown type {type_[:40]!r}", code="invalid_type")
        limit = _int_param(request, "limit", 20, 200)
        known = rc.properties_known(access=access, type_=type_, with_facts=True)[:limit]
        body: dict[str, Any] = {
            "properties": [{"id": s.id, "name": s.name} for s in known],
            "limit": limit,
        }
        if type_:
            body["type"] = type_
        return Response(body)


def _int_param(request: Request, name: str, default: int, most: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= most:
        raise ValidationFailed(f"{name} must be 1–{most}", code=f"invalid_{name}")
    return int(raw)


# --- suggest and preview ------------------------------------------------------------------

SUGGEST_PARAMS = [
    OpenApiParameter("prefix", {"type": "string", "maxLength": 300}, required=True),
    OpenApiParameter("type", OpenApiTypes.STR),
    OpenApiParameter("limit", {"type": "integer", "minimum": 1, "maximum": rc.MAX_SUGGEST}),
]


def _prefix(request: Request) -> str:
    prefix = request.query_params.get("prefix")
    if prefix is None:
        raise ValidationFailed("prefix is required", code="missing_prefix")
    if len(prefix) > 300:
        raise ValidationFailed("prefix: at most 300 characters", code="invalid_prefix")
    return prefix


class ReconcileSuggestEntityApi(ReconcileView):
    @extend_schema(parameters=SUGGEST_PARAMS, responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, ctx: str, key: str = "") -> Response:
        access = self.access(request, ctx)
        found = rc.suggest_entities(
            access=access,
            prefix=_prefix(request),
            type_=request.query_params.get("type") or None,
            limit=_int_param(request, "limit", 10, rc.MAX_SUGGEST),
        )
        return Response(
            {"result": [{"id": s.id, "name": s.name, "description": s.description} for s in found]}
        )


class ReconcileSuggestTypeApi(ReconcileView):
    @extend_schema(parameters=SUGGEST_PARAMS, responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, ctx: str, key: str = "") -> Response:
        self.access(request, ctx)
        found = rc.suggest_types(
            prefix=_prefix(request), limit=_int_param(request, "limit", 10, rc.MAX_SUGGEST)
        )
        return Response({"result": [{"id": s.id, "name": s.name} for s in found]})


class ReconcileSuggestPropertyApi(ReconcileView):
    @extend_schema(parameters=SUGGEST_PARAMS, responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, ctx: str, key: str = "") -> Response:
        access = self.access(request, ctx)
        type_ = request.query_params.get("type") or None
        if type_ is not None and type_ not in ENTITY_TYPES:
            raise ValidationFailed(f"unknown type {type_[:40]!r}", code="invalid_type")
        found = rc.suggest_properties(
            access=access,
            prefix=_prefix(request),
            type_=type_,
            limit=_int_param(request, "limit", 10, rc.MAX_SUGGEST),
        )
        return Response(
            {"result": [{"id": s.id, "name": s.name, "description": s.description} for s in found]}
        )


class ReconcilePreviewApi(ReconcileView):
    @extend_schema(
        parameters=[
            OpenApiParameter("id", OpenApiTypes.STR, required=True, pattern=r"^[0-9]{1,18}$")
        ],
        responses={(200, "text/html"): OpenApiTypes.STR},
        description="A small HTML card of the entity (name, type, aliases, best facts).",
    )
    def get(self, request: Request, ctx: str, key: str = "") -> Any:
        access = self.access(request, ctx)
        raw = request.query_params.get("id", "")
        if not raw.isdigit() or len(raw) > 18:
            raise ValidationFailed("id must be an entity id", code="invalid_id")
        card = rc.preview_card(access=access, entity_id=int(raw))
        if card is None:
            raise NotFound(f"entity {raw} not found", code="entity_not_found")
        response = HttpResponse(preview_html(card), content_type="text/html; charset=utf-8")
        # Shown in the client's iframe: its own page, nothing of ours runs in it.
        response["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'"
        return response


def preview_html(card: rc.PreviewCard) -> str:
    e = card.entity
    esc = html.escape
    aliases = ", ".join(esc(a) for a in e.aliases[:8])
    facts = "".join(f"<li><span class=p>{esc(p)}</span> {esc(v[:200])}</li>" for p, v in card.facts)
    return (
        "<!doctype html><html><head><meta charset=utf-8><title>"
        f"{esc(e.name)}</title><style>"
        "body{font:13px/1.4 system-ui,sans-serif;margin:8px;color:#222}"
        "h1{font-size:15px;margin:0 0 2px}.t{color:#666}.p{color:#555;font-style:italic}"
        "ul{padding-left:16px;margin:6px 0}</style></head><body>"
        f"<h1>{esc(e.name)}</h1><div class=t>{esc(e.type)} · {esc(e.scope)} · #{e.pk}</div>"
        + (f"<div>Also: {aliases}</div>" if aliases else "")
        + (f"<ul>{facts}</ul>" if facts else "<p class=t>No current facts.</p>")
        + "</body></html>"
    )
