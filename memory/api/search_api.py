"""REST views for documents, keywords and search (routes in ``search_urls``)."""

from __future__ import annotations

from dataclasses import asdict

from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory.api.common import (
    ErrorSerializer,
    access_for,
    paginated,
    query_params,
    represented,
)
from memory.api.fields import (
    NON_BLANK_TEXT_PATTERN,
    NOT_ONLY_WHITESPACE_PATTERN,
    JsonInput,
    PatternField,
    ScopeField,
    ScopeFilterField,
)
from memory.api.pagination import StandardPagination
from memory.kernel.errors import ValidationFailed
from memory.kernel.scopes import MAX_SCOPE_LENGTH
from memory.models import Role
from memory.models.turn import MAX_THREAD_CHARS
from memory.selectors.documents import (
    KEYWORD_SORTS,
    MAX_KEYWORD_SEARCH_K,
    document_get,
    document_keywords,
    document_list,
    keyword_documents,
    keyword_get,
    keyword_list,
    keyword_search,
)
from memory.selectors.search import ALL_TARGET, MAX_QUERY_CHARS, MODES, TARGET_CHOICES, search
from memory.services.ingest.documents import (
    MAX_SOURCE_CHARS,
    document_create,
    document_delete,
    document_embed_now,
)

MAX_API_K = 100
MAX_MIN_DOCUMENT_COUNT = 1_000_000
MAX_SCOPE_FILTERS = 50


class DocumentBaseSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    scope = serializers.CharField()
    source = serializers.CharField()  # type: ignore[assignment]
    created_at = serializers.DateTimeField()


class DocumentOutputSerializer(DocumentBaseSerializer):
    chunk_count = serializers.IntegerField()


class ChunkOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    ordinal = serializers.IntegerField()
    text = serializers.CharField()
    token_count = serializers.IntegerField()


class DocumentDetailOutputSerializer(DocumentBaseSerializer):
    text = serializers.CharField()
    metadata = serializers.JSONField()
    chunks = ChunkOutputSerializer(many=True)
    chunk_count = serializers.SerializerMethodField()

    def get_chunk_count(self, document: object) -> int:
        return len(document.chunks.all())  # type: ignore[attr-defined]


class DocumentCreateOutputSerializer(DocumentDetailOutputSerializer):
    """The detail and what became of the vectors (the view adds the two fields)."""

    embeddings = serializers.ChoiceField(
        choices=["computed", "queued"],
        help_text="`computed`: the chunk and keyword vectors are in (`wait: true`); "
        "`queued`: the task worker computes them (meanwhile BM25 finds the document)",
    )
    warnings = serializers.ListField(child=serializers.CharField())


class KeywordOutputSerializer(serializers.Serializer):
    text = serializers.CharField()
    document_count = serializers.IntegerField(source="visible_count")


