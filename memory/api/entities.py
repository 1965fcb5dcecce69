from __future__ import annotations

from dataclasses import asdict
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory.api.common import access_for, paginated, query_params
from memory.api.facts import FactOutputSerializer
from memory.api.fields import JsonInput, PatternField, PredicateTextField, ScopeField
from memory.api.pagination import StandardPagination
from memory.api.parsers import JsonLinesParser, NdjsonParser, PlainTextParser
from memory.domain.entity_names import MAX_IDENTIFIER_LENGTH, MAX_NAME_LENGTH
from memory.kernel.errors import ValidationFailed
from memory.kernel.scopes import MAX_SCOPE_LENGTH
from memory.models import AuditEvent, Entity, EntityType
from memory.selectors.entities import entity_audit_events, entity_get, entity_list
from memory.selectors.facts import entity_facts_ranked, fact_history
from memory.services.entities.writes import entity_delete, entity_update, entity_upsert
from memory.services.transfer.seeding import entities_import

MAX_ATTRIBUTE_KEYS = 200


class IdentifierSerializer(JsonInput):
    # memory.domain.entity_names.identifier_normalize lowercases, then wants [a-z][a-z0-9_]*.
    kind = PatternField(
        r"^[A-Za-z][A-Za-z0-9_]*$",
        max_length=40,
        message="an identifier kind is letters, digits and _, starting with a letter",
    )
    value = serializers.CharField(max_length=MAX_IDENTIFIER_LENGTH)


class EntityOutputSerializer(serializers.ModelSerializer):
    identifiers = IdentifierSerializer(many=True, read_only=True)

    class Meta:
        model = Entity
        fields = [
            "id",
            "name",
            "type",
            "scope",
            "normalized_key",
            "aliases",
            "identifiers",
            "attributes",
            "seeded",
            "merged_into",
            "created_at",
            "updated_at",
        ]


@extend_schema_field({"type": "object", "maxProperties": MAX_ATTRIBUTE_KEYS})
class AttributesField(serializers.JSONField):
    """Free-form attributes: an object with at most ``MAX_ATTRIBUTE_KEYS`` keys."""

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        if not isinstance(value, dict) or len(value) > MAX_ATTRIBUTE_KEYS:
            raise serializers.ValidationError(f"an object with at most {MAX_ATTRIBUTE_KEYS} keys")
        return value


