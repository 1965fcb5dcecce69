"""Data extension (1.0-draft ``POST extend``; the 0.2 form goes through the root) and the
properties it proposes for a type (``GET extend/propose``)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiTypes, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from memory.api.reconcile.views import ReconcileView, int_param, json_object, type_ref
from memory.domain.access import ContextAccess
from memory.kernel.errors import ValidationFailed
from memory.models import ENTITY_TYPES
from memory.selectors.reconcile.extend import ExtendColumn, extend_columns, extend_rows
from memory.selectors.reconcile.suggest import properties_known


def extend_request(access: ContextAccess, raw: Any) -> tuple[list[str], list[ExtendColumn]]:
    body = json_object(raw, "the extension request")
    ids, properties = body.get("ids"), body.get("properties")
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise ValidationFailed("ids must be a list of entity ids", code="invalid_extend")
    if not isinstance(properties, list):
        raise ValidationFailed("properties must be a list", code="invalid_extend")
    pids = []
    for item in properties:
        item = json_object(item, "each property")
        if not isinstance(item.get("id"), str):
            raise ValidationFailed("each property needs an id", code="invalid_extend")
        pids.append(item["id"])
    return ids, extend_columns(access=access, pids=pids)


def extend_meta(columns: list[ExtendColumn]) -> list[dict[str, Any]]:
    meta = []
    for column in columns:
        entry: dict[str, Any] = {"id": column.ref.id, "name": column.name}
        if column.object_type:
            entry["type"] = type_ref(column.object_type)
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
        ids, columns = extend_request(access, request.data)
        rows = extend_rows(access=access, ids=ids, columns=columns)
        return Response(
            {
                "meta": extend_meta(columns),
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
        limit = int_param(request, "limit", 20, 200)
        known = properties_known(access=access, type_=type_, with_facts=True)[:limit]
        body: dict[str, Any] = {
            "properties": [{"id": s.id, "name": s.name} for s in known],
            "limit": limit,
        }
        if type_:
            body["type"] = type_
        return Response(body)
