"""Curation endpoints: drift, conflicts and the audit log with undo."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory.api.common import (
    EntityRefSerializer,
    ErrorSerializer,
    access_for,
    paginated,
    query_params,
)
from memory.api.entities import AuditEventOutputSerializer
from memory.api.facts import FactOutputSerializer
from memory.api.fields import JsonInput, PredicateTextField, predicate_path_check
from memory.api.pagination import StandardPagination
from memory.api.predicates import NAME_PARAMETER, PredicateFieldsSerializer
from memory.domain.access import ContextAccess
from memory.kernel.errors import ValidationFailed
from memory.models import Role
from memory.models.fact import ConflictStatus
from memory.selectors.curation import audit_list, conflict_get, conflict_list
from memory.selectors.drift import (
    DriftItem,
    drift_examples_attach,
    drift_list,
    drift_suggestions_attach,
)
from memory.services.drift.alias import drift_alias
from memory.services.drift.resolve import drift_resolve
from memory.services.facts.conflicts import conflict_resolve
from memory.services.undo import audit_undo


class SuggestionSerializer(serializers.Serializer):
    name = serializers.CharField()
    score = serializers.FloatField()
    confident = serializers.BooleanField(
        help_text="score at or above the calibrated threshold, kinds match, direction clear"
    )
    inverse = serializers.BooleanField(help_text="the observed name is this target read backwards")
    kind_match = serializers.BooleanField()
    basis = serializers.ChoiceField(choices=["typo", "inverse_name", "meaning"])
    name_similarity = serializers.FloatField()
    description_similarity = serializers.FloatField()
    reasons = serializers.ListField(child=serializers.CharField())


class AliasPlanSerializer(serializers.Serializer):
    name = serializers.CharField()
    target = serializers.CharField()
    inverse = serializers.BooleanField()
    facts_moving = serializers.IntegerField()
    subjects_with_several_values = serializers.IntegerField()
    warnings = serializers.ListField(child=serializers.CharField())
    moving = serializers.ListField(
        child=serializers.CharField(),
        help_text="the first 10 facts that move, as they will read on the target",
    )


class DriftItemSerializer(serializers.Serializer):
    name = serializers.CharField(source="predicate.name")
    fact_count = serializers.IntegerField()
    first_seen = serializers.DateTimeField(allow_null=True)
    last_seen = serializers.DateTimeField(allow_null=True)
    examples = FactOutputSerializer(many=True)
    suggestions = SuggestionSerializer(many=True)


class DriftListApi(APIView):
    pagination_class = StandardPagination

    @extend_schema(
        responses={200: DriftItemSerializer(many=True), 503: ErrorSerializer},
        description="Observed predicates with their visible use, examples and registered "
        "predicates ranked as suggestions (string, word and embedding similarity). 503 "
        "`embedder_unavailable` when the embedding model is unavailable.",
    )
    def get(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        items = drift_list(access=access, with_suggestions=False, with_examples=False)
        return paginated(
            request,
            items,
            DriftItemSerializer,
            self,
            prepare=lambda page: _complete_page(access, page),
        )


def _complete_page(access: ContextAccess, items: list[DriftItem]) -> None:
    """Examples and ranked suggestions for one page of drift, as the drift page does."""
    drift_examples_attach(items=items)
    drift_suggestions_attach(access=access, items=items)


class DriftResolveApi(APIView):
    class InputSerializer(JsonInput):
        action = serializers.ChoiceField(choices=["alias", "promote", "reject"])
        target = PredicateTextField(required=False)
        definition = PredicateFieldsSerializer(required=False)
        inverse = serializers.BooleanField(
            required=False, default=False, help_text="alias: the name is the target backwards"
        )
        force = serializers.BooleanField(
            required=False,
            default=False,
            help_text="alias: go ahead although a single-valued target gets several values",
        )
        preview = serializers.BooleanField(
            required=False, default=False, help_text="alias: answer the plan, write nothing"
        )

    @extend_schema(
        parameters=[NAME_PARAMETER],
        request=InputSerializer,
        responses={
            200: AuditEventOutputSerializer,
            400: ErrorSerializer,
            409: ErrorSerializer,
        },
        description="Resolve one drift item. With `preview: true` (alias only) the answer is "
        "the plan instead (`AliasPlan`: facts moving, subjects left with several values of a "
        "single-valued target, type-hint warnings) and nothing is written. 409 "
        "`kind_mismatch` across kinds, `several_values` without `force`; 400 "
        "`inverse_not_relation`, `alias_onto_self`.",
    )
    def post(self, request: Request, ctx: str, name: str) -> Response:
        access = access_for(request, ctx)
        access.require_role(Role.CURATOR)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        if values.pop("preview"):
            if values["action"] != "alias" or not values.get("target"):
                raise ValidationFailed(
                    "preview is for the alias action with a target", code="invalid_action"
                )
            plan = drift_alias(
                access=access,
                name=predicate_path_check(name),
                target=values["target"],
                inverse=values["inverse"],
                force=values["force"],
                preview=True,
            )
            return Response(AliasPlanSerializer(plan).data)
        event = drift_resolve(access=access, name=predicate_path_check(name), **values)
        return Response(AuditEventOutputSerializer(event).data)


class ConflictOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    scope = serializers.CharField()
    subject = EntityRefSerializer()
    predicate = serializers.CharField(source="predicate.name")
    current_fact = FactOutputSerializer()
    contested_fact = FactOutputSerializer()
    reason = serializers.CharField()
    status = serializers.CharField()
    resolution = serializers.CharField()
    created_at = serializers.DateTimeField()
    resolved_at = serializers.DateTimeField(allow_null=True)


class ConflictListApi(APIView):
    pagination_class = StandardPagination

    class Params(serializers.Serializer):
        status = serializers.ChoiceField(
            choices=[*ConflictStatus.values, "all"], required=False, default=ConflictStatus.OPEN
        )

    @extend_schema(parameters=[Params], responses=ConflictOutputSerializer(many=True))
    def get(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        status = query_params(request, self.Params)["status"]
        conflicts = conflict_list(access=access, status=None if status == "all" else status)
        return paginated(request, conflicts, ConflictOutputSerializer, self)


class ConflictResolveApi(APIView):
    class InputSerializer(JsonInput):
        action = serializers.ChoiceField(choices=["keep_current", "keep_new", "keep_both", "edit"])
        value = serializers.JSONField(required=False, allow_null=True, help_text="for edit")

    @extend_schema(request=InputSerializer, responses=ConflictOutputSerializer)
    def post(self, request: Request, ctx: str, conflict_id: int) -> Response:
        access = access_for(request, ctx)
        access.require_role(Role.CURATOR)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        conflict = conflict_get(access=access, conflict_id=conflict_id)
        conflict_resolve(access=access, conflict=conflict, **data.validated_data)
        fresh = conflict_get(access=access, conflict_id=conflict_id)
        return Response(ConflictOutputSerializer(fresh).data)


class AuditListApi(APIView):
    pagination_class = StandardPagination

    class Params(serializers.Serializer):
        action = serializers.CharField(required=False, allow_blank=True, max_length=100)
        target_type = serializers.CharField(required=False, allow_blank=True, max_length=100)

    @extend_schema(parameters=[Params], responses=AuditEventOutputSerializer(many=True))
    def get(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        params = query_params(request, self.Params)
        events = audit_list(
            access=access, action=params.get("action"), target_type=params.get("target_type")
        )
        return paginated(request, events, AuditEventOutputSerializer, self)


class AuditUndoApi(APIView):
    @extend_schema(request=None, responses=AuditEventOutputSerializer)
    def post(self, request: Request, ctx: str, event_id: int) -> Response:
        access = access_for(request, ctx)
        event = audit_undo(access=access, event_id=event_id)
        return Response(AuditEventOutputSerializer(event).data)
