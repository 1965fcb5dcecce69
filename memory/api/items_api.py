"""REST views for items: the batch endpoint (LangGraph's store ops) and the plain forms
for one item, a list, a search and the namespaces."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import (
    OpenApiParameter,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory.api.common import access_for
from memory.api.fields import JsonInput, PositiveFloatField
from memory.api.items_input import op_parse, ops_parse, put_parse
from memory.domain.namespaces import (
    MAX_KEY_CHARS,
    MAX_LABELS,
    Namespace,
    key_validate,
    namespace_validate,
)
from memory.kernel.errors import NotFound, ValidationFailed
from memory.models import Item
from memory.selectors.items import MAX_LIMIT, MAX_OFFSET, MAX_QUERY_CHARS, ItemHit
from memory.services.items.batch import GetOp, ListNamespacesOp, Result, SearchOp, items_batch
from memory.services.items.writes import MAX_TTL_MINUTES, ItemPut, items_write
from memory.web.throttling import AnonRateThrottle, UserRateThrottle


class ItemsRateThrottle(UserRateThrottle):
    """A store is called like a database, op by op: its own, larger budget per user
    (MEMORY_API_RATE_ITEMS), apart from the rest of the API's."""

    scope = "items"


class ItemsApi(APIView):
    throttle_classes = [AnonRateThrottle, ItemsRateThrottle]


class ItemSerializer(serializers.Serializer):
    namespace = serializers.ListField(child=serializers.CharField())
    key = serializers.CharField()
    value = serializers.DictField(help_text="the JSON object as it was written")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(
        allow_null=True, help_text="when the item expires unless read again (ttl), or null"
    )


class ItemHitSerializer(ItemSerializer):
    score = serializers.FloatField(
        allow_null=True,
        help_text="for a query, the cosine similarity of the item's vector and the query's "
        "(results are ranked by the hybrid fusion of BM25 and vector ranks); null without a "
        "query, for an item that is not indexed, or one stored without a vector",
    )


class ItemListSerializer(serializers.Serializer):
    results = ItemHitSerializer(many=True)


def item_data(item: Item) -> dict[str, Any]:
    return {
        "namespace": list(item.namespace),
        "key": item.key,
        "value": item.value,
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
        "expires_at": item.expires_at.isoformat() if item.expires_at else None,
    }


def hit_data(hit: ItemHit) -> dict[str, Any]:
    return {**item_data(hit.item), "score": hit.score}


def _result_data(result: Result) -> Any:
    if isinstance(result, Item):
        return item_data(result)
    if isinstance(result, list):
        return [
            hit_data(r) if isinstance(r, ItemHit) else list(r)  # type: ignore[arg-type]
            for r in result
        ]
    return None


@extend_schema_field(
    {
        "oneOf": [
            {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 20},
            {"type": "boolean", "enum": [False]},
        ],
        "nullable": True,
    }
)
class IndexField(serializers.JSONField):
    """JSON paths, or false; documented as such (the paths' grammar is checked after)."""


def _labels(**kwargs: Any) -> serializers.ListField:
    return serializers.ListField(
        child=serializers.CharField(min_length=1), max_length=MAX_LABELS, **kwargs
    )


def _key() -> serializers.CharField:
    return serializers.CharField(min_length=1, max_length=MAX_KEY_CHARS)


def _ttl() -> PositiveFloatField:
    return PositiveFloatField(
        required=False,
        allow_null=True,
        max_value=MAX_TTL_MINUTES,
        help_text="minutes until it expires unless read",
    )


def _page(name: str, low: int, high: int) -> serializers.IntegerField:
    return serializers.IntegerField(required=False, allow_null=True, min_value=low, max_value=high)


class GetOpSerializer(JsonInput):
    op = serializers.ChoiceField(choices=["get"])
    namespace = _labels(min_length=1)
    key = _key()
    refresh_ttl = serializers.BooleanField(required=False, allow_null=True)


class PutOpSerializer(JsonInput):
    op = serializers.ChoiceField(choices=["put"])
    namespace = _labels(min_length=1)
    key = _key()
    value = serializers.DictField(allow_null=True, help_text="a JSON object; null deletes")
    index = IndexField(
        required=False,
        help_text='JSON paths of the text to index (["text"], ["messages[*].content"], '
        '["$"] for the whole value: the default), or false: not indexed',
    )
    ttl = _ttl()
    extract = serializers.BooleanField(
        required=False,
        allow_null=True,
        help_text="send the indexed text through ingest as a turn (the chat model extracts "
        "facts); overwriting or deleting the item retracts them. Omitted or null: as the "
        "context's item_extract setting says (default false)",
    )


