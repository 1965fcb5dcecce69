from __future__ import annotations

from dataclasses import asdict

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory.api.common import ErrorSerializer, access_for, paginated, query_params
from memory.api.fields import (
    PREDICATE_TEXT_HELP,
    JsonInput,
    PatternField,
    PositiveFloatField,
    PredicateTextField,
    predicate_path_check,
    predicate_text_schema,
)
from memory.api.pagination import StandardPagination
from memory.domain.access import ContextAccess
from memory.domain.constraints import CONSTRAINT_TYPES
from memory.kernel.errors import ValidationFailed
from memory.models import (
    EntityType,
    Predicate,
    PredicateKind,
    PredicateStatus,
    Role,
)
from memory.models.predicate import EDITABLE_FIELDS, Lifecycle
from memory.selectors.predicates import predicate_canonicalize, predicate_get, predicate_list
from memory.selectors.registry import predicates_usage_attach, registry_export_data
from memory.services.registry.file import registry_file_parse, registry_import
from memory.services.registry.predicates import (
    predicate_alias_add,
    predicate_register,
    predicate_unregister,
    predicate_update,
)


class PredicateOutputSerializer(serializers.ModelSerializer):
    aliases = serializers.SerializerMethodField()
    fact_count = serializers.IntegerField(
        read_only=True,
        help_text="observations of the current facts you may read (a fact seen three times "
        "counts three), from the usage log; the registry page shows the same figure",
    )

    class Meta:
        model = Predicate
        fields = [
            "name",
            *EDITABLE_FIELDS,
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


class PredicateFieldsSerializer(JsonInput):
    description = serializers.CharField(max_length=2000, required=False, allow_blank=True)
    example = serializers.CharField(max_length=2000, required=False, allow_blank=True)
    category = PatternField(
        r"^[a-z][a-z0-9_]*$",
        max_length=50,
        required=False,
        message="use lowercase letters, digits and '_', starting with a letter",
    )
    kind = serializers.ChoiceField(choices=PredicateKind.choices, required=False)
    subject_types = serializers.ListField(
        child=serializers.ChoiceField(choices=EntityType.choices), max_length=12, required=False
    )
    object_types = serializers.ListField(
        child=serializers.ChoiceField(choices=EntityType.choices), max_length=12, required=False
    )
    inverse = PredicateTextField(required=False, allow_blank=True)
    default_importance = serializers.FloatField(min_value=0, max_value=1, required=False)
    ranking_weight = PositiveFloatField(max_value=10, required=False)
    single_valued = serializers.BooleanField(required=False)
    is_aggregate = serializers.BooleanField(required=False)
    lifecycle = serializers.ChoiceField(choices=Lifecycle.choices, required=False)
    default_validity_days = serializers.IntegerField(
        min_value=1, max_value=36500, required=False, allow_null=True
    )
    exclude_from_prompt = serializers.BooleanField(required=False)
    constraints = serializers.ListField(
        child=serializers.DictField(),
        max_length=len(CONSTRAINT_TYPES),
        required=False,
        help_text="property constraints, each `{type, status: mandatory|suggestion, "
        "exceptions: [entity ids], …parameters}`; types: "
        + ", ".join(CONSTRAINT_TYPES)
        + ". Refused (400 invalid_constraint) where one cannot apply. Replaces the list.",
    )


class PredicateListApi(APIView):
    pagination_class = StandardPagination

    class Params(serializers.Serializer):
        status = serializers.ChoiceField(choices=PredicateStatus.choices, required=False)
        category = serializers.CharField(required=False, allow_blank=True, max_length=50)

    class InputSerializer(PredicateFieldsSerializer):
        name = PredicateTextField()
        aliases = serializers.ListField(child=PredicateTextField(), max_length=50, required=False)

    @extend_schema(parameters=[Params], responses=PredicateOutputSerializer(many=True))
    def get(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        params = query_params(request, self.Params)
        predicates = predicate_list(
            context=access.context,
            status=params.get("status"),
            category=params.get("category") or None,
        )
        return paginated(
            request,
            predicates,
            PredicateOutputSerializer,
            self,
            prepare=lambda page: predicates_usage_attach(access=access, predicates=page),
        )

    @extend_schema(request=InputSerializer, responses={201: PredicateOutputSerializer})
    def post(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        access.require_role(Role.ADMIN)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        aliases = fields.pop("aliases", [])
        predicate = predicate_register(access=access, aliases=aliases, **fields)
        return Response(
            PredicateOutputSerializer(_counted(access, predicate)).data,
            status=status.HTTP_201_CREATED,
        )


# The predicate in the path, in any form; held to the documented text before any lookup.
NAME_PARAMETER = OpenApiParameter(
    "name", predicate_text_schema(), OpenApiParameter.PATH, description=PREDICATE_TEXT_HELP
)


def _counted(access: ContextAccess, predicate: Predicate) -> Predicate:
    """``predicate`` as the list shows it: aliases prefetched, its use counted."""
    row = predicate_list(context=access.context).get(pk=predicate.pk)
    predicates_usage_attach(access=access, predicates=[row])
    return row


class PredicateDetailApi(APIView):
    @extend_schema(parameters=[NAME_PARAMETER], responses=PredicateOutputSerializer)
    def get(self, request: Request, ctx: str, name: str) -> Response:
        access = access_for(request, ctx)
        predicate = predicate_get(context=access.context, name=predicate_path_check(name))
        return Response(PredicateOutputSerializer(_counted(access, predicate)).data)

    @extend_schema(
        parameters=[NAME_PARAMETER],
        request=PredicateFieldsSerializer,
        responses=PredicateOutputSerializer,
    )
    def patch(self, request: Request, ctx: str, name: str) -> Response:
        access = access_for(request, ctx)
        access.require_role(Role.ADMIN)
        predicate = predicate_get(context=access.context, name=predicate_path_check(name))
        data = PredicateFieldsSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        predicate = predicate_update(access=access, predicate=predicate, **data.validated_data)
        return Response(PredicateOutputSerializer(_counted(access, predicate)).data)

    @extend_schema(
        parameters=[NAME_PARAMETER],
        responses={204: None},
        description="Unregister: deleted when no fact uses it, otherwise it becomes drift "
        "(status observed) and its facts stay.",
    )
    def delete(self, request: Request, ctx: str, name: str) -> Response:
        access = access_for(request, ctx)
        access.require_role(Role.ADMIN)
        predicate = predicate_get(context=access.context, name=predicate_path_check(name))
        predicate_unregister(access=access, predicate=predicate)
        return Response(status=status.HTTP_204_NO_CONTENT)


class PredicateAliasApi(APIView):
    class InputSerializer(JsonInput):
        alias = PredicateTextField()

    @extend_schema(
        parameters=[NAME_PARAMETER],
        request=InputSerializer,
        responses={201: PredicateOutputSerializer},
    )
    def post(self, request: Request, ctx: str, name: str) -> Response:
        access = access_for(request, ctx)
        access.require_role(Role.CURATOR)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        predicate = predicate_get(context=access.context, name=predicate_path_check(name))
        predicate_alias_add(access=access, predicate=predicate, alias=data.validated_data["alias"])
        return Response(
            PredicateOutputSerializer(_counted(access, predicate)).data,
            status=status.HTTP_201_CREATED,
        )


class PredicateCanonicalizeApi(APIView):
    class OutputSerializer(serializers.Serializer):
        input = serializers.CharField()
        canonical = serializers.CharField()
        registered = serializers.BooleanField()
        via = serializers.ChoiceField(
            choices=["exact", "normalized", "alias", "inverse", "fuzzy", "none"]
        )
        inverse = serializers.BooleanField(
            help_text="true through an inverse alias: canonical with subject and object swapped"
        )

    class Params(serializers.Serializer):
        name = PredicateTextField()

    @extend_schema(parameters=[Params], responses=OutputSerializer)
    def get(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        params = query_params(request, self.Params)
        result = predicate_canonicalize(context=access.context, name=params["name"])
        return Response(self.OutputSerializer(result).data)


class RegistryImportOutcomeSerializer(serializers.Serializer):
    name = serializers.CharField()
    outcome = serializers.ChoiceField(
        choices=["created", "promoted", "updated", "unchanged", "error"]
    )
    detail = serializers.CharField()


class RegistryImportOutputSerializer(serializers.Serializer):
    outcomes = RegistryImportOutcomeSerializer(many=True)


class PredicateExportApi(APIView):
    @extend_schema(
        responses={200: dict},
        description="The registered predicates with every editable field and their aliases: "
        "the registry page's export file (format `memory-desk-registry`, version 1). Admins "
        "only.",
    )
    def get(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        access.require_role(Role.ADMIN)
        return Response(registry_export_data(context=access.context))


class PredicateImportApi(APIView):
    @extend_schema(
        request=dict,
        responses={200: RegistryImportOutputSerializer, 400: ErrorSerializer},
        description="Import a registry file (an export, or a bare list of predicates), as the "
        "registry page does: new predicates are registered, existing ones updated, aliases "
        "added. All or nothing: when any predicate is refused nothing is written and the "
        "answer is 400 `registry_import_failed` with every outcome in `details`. Admins only.",
    )
    def post(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        access.require_role(Role.ADMIN)
        entries = registry_file_parse(request.data)
        result = registry_import(access=access, entries=entries)
        outcomes = [asdict(o) for o in result.outcomes]
        if not result.applied:
            raise ValidationFailed(
                "nothing was imported: fix the predicates whose outcome is error",
                code="registry_import_failed",
                details=outcomes,
            )
        return Response(RegistryImportOutputSerializer({"outcomes": outcomes}).data)
