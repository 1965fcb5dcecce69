from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory.api.common import EntityRefSerializer, access_for, paginated, query_params
from memory.api.fields import (
    NON_BLANK_TEXT_PATTERN,
    SCOPE_PATTERN,
    JsonInput,
    PredicateTextField,
    ScopeField,
)
from memory.api.pagination import StandardPagination
from memory.domain.access import ContextAccess
from memory.domain.constraints import CONSTRAINT_STATUSES, CONSTRAINT_TYPES
from memory.domain.entity_names import MAX_NAME_LENGTH
from memory.kernel.scopes import MAX_SCOPE_LENGTH
from memory.models import Fact, FactKind, FactStatus
from memory.selectors.constraints import violation_as_dict
from memory.selectors.entity_lookup import MAX_REF_CHARS, resolve_entity_name
from memory.selectors.facts import fact_get, fact_list
from memory.services.facts.retraction import fact_retract
from memory.services.facts.review import FactReviewed, fact_review, facts_review
from memory.services.facts.write import fact_write_with_entities


class FactSourceSerializer(serializers.Serializer):
    kind = serializers.CharField(source="source_kind")
    ref = serializers.CharField(source="source_ref")
    run = serializers.IntegerField(source="run_id", allow_null=True)
    document = serializers.IntegerField(source="document_id", allow_null=True)


class FactOutputSerializer(serializers.ModelSerializer):
    subject = EntityRefSerializer()
    object = EntityRefSerializer(allow_null=True)
    predicate = serializers.CharField(source="predicate.name")
    source = FactSourceSerializer(source="*")  # type: ignore[assignment]
    status = serializers.SerializerMethodField(
        help_text="with `as_of`, the status the fact had then (current); otherwise its status"
    )
    read_through_inverse = serializers.SerializerMethodField(
        help_text="the inverse alias this fact was read through (subject and object as "
        "stored, the query's ends swapped), or null"
    )

    class Meta:
        model = Fact
        fields = [
            "id",
            "subject",
            "predicate",
            "raw_predicate",
            "kind",
            "object",
            "value",
            "confidence",
            "importance",
            "valid_from",
            "valid_until",
            "recorded_at",
            "last_seen_at",
            "observed_count",
            "status",
            "supersedes",
            "scope",
            "source",
            "read_through_inverse",
            "trust",
            "trust_reason",
        ]

    @extend_schema_field(serializers.ChoiceField(choices=FactStatus.choices))
    def get_status(self, fact: Fact) -> str:
        return str(getattr(fact, "status_then", None) or fact.status)

    @extend_schema_field({"type": "string", "nullable": True})
    def get_read_through_inverse(self, fact: Fact) -> str | None:
        return getattr(fact, "read_through_inverse", None) or None


@extend_schema_field(
    {
        "oneOf": [
            {"type": "integer", "minimum": 1},
            {
                "type": "object",
                "properties": {
                    "name": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": MAX_NAME_LENGTH,
                        "pattern": NON_BLANK_TEXT_PATTERN,
                    },
                    "type": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 40,
                        "pattern": NON_BLANK_TEXT_PATTERN,
                    },
                    "scope": {
                        "type": "string",
                        "maxLength": MAX_SCOPE_LENGTH,
                        "pattern": SCOPE_PATTERN,
                    },
                },
                "required": ["name"],
                "additionalProperties": False,  # a JsonInput: unknown fields are refused
            },
        ]
    }
)
class EntityRefField(serializers.Field):
    """An entity by id (``42``) or by description (``{"name": "Acme", "type": "organisation"}``)."""

    default_error_messages = {
        "invalid": "give an entity id or an object with name (and type, scope)",
    }

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, bool):
            self.fail("invalid")
        if isinstance(data, int):
            return data
        if isinstance(data, dict):
            ref = _EntityDescriptionSerializer(data=data)
            ref.is_valid(raise_exception=True)
            return dict(ref.validated_data)
        self.fail("invalid")

    def to_representation(self, value: Any) -> Any:
        return value


class _EntityDescriptionSerializer(JsonInput):
    # EntityRefField's schema states these fields for the OpenAPI document.
    name = serializers.CharField(max_length=MAX_NAME_LENGTH)
    type = serializers.CharField(
        max_length=40,
        required=False,
        help_text="without one, the entity bearing exactly this name whatever its type, "
        "else a new entity of type other",
    )
    scope = ScopeField(required=False)


