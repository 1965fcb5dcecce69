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
    score = serializers.FloatField(
        help_text="facts: relevance to the query (with an entity alone, the ranking "
        "formula); passages: search score"
    )
    line = serializers.CharField(help_text="the line as it stands in `text`")
    explain = serializers.DictField(
        required=False,
        help_text="with `explain: true`: why the line is there. Facts: relevance, names "
        "(the named entities it mentions), through_neighbour, predicate {words, via, score}, "
        "answer {asked, given, fits}, bm25, cosine, prior (the ranking formula), why; "
        "passages: score, bm25, cosine, why",
    )


class MemoryBlockFactSerializer(MemoryBlockItemSerializer):
    subject = serializers.DictField()
    predicate = serializers.CharField()
    object = serializers.DictField(allow_null=True)
    value = serializers.JSONField(allow_null=True)
    kind = serializers.CharField()
    trust = serializers.ChoiceField(choices=["trusted", "pending"])
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


class MemoryBlockNothingTrustedSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    awaiting_review = serializers.IntegerField(
        help_text="its facts waiting for review that the caller may read (their claims are "
        "not told)"
    )


class MemoryBlockOutputSerializer(serializers.Serializer):
    context = serializers.CharField()  # type: ignore[assignment]
    query = serializers.CharField()
    entities = MemoryBlockEntitySerializer(many=True, help_text="the entities the block centres on")
    text = serializers.CharField(help_text="the block, ready for a prompt")
    facts = MemoryBlockFactSerializer(many=True, help_text="trusted facts only")
    unconfirmed = MemoryBlockFactSerializer(
        many=True,
        help_text="with include_pending: the pending facts, under their own heading in `text`",
    )
    nothing_trusted = MemoryBlockNothingTrustedSerializer(
        many=True,
        help_text="the entities the block centres on of which no trusted fact is known; "
        "`text` says so in one line each",
    )
    passages = MemoryBlockPassageSerializer(many=True)
    budget_tokens = serializers.IntegerField()
    used_tokens = serializers.IntegerField(help_text="estimated as characters / 4")
    left_out = serializers.IntegerField(
        help_text="candidates left out: unrelated to the query, or over the budget "
        "(`notes` says how many of each)"
    )
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
        explain = serializers.BooleanField(
            default=False, help_text="each line's data says why it is in the block"
        )
        include_pending = serializers.BooleanField(
            default=False,
            help_text="also the facts waiting for review, under their own heading (Unconfirmed)",
        )

    @extend_schema(
        request=InputSerializer,
        responses={200: MemoryBlockOutputSerializer, 400: ErrorSerializer, 404: ErrorSerializer},
        description="A prompt-ready memory block for `query` and/or `entity` (at least one). "
        "With a query: the facts of the entities it names (by name, alias or identifier, "
        "small slips forgiven; both directions), of their neighbours for a relation "
        "question (reached through a relation it asks about), and the facts the query "
        "finds, ordered by how well each answers it (the predicate's words, name, aliases "
        "and description against the query's words; the answer's type against "
        "who/where/which company; BM25 and cosine), the ranking formula breaking ties. "
        "Once the query names an entity, facts about others only where they answer through "
        "it (at one end of the fact, through its neighbour, or naming it), not for sharing "
        "a word; when nothing trusted is known about it, one line says so, with how many of "
        "its facts await review (`nothing_trusted`). With an entity alone: its current "
        "facts ranked by confidence × 0.5^(age/90 days) × ranking_weight × (0.3 + 1.4 × "
        "importance). Then the best passages. Lines that share nothing with the query are "
        "left out and counted in `left_out`; facts that answer go in before passages. "
        "Each line has its id, scope and source, within `budget_tokens` (estimated as "
        "characters / 4); `explain: true` adds why each line is there. "
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
            explain=v["explain"],
            include_pending=v["include_pending"],
        )
        return Response(MemoryBlockOutputSerializer(memory_context_data(block)).data)