class EntityListApi(APIView):
    pagination_class = StandardPagination

    class Params(serializers.Serializer):
        q = serializers.CharField(
            required=False,
            allow_blank=True,
            max_length=MAX_NAME_LENGTH,
            help_text="name contains / key match",
        )
        type = serializers.ChoiceField(choices=EntityType.choices, required=False)
        scope = serializers.CharField(
            required=False, allow_blank=True, max_length=MAX_SCOPE_LENGTH, help_text="exact scope"
        )
        seeded = serializers.BooleanField(required=False)

    class InputSerializer(JsonInput):
        name = serializers.CharField(max_length=MAX_NAME_LENGTH)
        type = serializers.CharField(max_length=40, required=False, default=EntityType.OTHER)
        scope = ScopeField()
        aliases = serializers.ListField(
            child=serializers.CharField(max_length=MAX_NAME_LENGTH), max_length=100, required=False
        )
        identifiers = IdentifierSerializer(many=True, required=False)
        attributes = AttributesField(required=False)

    @extend_schema(parameters=[Params], responses=EntityOutputSerializer(many=True))
    def get(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        params = query_params(request, self.Params)
        entities = entity_list(
            access=access,
            q=params.get("q"),
            type=params.get("type"),
            scope=params.get("scope"),
            seeded=params.get("seeded"),
        ).prefetch_related("identifiers")
        return paginated(request, entities, EntityOutputSerializer, self)

    class OutputSerializer(EntityOutputSerializer):
        matched_by = serializers.ChoiceField(
            choices=["created", "identifier", "key", "alias"], source="upsert.matched_by"
        )
        warnings = serializers.ListField(child=serializers.CharField(), source="upsert.warnings")

        class Meta(EntityOutputSerializer.Meta):
            fields = [*EntityOutputSerializer.Meta.fields, "matched_by", "warnings"]

    @extend_schema(
        request=InputSerializer,
        responses={201: OutputSerializer, 200: OutputSerializer},
        description="Upsert by identifier, then normalized key, then alias: 201 when created, "
        "200 when an existing entity matched (it gains the new spelling as an alias).",
    )
    def post(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        result = entity_upsert(access=access, **data.validated_data)
        result.entity.upsert = result  # type: ignore[attr-defined]
        return Response(
            self.OutputSerializer(result.entity).data,
            status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK,
        )


class EntityBulkApi(APIView):
    parser_classes = [
        PlainTextParser,
        NdjsonParser,
        JsonLinesParser,
        MultiPartParser,
        FormParser,
        JSONParser,
    ]

    class OutputSerializer(serializers.Serializer):
        format = serializers.CharField()
        total = serializers.IntegerField()
        created = serializers.IntegerField()
        matched = serializers.IntegerField()
        failed = serializers.IntegerField()
        rows = serializers.ListField(child=serializers.DictField())
        notes = serializers.ListField(child=serializers.CharField())

    @extend_schema(
        request={
            "text/csv": {"type": "string", "minLength": 1},
            "application/x-ndjson": {"type": "string", "minLength": 1},
            "multipart/form-data": {
                "type": "object",
                "properties": {"file": {"type": "string", "format": "binary"}},
                "required": ["file"],
            },
        },
        parameters=[
            OpenApiParameter("format", str, enum=["csv", "jsonl"]),
            OpenApiParameter("scope", str, description="scope for rows that name none"),
        ],
        responses=OutputSerializer,
        description="Seed entities from CSV or JSONL (body, or a multipart `file`). Each row is "
        "upserted on its own; the report lists every row's outcome.",
    )
    def post(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        unknown = sorted(set(request.query_params) - {"format", "scope"})
        if unknown:
            # A typo (``?fromat=csv``) must not import with the wrong reading of the file.
            raise ValidationFailed(
                f"unknown query parameter(s): {', '.join(unknown)}; use format and scope",
                code="unknown_parameter",
            )
        content = _upload_content(request)
        fmt = request.query_params.get("format") or _format_from_type(request.content_type)
        report = entities_import(
            access=access,
            content=content,
            format=fmt,  # type: ignore[arg-type]
            scope_default=request.query_params.get("scope"),
        )
        return Response(self.OutputSerializer(asdict(report)).data)


def _upload_content(request: Request) -> bytes | str:
    upload = request.FILES.get("file") if hasattr(request, "FILES") else None
    if upload is not None:
        return upload.read()
    data = request.data
    if isinstance(data, (bytes, str)) and data:
        return data
    raise ValidationFailed(
        "send CSV or JSONL as the body (Content-Type text/csv or application/x-ndjson) "
        "or as a multipart 'file'",
        code="missing_file",
    )


def _format_from_type(content_type: str) -> str | None:
    if "csv" in content_type:
        return "csv"
    if "ndjson" in content_type or "jsonl" in content_type or "jsonlines" in content_type:
        return "jsonl"
    return None


class RankedFactSerializer(serializers.Serializer):
    score = serializers.FloatField()
    fact = FactOutputSerializer()


class EntityDetailApi(APIView):
    class InputSerializer(JsonInput):
        name = serializers.CharField(max_length=MAX_NAME_LENGTH, required=False)
        type = serializers.CharField(max_length=40, required=False)
        aliases = serializers.ListField(
            child=serializers.CharField(max_length=MAX_NAME_LENGTH), max_length=100, required=False
        )
        attributes = AttributesField(required=False)
        identifiers_add = IdentifierSerializer(many=True, required=False)

    class OutputSerializer(EntityOutputSerializer):
        facts = RankedFactSerializer(many=True, source="ranked_facts", read_only=True)

        class Meta(EntityOutputSerializer.Meta):
            fields = [*EntityOutputSerializer.Meta.fields, "facts"]

    @extend_schema(
        responses=OutputSerializer,
        description="The entity with its current facts, best ranked first (at most 50).",
    )
    def get(self, request: Request, ctx: str, entity_id: int) -> Response:
        access = access_for(request, ctx)
        entity = entity_get(access=access, entity_id=entity_id)
        ranked = entity_facts_ranked(access=access, entity=entity, limit=50)
        entity.ranked_facts = ranked  # type: ignore[attr-defined]
        return Response(self.OutputSerializer(entity).data)

    @extend_schema(request=InputSerializer, responses=EntityOutputSerializer)
    def patch(self, request: Request, ctx: str, entity_id: int) -> Response:
        access = access_for(request, ctx)
        entity = entity_get(access=access, entity_id=entity_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        entity = entity_update(access=access, entity=entity, **data.validated_data)
        return Response(EntityOutputSerializer(entity_get(access=access, entity_id=entity.pk)).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, ctx: str, entity_id: int) -> Response:
        access = access_for(request, ctx)
        entity = entity_get(access=access, entity_id=entity_id)
        entity_delete(access=access, entity=entity)
        return Response(status=status.HTTP_204_NO_CONTENT)


class AuditEventOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditEvent
        fields = [
            "id",
            "actor_label",
            "action",
            "target_type",
            "target_id",
            "summary",
            "before",
            "after",
            "created_at",
            "undone_at",
        ]


class EntityHistoryApi(APIView):
    class Params(serializers.Serializer):
        predicate = PredicateTextField(required=False)

    class OutputSerializer(serializers.Serializer):
        entity = EntityOutputSerializer()
        facts = FactOutputSerializer(many=True)
        events = AuditEventOutputSerializer(many=True)

    @extend_schema(
        parameters=[Params],
        responses=OutputSerializer,
        description="Every fact about the entity oldest first (superseded, contested and "
        "retracted included, with `supersedes` links) and the curation events on it.",
    )
    def get(self, request: Request, ctx: str, entity_id: int) -> Response:
        access = access_for(request, ctx)
        entity = entity_get(access=access, entity_id=entity_id)
        predicate = query_params(request, self.Params).get("predicate")
        facts = fact_history(access=access, subject=entity, predicate=predicate)
        events = entity_audit_events(access=access, entity=entity)[:200]
        return Response(
            self.OutputSerializer({"entity": entity, "facts": facts, "events": events}).data
        )