class ItemSearchInputSerializer(JsonInput):
    namespace_prefix = _labels(required=False)
    query = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, max_length=MAX_QUERY_CHARS
    )
    filter = serializers.DictField(
        required=False,
        allow_null=True,
        help_text='value fields: {"field": value} or {"field": {"$gt": 3}} with $eq $ne $gt '
        "$gte $lt $lte",
    )
    limit = _page("limit", 1, MAX_LIMIT)
    offset = _page("offset", 0, MAX_OFFSET)
    refresh_ttl = serializers.BooleanField(required=False, allow_null=True)


class SearchOpSerializer(ItemSearchInputSerializer):
    op = serializers.ChoiceField(choices=["search"])


class MatchConditionSerializer(JsonInput):
    match_type = serializers.ChoiceField(choices=["prefix", "suffix"])
    path = _labels(min_length=1, help_text="labels; * matches exactly one")


class ListNamespacesOpSerializer(JsonInput):
    op = serializers.ChoiceField(choices=["list_namespaces"])
    # A ListField, not many=True: the schema then says maxItems (the server's limit).
    match_conditions = serializers.ListField(
        child=MatchConditionSerializer(), required=False, allow_null=True, max_length=10
    )
    max_depth = _page("max_depth", 1, 100)
    limit = _page("limit", 1, MAX_LIMIT)
    offset = _page("offset", 0, MAX_OFFSET)