class DocumentListApi(APIView):
    pagination_class = StandardPagination

    class Params(serializers.Serializer):
        scope = serializers.CharField(
            required=False, allow_blank=True, max_length=MAX_SCOPE_LENGTH, help_text="exact scope"
        )

    class InputSerializer(JsonInput):
        title = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")
        text = serializers.CharField(trim_whitespace=False)
        scope = ScopeField()
        source = serializers.CharField(  # type: ignore[assignment]
            max_length=MAX_SOURCE_CHARS, required=False, allow_blank=True, default=""
        )
        metadata = serializers.DictField(required=False, default=dict)
        wait = serializers.BooleanField(required=False, default=False)

    @extend_schema(parameters=[Params], responses=DocumentOutputSerializer(many=True))
    def get(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        documents = document_list(
            access=access, scope=query_params(request, self.Params).get("scope")
        )
        return paginated(request, documents, DocumentOutputSerializer, self)

    @extend_schema(
        request=InputSerializer,
        responses={
            201: DocumentCreateOutputSerializer,
            202: DocumentCreateOutputSerializer,
            413: ErrorSerializer,
        },
        description="Store a document: chunks, BM25 postings and RAKE keywords in one "
        "transaction. Chunk and keyword vectors follow from the task worker, or before the "
        "response with `wait: true`. Needs a write grant on `scope`; text over "
        "MEMORY_MAX_TEXT_BYTES answers 413. With `wait: true` and the embedding model "
        "unavailable the document is still stored: 202 with `embeddings: queued` and the "
        "reason in `warnings` (the task worker computes the vectors later; do not send the "
        "document again).",
    )
    def post(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        wait = data.validated_data.pop("wait")
        document = document_create(access=access, **data.validated_data, embed_later=wait)
        problem = document_embed_now(document=document) if wait else ""
        document = document_get(access=access, document_id=document.pk)
        body = {
            **DocumentDetailOutputSerializer(document).data,  # the fields of the detail
            "embeddings": "computed" if wait and not problem else "queued",
            "warnings": [problem] if problem else [],
        }
        code = status.HTTP_202_ACCEPTED if problem else status.HTTP_201_CREATED
        response = Response(body, status=code)
        response["Location"] = reverse("api-document", args=[ctx, document.pk])
        return response


class DocumentDetailApi(APIView):
    @extend_schema(responses=DocumentDetailOutputSerializer)
    def get(self, request: Request, ctx: str, document_id: int) -> Response:
        access = access_for(request, ctx)
        document = document_get(access=access, document_id=document_id)
        return Response(DocumentDetailOutputSerializer(document).data)

    @extend_schema(
        responses={204: None},
        description="Delete a document with its chunks, postings and keyword links "
        "(curator role and a write grant on its scope).",
    )
    def delete(self, request: Request, ctx: str, document_id: int) -> Response:
        access = access_for(request, ctx)
        document = document_get(access=access, document_id=document_id)
        access.require_role(Role.CURATOR)
        document_delete(access=access, document=document)
        return Response(status=status.HTTP_204_NO_CONTENT)


class DocumentKeywordsApi(APIView):
    class OutputSerializer(serializers.Serializer):
        text = serializers.CharField()
        score = serializers.FloatField()
        document_count = serializers.IntegerField()

    @extend_schema(responses=OutputSerializer(many=True))
    def get(self, request: Request, ctx: str, document_id: int) -> Response:
        access = access_for(request, ctx)
        document = document_get(access=access, document_id=document_id)
        keywords = document_keywords(access=access, document=document)
        return Response(self.OutputSerializer([asdict(k) for k in keywords], many=True).data)


class KeywordListApi(APIView):
    pagination_class = StandardPagination

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "min_document_count",
                {"type": "integer", "minimum": 0, "maximum": MAX_MIN_DOCUMENT_COUNT},
                description="default 1",
            ),
            OpenApiParameter("sort", str, enum=list(KEYWORD_SORTS)),
        ],
        responses=KeywordOutputSerializer(many=True),
        description="Keywords linked to documents you can see; `document_count` counts "
        "only those documents.",
    )
    def get(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        keywords = keyword_list(
            access=access,
            min_document_count=_int_param(
                request, "min_document_count", 1, 0, MAX_MIN_DOCUMENT_COUNT
            ),
            sort=request.query_params.get("sort", "-document_count"),
        )
        return paginated(request, keywords, KeywordOutputSerializer, self)


class KeywordMatchSerializer(serializers.Serializer):
    text = serializers.CharField(source="keyword.text")
    document_count = serializers.IntegerField(source="keyword.visible_count")
    similarity = serializers.FloatField()


class KeywordSearchApi(APIView):
    class OutputSerializer(serializers.Serializer):
        results = KeywordMatchSerializer(many=True)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "q",
                {
                    "type": "string",
                    "maxLength": 500,
                    "pattern": NOT_ONLY_WHITESPACE_PATTERN,
                },
                required=True,
            ),
            OpenApiParameter(
                "k",
                {"type": "integer", "minimum": 1, "maximum": MAX_KEYWORD_SEARCH_K},
                description="default 10",
            ),
        ],
        responses={200: OutputSerializer, 503: ErrorSerializer},
        description="Keywords nearest to `q` by embedding (cosine similarity). 503 "
        "`embedder_unavailable` when the embedding model is unavailable.",
    )
    def get(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        matches = keyword_search(
            access=access,
            q=request.query_params.get("q", ""),
            k=_int_param(request, "k", 10, 1, MAX_KEYWORD_SEARCH_K),
        )
        return Response(self.OutputSerializer({"results": matches}).data)


class KeywordDocumentSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    scope = serializers.CharField()
    score = serializers.FloatField(source="keyword_score")


class KeywordDetailApi(APIView):
    class OutputSerializer(KeywordOutputSerializer):
        documents = KeywordDocumentSerializer(many=True)

    @extend_schema(responses=OutputSerializer)
    def get(self, request: Request, ctx: str, text: str) -> Response:
        access = access_for(request, ctx)
        keyword = keyword_get(access=access, text=text)
        documents = keyword_documents(access=access, keyword=keyword)[:100]
        body = {
            "text": keyword.text,
            "visible_count": keyword.visible_count,
            "documents": documents,
        }
        return Response(self.OutputSerializer(body).data)


class RankScoreSerializer(serializers.Serializer):
    rank = serializers.IntegerField()
    score = serializers.FloatField()


class ExplainSerializer(serializers.Serializer):
    bm25 = RankScoreSerializer(allow_null=True)
    vector = RankScoreSerializer(allow_null=True, help_text="score: cosine similarity")
    fused = serializers.FloatField(
        allow_null=True,
        help_text="reciprocal rank fusion; for turns, the normalized BM25 and cosine sum",
    )
    graph_boost = serializers.FloatField(allow_null=True)
    window_boost = serializers.FloatField(
        allow_null=True, help_text="turns: what the neighbouring turns of the conversation added"
    )


class SearchResultSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["chunk", "turn", "fact", "entity"])
    id = serializers.IntegerField()
    text = serializers.CharField()
    score = serializers.FloatField()
    scope = serializers.CharField()
    explain = ExplainSerializer()
    meta = serializers.DictField(
        help_text="per type: a chunk's document_id, document_title, ordinal; a turn's ref, "
        "thread, speaker, said_at and run; a fact's subject_id, predicate, object_id, "
        "status; an entity's entity_type"
    )


