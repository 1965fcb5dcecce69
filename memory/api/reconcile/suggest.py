"""Suggest (entities, types, properties completing a prefix) and the preview card, as a
reconciling client asks for them while a person types and looks."""

from __future__ import annotations

import html
from typing import Any

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiTypes, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from memory.api.reconcile.views import ReconcileView, int_param
from memory.kernel.errors import NotFound, ValidationFailed
from memory.models import ENTITY_TYPES
from memory.selectors.reconcile.suggest import (
    MAX_SUGGEST,
    PreviewCard,
    preview_card,
    suggest_entities,
    suggest_properties,
    suggest_types,
)

SUGGEST_PARAMS = [
    OpenApiParameter("prefix", {"type": "string", "maxLength": 300}, required=True),
    OpenApiParameter("type", OpenApiTypes.STR),
    OpenApiParameter("limit", {"type": "integer", "minimum": 1, "maximum": MAX_SUGGEST}),
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
        found = suggest_entities(
            access=access,
            prefix=_prefix(request),
            type_=request.query_params.get("type") or None,
            limit=int_param(request, "limit", 10, MAX_SUGGEST),
        )
        return Response(
            {"result": [{"id": s.id, "name": s.name, "description": s.description} for s in found]}
        )


class ReconcileSuggestTypeApi(ReconcileView):
    @extend_schema(parameters=SUGGEST_PARAMS, responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, ctx: str, key: str = "") -> Response:
        self.access(request, ctx)
        found = suggest_types(
            prefix=_prefix(request), limit=int_param(request, "limit", 10, MAX_SUGGEST)
        )
        return Response({"result": [{"id": s.id, "name": s.name} for s in found]})


class ReconcileSuggestPropertyApi(ReconcileView):
    @extend_schema(parameters=SUGGEST_PARAMS, responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, ctx: str, key: str = "") -> Response:
        access = self.access(request, ctx)
        type_ = request.query_params.get("type") or None
        if type_ is not None and type_ not in ENTITY_TYPES:
            raise ValidationFailed(f"unknown type {type_[:40]!r}", code="invalid_type")
        found = suggest_properties(
            access=access,
            prefix=_prefix(request),
            type_=type_,
            limit=int_param(request, "limit", 10, MAX_SUGGEST),
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
        card = preview_card(access=access, entity_id=int(raw))
        if card is None:
            raise NotFound(f"entity {raw} not found", code="entity_not_found")
        response = HttpResponse(preview_html(card), content_type="text/html; charset=utf-8")
        # Shown in the client's iframe: its own page, nothing of ours runs in it.
        response["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'"
        return response


def preview_html(card: PreviewCard) -> str:
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