class ItemBatchApi(ItemsApi):
    class InputSerializer(JsonInput):
        ops = PolymorphicProxySerializer(
            component_name="ItemOp",
            serializers={
                "get": GetOpSerializer,
                "put": PutOpSerializer,
                "search": SearchOpSerializer,
                "list_namespaces": ListNamespacesOpSerializer,
            },
            resource_type_field_name="op",
            many=True,
        )

    class OutputSerializer(serializers.Serializer):
        results = serializers.ListField(
            child=serializers.JSONField(),
            help_text="one per op, in order: an item or null (get), null (put), a list of "
            "items with scores (search), a list of namespaces (list_namespaces)",
        )

    @extend_schema(
        request=InputSerializer,
        responses=OutputSerializer,
        summary="Run item operations (get, put, search, list_namespaces) in one request",
        description="LangGraph's store operations. Reads see the items as they were when "
        "the batch arrived; puts are applied after them in one transaction, the last put "
        "of an item winning. Every put needs a write grant on its namespace's scope and is "
        "checked before anything is written; items outside the read grants are not found.",
    )
    def post(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        ops = ops_parse(request.data)
        results = items_batch(access=access, ops=ops)
        return Response({"results": [_result_data(r) for r in results]})


def _namespace_param(request: Request, name: str, *, allow_empty: bool = False) -> Namespace:
    return namespace_validate(
        request.query_params.getlist(name), allow_empty=allow_empty, what=name
    )


def _one_param(request: Request, name: str) -> str:
    values = request.query_params.getlist(name)
    if len(values) != 1:
        raise ValidationFailed(f"give {name} once", code=f"invalid_{name}")
    return values[0]


_NAMESPACE_PARAM = OpenApiParameter(
    "namespace",
    {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
    required=True,
    explode=True,
    description="the namespace's labels in order (repeat the parameter: "
    "?namespace=users&namespace=alex)",
)
_KEY_PARAM = OpenApiParameter(
    "key",
    {"type": "string", "minLength": 1, "maxLength": MAX_KEY_CHARS},
    required=True,
    description="the item's key",
)


class ItemDetailApi(ItemsApi):
    class InputSerializer(JsonInput):
        value = serializers.DictField(help_text="the JSON object to keep")
        index = IndexField(required=False, help_text="as in a batch put")
        ttl = _ttl()
        extract = serializers.BooleanField(
            required=False, allow_null=True, help_text="as in a batch put"
        )

    @extend_schema(
        parameters=[
            _NAMESPACE_PARAM,
            _KEY_PARAM,
            OpenApiParameter("refresh_ttl", bool, description="default true"),
        ],
        responses=ItemSerializer,
        summary="Get one item",
    )
    def get(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        refresh = request.query_params.get("refresh_ttl", "true")
        if refresh not in ("true", "false"):
            raise ValidationFailed("refresh_ttl must be true or false", code="invalid")
        op = GetOp(
            namespace=_namespace_param(request, "namespace"),
            key=key_validate(_one_param(request, "key")),
            refresh_ttl=refresh == "true",
        )
        (item,) = items_batch(access=access, ops=[op])
        if not isinstance(item, Item):
            raise NotFound("no such item", code="item_not_found")
        return Response(item_data(item))

    @extend_schema(
        parameters=[_NAMESPACE_PARAM, _KEY_PARAM],
        request=InputSerializer,
        responses=ItemSerializer,
        summary="Put one item (create or replace)",
    )
    def put(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        body = request.data
        if not isinstance(body, dict) or set(body) - {"value", "index", "ttl", "extract"}:
            raise ValidationFailed("the body takes value, index, ttl and extract", code="invalid")
        if body.get("value") is None:
            raise ValidationFailed(
                "value must be a JSON object (DELETE removes an item)", code="invalid_value"
            )
        put = put_parse(
            {
                **body,
                "namespace": list(_namespace_param(request, "namespace")),
                "key": _one_param(request, "key"),
            }
        )
        items_write(access=access, puts=[put])
        # As written, even if its ttl is so short that it has expired already.
        item = Item.objects.get(context=access.context, namespace=list(put.namespace), key=put.key)
        return Response(item_data(item))

    @extend_schema(
        parameters=[_NAMESPACE_PARAM, _KEY_PARAM],
        responses={204: None},
        summary="Delete one item",
    )
    def delete(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        put = ItemPut(
            namespace=_namespace_param(request, "namespace"),
            key=key_validate(_one_param(request, "key")),
            value=None,
        )
        items_write(access=access, puts=[put])
        return Response(status=status.HTTP_204_NO_CONTENT)


class ItemListApi(ItemsApi):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "namespace",
                {"type": "array", "items": {"type": "string", "minLength": 1}},
                explode=True,
                description="a namespace prefix, label by label (none: every namespace)",
            ),
            OpenApiParameter(
                "filter",
                {"type": "string", "minLength": 1},
                description='a JSON filter, e.g. {"tag": "a"}',
            ),
            OpenApiParameter("limit", {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}),
            OpenApiParameter("offset", {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET}),
        ],
        responses=ItemListSerializer,
        summary="List items under a namespace prefix, newest first",
    )
    def get(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        raw: dict[str, Any] = {
            "op": "search",
            "namespace_prefix": request.query_params.getlist("namespace"),
            "refresh_ttl": False,
        }
        for name in ("limit", "offset"):
            if name in request.query_params:
                raw[name] = _int_param(request, name)
        if "filter" in request.query_params:
            raw["filter"] = _json_param(request, "filter")
        (hits,) = items_batch(access=access, ops=[op_parse(raw)])
        return Response({"results": _result_data(hits)})


class ItemSearchApi(ItemsApi):
    @extend_schema(
        request=ItemSearchInputSerializer,
        responses=ItemListSerializer,
        summary="Search items: hybrid ranking over their indexed text, filters, pages",
    )
    def post(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        body = request.data
        if not request.body:
            body = {}  # every field has a default: a search of everything, newest first
        if not isinstance(body, dict) or "op" in body:
            raise ValidationFailed(
                "the body must be an object of the search's fields", code="invalid"
            )
        op = op_parse({"op": "search", **body})
        assert isinstance(op, SearchOp)
        (hits,) = items_batch(access=access, ops=[op])
        return Response({"results": _result_data(hits)})


class ItemNamespacesApi(ItemsApi):
    class OutputSerializer(serializers.Serializer):
        results = serializers.ListField(child=serializers.ListField(child=serializers.CharField()))

    @extend_schema(
        parameters=[
            OpenApiParameter(
                name,
                {"type": "array", "items": {"type": "string", "minLength": 1}},
                explode=True,
                description=f"labels the namespace {'starts' if name == 'prefix' else 'ends'} "
                "with; * matches exactly one label",
            )
            for name in ("prefix", "suffix")
        ]
        + [
            OpenApiParameter("max_depth", {"type": "integer", "minimum": 1, "maximum": 100}),
            OpenApiParameter("limit", {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}),
            OpenApiParameter("offset", {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET}),
        ],
        responses=OutputSerializer,
        summary="List the namespaces that hold items",
    )
    def get(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        raw: dict[str, Any] = {"op": "list_namespaces", "match_conditions": []}
        for name in ("prefix", "suffix"):
            labels = request.query_params.getlist(name)
            if labels:
                raw["match_conditions"].append({"match_type": name, "path": labels})
        for name in ("max_depth", "limit", "offset"):
            if name in request.query_params:
                raw[name] = _int_param(request, name)
        op = op_parse(raw)
        assert isinstance(op, ListNamespacesOp)
        (namespaces,) = items_batch(access=access, ops=[op])
        return Response({"results": _result_data(namespaces)})


def _int_param(request: Request, name: str) -> int:
    try:
        return int(_one_param(request, name))
    except ValueError:
        raise ValidationFailed(f"{name} must be a whole number", code=f"invalid_{name}") from None


def _json_param(request: Request, name: str) -> Any:
    import json

    try:
        return json.loads(_one_param(request, name))
    except ValueError:
        raise ValidationFailed(f"{name} must be JSON", code=f"invalid_{name}") from None