ENTITY_PARAM_HELP = (
    "an entity id, or its name, an alias or an identifier (a name typed exactly beats one "
    "that matches only in normalized form, then the caller's scope, then the oldest)"
)


class EntityParamField(serializers.CharField):
    """A query parameter naming an entity: digits are its id, anything else a name."""

    def to_internal_value(self, data: Any) -> int | str:  # type: ignore[override]
        text: str = super().to_internal_value(data)
        if len(text) > MAX_REF_CHARS:
            raise serializers.ValidationError(f"at most {MAX_REF_CHARS} characters")
        if text.isascii() and text.isdigit():
            return int(text)  # no such id (0 included) answers 404 entity_not_found
        return text


class ConstraintViolationSerializer(serializers.Serializer):
    """A row of the constraint report (and a write's warning)."""

    predicate = serializers.CharField()
    constraint = serializers.ChoiceField(choices=CONSTRAINT_TYPES)
    status = serializers.ChoiceField(choices=CONSTRAINT_STATUSES)
    entity = EntityRefSerializer()
    other_entity = EntityRefSerializer(
        allow_null=True, help_text="distinct_values: the other subject sharing the value"
    )
    fact_ids = serializers.ListField(child=serializers.IntegerField())
    message = serializers.CharField()


class FactListApi(APIView):
    pagination_class = StandardPagination

    class Params(serializers.Serializer):
        subject = EntityParamField(required=False, help_text=ENTITY_PARAM_HELP)
        object = EntityParamField(required=False, help_text=ENTITY_PARAM_HELP)
        predicate = PredicateTextField(required=False, help_text="any form: worksAt finds works_at")
        kind = serializers.ChoiceField(choices=FactKind.choices, required=False)
        scope = serializers.CharField(required=False, max_length=300, help_text="exact scope")
        as_of = serializers.DateTimeField(
            required=False, help_text="what was current then: recorded by then and valid then"
        )
        valid_at = serializers.DateTimeField(
            required=False,
            help_text="what held at that time, whenever it was recorded (its history included)",
        )
        include_superseded = serializers.BooleanField(required=False, default=False)
        include_pending = serializers.BooleanField(
            required=False, default=False, help_text="also facts waiting for review"
        )

    class InputSerializer(JsonInput):
        subject = EntityRefField()
        predicate = PredicateTextField()
        object = EntityRefField(required=False, allow_null=True)
        value = serializers.JSONField(required=False, allow_null=True)
        kind = serializers.ChoiceField(choices=FactKind.choices, required=False)
        scope = ScopeField(required=False)
        confidence = serializers.FloatField(min_value=0, max_value=1, required=False, default=1.0)
        importance = serializers.FloatField(min_value=0, max_value=1, required=False)
        valid_from = serializers.DateTimeField(required=False, allow_null=True)
        valid_until = serializers.DateTimeField(required=False, allow_null=True)
        source_ref = serializers.CharField(max_length=300, required=False, default="")

    class WriteOutputSerializer(serializers.Serializer):
        outcome = serializers.ChoiceField(
            choices=["created", "reobserved", "updated", "superseded", "conflict"]
        )
        predicate_via = serializers.CharField()
        predicate_registered = serializers.BooleanField()
        fact = FactOutputSerializer()
        superseded = serializers.IntegerField(allow_null=True)
        conflict = serializers.IntegerField(allow_null=True)
        proposes_to_replace = serializers.IntegerField(
            allow_null=True,
            help_text="a pending value of a single-valued predicate: the trusted fact it "
            "would replace once accepted",
        )
        rejected_before = serializers.BooleanField(
            help_text="the claim was rejected by a curator before; it stays rejected"
        )
        warnings = ConstraintViolationSerializer(
            many=True,
            help_text="constraints of the registry this fact breaks: written all the same, "
            "and listed in constraints/violations until fixed or excepted",
        )

    @extend_schema(parameters=[Params], responses=FactOutputSerializer(many=True))
    def get(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        p = query_params(request, self.Params)
        subject, object_ = (
            resolve_entity_name(access=access, ref=p[end]).entity if end in p else None
            for end in ("subject", "object")
        )
        facts = fact_list(
            access=access,
            subject=subject,
            object=object_,
            predicate=p.get("predicate"),
            kind=p.get("kind"),
            scope=p.get("scope"),
            as_of=p.get("as_of"),
            valid_at=p.get("valid_at"),
            include_superseded=p["include_superseded"],
            include_pending=p["include_pending"],
        )
        return paginated(request, facts, FactOutputSerializer, self)

    @extend_schema(
        request=InputSerializer, responses={201: WriteOutputSerializer, 200: WriteOutputSerializer}
    )
    def post(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = dict(data.validated_data)
        if not v.get("object"):
            v.pop("object", None)
        result = fact_write_with_entities(access=access, **v)
        body = {
            "outcome": result.outcome,
            "predicate_via": result.resolved.via,
            "predicate_registered": result.resolved.registered,
            "fact": result.fact,
            "superseded": result.superseded.pk if result.superseded else None,
            "conflict": result.conflict.pk if result.conflict else None,
            "proposes_to_replace": result.proposes_to_replace,
            "rejected_before": result.rejected_before,
            "warnings": [violation_as_dict(w) for w in result.warnings],
        }
        code = (
            status.HTTP_201_CREATED
            if result.outcome in ("created", "superseded", "conflict")
            else status.HTTP_200_OK
        )
        return Response(self.WriteOutputSerializer(body).data, status=code)


class FactDetailApi(APIView):
    @extend_schema(responses=FactOutputSerializer)
    def get(self, request: Request, ctx: str, fact_id: int) -> Response:
        access = access_for(request, ctx)
        return Response(FactOutputSerializer(fact_get(access=access, fact_id=fact_id)).data)

    @extend_schema(
        responses={200: FactOutputSerializer},
        description="Retract the fact (kept in history); answers the retracted fact. "
        "Audited: POST audit/{id}/undo brings it back.",
    )
    def delete(self, request: Request, ctx: str, fact_id: int) -> Response:
        access = access_for(request, ctx)
        fact = fact_retract(access=access, fact=fact_get(access=access, fact_id=fact_id))
        return Response(FactOutputSerializer(fact_get(access=access, fact_id=fact.pk)).data)


class FactReviewApi(APIView):
    class InputSerializer(JsonInput):
        action = serializers.CharField(max_length=20, help_text="accept | reject")
        note = serializers.CharField(max_length=500, required=False, default="", allow_blank=True)

    class OutputSerializer(serializers.Serializer):
        action = serializers.CharField()
        fact = FactOutputSerializer()
        superseded = serializers.IntegerField(allow_null=True)
        audit_event = serializers.IntegerField()

    @extend_schema(
        request=InputSerializer,
        responses=OutputSerializer,
        description="A curator accepts or rejects a pending fact (undo with audit/{id}/undo).",
    )
    def post(self, request: Request, ctx: str, fact_id: int) -> Response:
        access = access_for(request, ctx)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        reviewed = fact_review(access=access, fact_id=fact_id, **data.validated_data)
        return Response(self.OutputSerializer(_reviewed_body(access, reviewed)).data)


class FactsReviewApi(APIView):
    class InputSerializer(JsonInput):
        facts = serializers.ListField(child=serializers.IntegerField(min_value=1), min_length=1)
        action = serializers.CharField(max_length=20, help_text="accept | reject")
        note = serializers.CharField(max_length=500, required=False, default="", allow_blank=True)

    class OutputSerializer(serializers.Serializer):
        results = FactReviewApi.OutputSerializer(many=True)

    @extend_schema(
        request=InputSerializer,
        responses=OutputSerializer,
        description="Review several pending facts alike (all or nothing).",
        operation_id="api_v1_contexts_facts_review_many",
    )
    def post(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        reviewed = facts_review(
            access=access, fact_ids=v["facts"], action=v["action"], note=v["note"]
        )
        body = {"results": [_reviewed_body(access, r) for r in reviewed]}
        return Response(self.OutputSerializer(body).data)


def _reviewed_body(access: ContextAccess, reviewed: FactReviewed) -> dict[str, Any]:
    return {
        "action": reviewed.action,
        "fact": fact_get(access=access, fact_id=reviewed.fact.pk),
        "superseded": reviewed.superseded.pk if reviewed.superseded else None,
        "audit_event": reviewed.audit_event.pk,
    }
