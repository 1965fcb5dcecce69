from __future__ import annotations

from typing import Any

from django.db.models import Count, Q
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory.api.common import access_for, paginated
from memory.models import EntityType, FactStatus, Predicate, PredicateKind, PredicateStatus, Role
from memory.models.predicate import Lifecycle
from memory.selectors.predicates import predicate_canonicalize, predicate_get, predicate_list
from memory.services.predicates import (
    predicate_alias_add,
    predicate_register,
    predicate_unregister,
    predicate_update,
)


class PredicateOutputSerializer(serializers.ModelSerializer):
    aliases = serializers.SerializerMethodField()
    fact_count = serializers.IntegerField(read_only=True, default=None)

    class Meta:
        model = Predicate
        fields = [
            "name",
            "description",
            "example",
            "category",
            "kind",
            "subject_types",
            "object_types",
            "inverse",
            "default_importance",
            "ranking_weight",
            "single_valued",
            "is_aggregate",
            "lifecycle",
            "default_validity_days",
            "exclude_from_prompt",
            "status",
            "aliases",
            "fact_count",
            "first_seen_at",
            "last_seen_at",
        ]

    def get_aliases(self, predicate: Predicate) -> list[str]:
        return [a.alias for a in predicate.alias_set.all()]


_TYPE_LIST = serializers.ListField(
    child=serializers.ChoiceField(choices=EntityType.choices), max_length=12, required=False
)


class PredicateFieldsSerializer(serializers.Serializer):
    description = serializers.CharField(max_length=2000, required=False, allow_blank=True)
    example = serializers.CharField(max_length=2000, required=False, allow_blank=True)
    category = serializers.RegexField(r"^[a-z][a-z0-9_]{0,49}$", required=False)
    kind = serializers.ChoiceField(choices=PredicateKind.choices, required=False)
    subject_types = serializers.ListField(
        child=serializers.ChoiceField(choices=EntityType.choices), max_length=12, required=False
    )
    object_types = serializers.ListField(
        child=serializers.ChoiceField(choices=EntityType.choices), max_length=12, required=False
    )
    inverse = serializers.CharField(max_length=100, required=False, allow_blank=True)
    default_importance = serializers.FloatField(min_value=0, max_value=1, required=False)
    ranking_weight = serializers.FloatField(min_value=0, max_value=10, required=False)
    single_valued = serializers.BooleanField(required=False)
    is_aggregate = serializers.BooleanField(required=False)
    lifecycle = serializers.ChoiceField(choices=Lifecycle.choices, required=False)
    default_validity_days = serializers.IntegerField(
        min_value=1, max_value=36500, required=False, allow_null=True
    )
    exclude_from_prompt = serializers.BooleanField(required=False)


def _with_counts(predicates: Any) -> Any:
    return predicates.annotate(
        fact_count=Count("facts", filter=Q(facts__status=FactStatus.CURRENT))
    )


class PredicateListApi(APIView):
    class InputSerializer(PredicateFieldsSerializer):
        name = serializers.CharField(max_length=100)
        aliases = serializers.ListField(
            child=serializers.CharField(max_length=100), max_length=50, required=False
        )

    @extend_schema(
        parameters=[
            OpenApiParameter("status", str, enum=PredicateStatus.values),
            OpenApiParameter("category", str),
        ],
        responses=PredicateOutputSerializer(many=True),
    )
    def get(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        predicates = predicate_list(
            context=access.context,
            status=request.query_params.get("status"),
            category=request.query_params.get("category"),
        )
        return paginated(request, _with_counts(predicates), PredicateOutputSerializer, self)

    @extend_schema(request=InputSerializer, responses={201: PredicateOutputSerializer})
    def post(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        access.require_role(Role.ADMIN)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        aliases = fields.pop("aliases", [])
        predicate = predicate_register(access=access, aliases=aliases, **fields)
        fresh = predicate_get(context=access.context, name=predicate.name)
        return Response(PredicateOutputSerializer(fresh).data, status=status.HTTP_201_CREATED)


class PredicateDetailApi(APIView):
    @extend_schema(responses=PredicateOutputSerializer)
    def get(self, request: Request, ctx: str, name: str) -> Response:
        access = access_for(request, ctx)
        return Response(
            PredicateOutputSerializer(predicate_get(context=access.context, name=name)).data
        )

    @extend_schema(request=PredicateFieldsSerializer, responses=PredicateOutputSerializer)
    def patch(self, request: Request, ctx: str, name: str) -> Response:
        access = access_for(request, ctx)
        access.require_role(Role.ADMIN)
        predicate = predicate_get(context=access.context, name=name)
        data = PredicateFieldsSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        predicate_update(access=access, predicate=predicate, **data.validated_data)
        return Response(
            PredicateOutputSerializer(
                predicate_get(context=access.context, name=predicate.name)
            ).data
        )

    @extend_schema(
        responses={204: None},
        description="Unregister: deleted when no fact uses it, otherwise it becomes drift "
        "(status observed) and its facts stay.",
    )
    def delete(self, request: Request, ctx: str, name: str) -> Response:
        access = access_for(request, ctx)
        access.require_role(Role.ADMIN)
        predicate_unregister(
            access=access, predicate=predicate_get(context=access.context, name=name)
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class PredicateAliasApi(APIView):
    class InputSerializer(serializers.Serializer):
        alias = serializers.CharField(max_length=100)

    @extend_schema(request=InputSerializer, responses={201: PredicateOutputSerializer})
    def post(self, request: Request, ctx: str, name: str) -> Response:
        access = access_for(request, ctx)
        access.require_role(Role.CURATOR)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        predicate = predicate_get(context=access.context, name=name)
        predicate_alias_add(access=access, predicate=predicate, alias=data.validated_data["alias"])
        fresh = predicate_get(context=access.context, name=predicate.name)
        return Response(PredicateOutputSerializer(fresh).data, status=status.HTTP_201_CREATED)


class PredicateCanonicalizeApi(APIView):
    class OutputSerializer(serializers.Serializer):
        input = serializers.CharField()
        canonical = serializers.CharField()
        registered = serializers.BooleanField()
        via = serializers.ChoiceField(choices=["exact", "normalized", "alias", "fuzzy", "none"])

    @extend_schema(
        parameters=[OpenApiParameter("name", str, required=True)], responses=OutputSerializer
    )
    def get(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        params = self.Params(data=request.query_params)
        params.is_valid(raise_exception=True)
        result = predicate_canonicalize(context=access.context, name=params.validated_data["name"])
        return Response(self.OutputSerializer(result).data)

    class Params(serializers.Serializer):
        name = serializers.CharField(max_length=200)