class SearchOutputSerializer(serializers.Serializer):
    results = SearchResultSerializer(many=True)
    took_ms = serializers.FloatField()


class SearchApi(APIView):
    class InputSerializer(JsonInput):
        query = serializers.CharField(max_length=MAX_QUERY_CHARS)
        mode = serializers.ChoiceField(choices=list(MODES), default="hybrid")
        k = serializers.IntegerField(min_value=1, max_value=MAX_API_K, default=10)
        scope = serializers.ListField(
            child=ScopeFilterField(),
            required=False,
            max_length=MAX_SCOPE_FILTERS,
        )
        target = serializers.ChoiceField(
            choices=list(TARGET_CHOICES),
            required=False,
            help_text="all (the default: turns, chunks and facts, each result typed), "
            "chunks, turns, facts or entities; with `thread` the default is turns",
        )
        graph_alpha = serializers.FloatField(min_value=0.0, max_value=1.0, default=0.3)
        thread = PatternField(
            NON_BLANK_TEXT_PATTERN,
            message="thread: some text other than whitespace",
            required=False,
            max_length=MAX_THREAD_CHARS,
            help_text="target turns only: the turns of this conversation",
        )
        include_pending = serializers.BooleanField(
            default=False,
            help_text="target facts: also the facts waiting for review (each result's "
            "meta.trust says which)",
        )

    @extend_schema(
        request=InputSerializer,
        responses={200: SearchOutputSerializer, 503: ErrorSerializer},
        description="Search what the memory holds: with no `target` (or `all`), turns, "
        "chunks and facts, fused by reciprocal rank, each result with its `type`; or one "
        "target: chunks, turns, facts or entities (`thread` narrows turns to one "
        "conversation; with another target it is refused). Modes: bm25, vector, hybrid "
        "(reciprocal rank fusion, k=60), hybrid_graph (hybrid plus a graph-density boost "
        "weighted by `graph_alpha`). `scope` narrows the caller's read grants with patterns "
        "(`P` or `P/*`). Each result's `explain` gives its BM25 and vector rank and score, "
        "the fused score and the graph boost. 503 when the embedding model is unavailable (bm25 "
        "mode still works).",
    )
    def post(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        params = data.validated_data
        response = search(
            access=access,
            query=params["query"],
            mode=params["mode"],
            k=params["k"],
            scopes=params.get("scope"),
            target=params.get("target") or ("turns" if params.get("thread") else ALL_TARGET),
            graph_alpha=params["graph_alpha"],
            thread=params.get("thread"),
            include_pending=params["include_pending"],
        )
        # Read from the dataclasses as they are: asdict's deep copy of every result and
        # its explanation was most of the answer's cost.
        return Response(represented(SearchOutputSerializer, response))


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValidationFailed(f"{name} must be an integer", code=f"invalid_{name}") from None
    if not low <= value <= high:
        raise ValidationFailed(f"{name} must be between {low} and {high}", code=f"invalid_{name}")
    return value
