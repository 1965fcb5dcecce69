"""``POST context``: a prompt-ready memory block (the MCP ``get_context`` tool's twin)."""

from __future__ import annotations

import re

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory.api.common import ErrorSerializer, access_for
from memory.api.fields import NON_BLANK_TEXT_PATTERN, JsonInput, ScopeFilterField
from memory.selectors.entity_lookup import MAX_REF_CHARS
from memory.selectors.memory_context import (
    DEFAULT_BUDGET_TOKENS,
    MAX_BUDGET_TOKENS,
    MIN_BUDGET_TOKENS,
    memory_context,
    memory_context_data,
)
from memory.selectors.search import MAX_QUERY_CHARS, MODES

MAX_SCOPE_FILTERS = 50


@extend_schema_field(
    {
        "oneOf": [
            {"type": "integer", "minimum": 1},
            {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_REF_CHARS,
                "pattern": NON_BLANK_TEXT_PATTERN,
            },
        ],
        "description": "an entity id, or its name, an alias or an identifier",
    }
)
class EntityNameOrIdField(serializers.Field):
    default_error_messages = {"invalid": "give an entity id or a name"}

    def to_internal_value(self, data: object) -> int | str:
        if isinstance(data, bool) or not isinstance(data, int | str):
            self.fail("invalid")
        if isinstance(data, int) and data < 1:
            self.fail("invalid")
        if isinstance(data, str) and not (
            len(data) <= MAX_REF_CHARS and re.fullmatch(NON_BLANK_TEXT_PATTERN, data)
        ):
            self.fail("invalid")
        return data

    def to_representation(self, value: object) -> object:
        return value


class MemoryBlockEntitySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    type = serializers.CharField()
    scope = serializers.CharField()


class MemoryBlockItemSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["fact", "chunk", "turn"])
    id = serializers.IntegerField()
    scope = serializers.CharField()
    score = serializers.FloatField(help_text="facts: the ranking formula; passages: search score")
    line = serializers.CharField(help_text="the line as it stands in `text`")


class MemoryBlockFactSerializer(MemoryBlockItemSerializer):
    subject = serializers.DictField()
    predicate = serializers.CharField()
    object = serializers.DictField(allow_null=True)
    value = serializers.JSONField(allow_null=True)
    kind = serializers.CharField()
    confidence = serializers.FloatField()
    valid_from = serializers.DateTimeField(allow_null=True)
    source = serializers.DictField(  # type: ignore[assignment]
        help_text="{kind, ref, run, document, turn}"
    )


class MemoryBlockPassageSerializer(MemoryBlockItemSerializer):
    text = serializers.CharField()
    meta = serializers.DictField(
        help_text="chunks: document_id, document_title, ordinal; turns: speaker, said_at, "
        "thread, ref, run"
    )


class MemoryBlockOutputSerializer(serializers.Serializer):
    context = serializers.CharField()  # type: ignore[assignment]
    query = serializers.CharField()
    entities = MemoryBlockEntitySerializer(many=True, help_text="the entities the block centres on")
    text = serializers.CharField(help_text="the block, ready for a prompt")
    facts = MemoryBlockFactSerializer(many=True)
    passages = MemoryBlockPassageSerializer(many=True)
    budget_tokens = serializers.IntegerField()
    used_tokens = serializers.IntegerField(help_text="estimated as characters / 4")
    left_out = serializers.IntegerField(help_text="candidates that did not fit the budget")
    notes = serializers.ListField(child=serializers.CharField())


class MemoryBlockApi(APIView):
    class InputSerializer(JsonInput):
        query = serializers.CharField(
            required=False, allow_blank=True, default="", max_length=MAX_QUERY_CHARS
        )
        entity = EntityNameOrIdField(required=False, allow_null=True, default=None)
        budget_tokens = serializers.IntegerField(
            min_value=MIN_BUDGET_TOKENS, max_value=MAX_BUDGET_TOKENS, default=DEFAULT_BUDGET_TOKENS
        )
        scope = serializers.ListField(
            child=ScopeFilterField(), required=False, max_length=MAX_SCOPE_FILTERS
        )
        mode = serializers.ChoiceField(choices=list(MODES), default="hybrid")

    @extend_schema(
        request=InputSerializer,
        responses={200: MemoryBlockOutputSerializer, 400: ErrorSerializer, 404: ErrorSerializer},
        description="A prompt-ready memory block for `query` and/or `entity` (at least one): "
        "the best current facts of the entity (or of the entities the query finds) and of "
        "the facts the query finds, ranked by confidence × 0.5^(age/90 days) × "
        "ranking_weight × (0.3 + 1.4 × importance), then the best passages, each line with "
        "its id, scope and source, within `budget_tokens` (estimated as characters / 4). "
        "`text` is the block; `facts` and `passages` hold the same lines as data. `scope` "
        "narrows the read grants. With the embedding model down it falls back to BM25 and "
        "says so in `notes`. The MCP tool `get_context` answers the same.",
    )
    def post(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        block = memory_context(
            access=access,
            query=v["query"],
            entity=v["entity"],
            budget_tokens=v["budget_tokens"],
            scopes=v.get("scope"),
            mode=v["mode"],
        )
        return Response(MemoryBlockOutputSerializer(memory_context_data(block)).data)
