from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory.api.common import access_for, paginated
from memory.api.fields import JsonInput, PatternField
from memory.api.pagination import StandardPagination
from memory.kernel.errors import PermissionDenied
from memory.models import ApiToken, Context, FactReview, PredicateMode, Role
from memory.models.context import SETTING_FIELDS
from memory.selectors.contexts import context_list
from memory.services.contexts import context_create, context_update
from memory.services.vectors import embedding_backlog


class ContextOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = Context
        fields = ["slug", "name", *SETTING_FIELDS, "created_at"]


class ContextDetailOutputSerializer(ContextOutputSerializer):
    embedding_backlog = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="rows of this context the caller may read that still wait for a vector, "
        "per target (chunks, turns, facts, entities, keywords): until a count is 0, vector "
        "and hybrid search miss those rows",
    )

    class Meta(ContextOutputSerializer.Meta):
        fields = [*ContextOutputSerializer.Meta.fields, "embedding_backlog"]


class ContextListApi(APIView):
    pagination_class = StandardPagination

    class InputSerializer(JsonInput):
        slug = PatternField(
            r"^[a-z0-9][a-z0-9_-]*$",
            max_length=63,
            message="a slug is lowercase letters, digits, '_' and '-', starting with a letter "
            "or digit",
        )
        name = serializers.CharField(max_length=200, required=False, allow_blank=True)
        description = serializers.CharField(max_length=5000, required=False, allow_blank=True)
        predicate_mode = serializers.ChoiceField(choices=PredicateMode.choices, required=False)
        auto_supersede = serializers.BooleanField(required=False)
        auto_merge_threshold = serializers.FloatField(min_value=0, max_value=1, required=False)
        review_threshold = serializers.FloatField(min_value=0, max_value=1, required=False)

    @extend_schema(responses=ContextOutputSerializer(many=True))
    def get(self, request: Request) -> Response:
        token = request.auth if isinstance(request.auth, ApiToken) else None
        return paginated(
            request, context_list(user=request.user, token=token), ContextOutputSerializer, self
        )

    @extend_schema(request=InputSerializer, responses={201: ContextOutputSerializer})
    def post(self, request: Request) -> Response:
        if isinstance(request.auth, ApiToken) or not request.user.is_staff:
            raise PermissionDenied(
                "creating contexts needs a staff account signed in (tokens are bound to one "
                "context)",
                code="staff_required",
            )
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        context = context_create(owner=request.user, **data.validated_data)
        return Response(ContextOutputSerializer(context).data, status=status.HTTP_201_CREATED)


class ContextDetailApi(APIView):
    class InputSerializer(JsonInput):
        name = serializers.CharField(max_length=200, required=False)
        description = serializers.CharField(max_length=5000, required=False, allow_blank=True)
        predicate_mode = serializers.ChoiceField(choices=PredicateMode.choices, required=False)
        auto_supersede = serializers.BooleanField(required=False)
        auto_merge_threshold = serializers.FloatField(min_value=0, max_value=1, required=False)
        review_threshold = serializers.FloatField(min_value=0, max_value=1, required=False)
        llm_judge_enabled = serializers.BooleanField(required=False)
        fact_review = serializers.ChoiceField(
            choices=FactReview.choices,
            required=False,
            help_text="which new facts wait for a curator: off, untrusted (facts written "
            "through an untrusted token), all (also every fact the chat model extracts)",
        )
        item_extract = serializers.BooleanField(
            required=False,
            help_text="every item put extracts facts from its indexed text (as with extract: "
            "true) unless the put says extract: false",
        )

    @extend_schema(responses=ContextDetailOutputSerializer)
    def get(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        context = access.context
        context.embedding_backlog = embedding_backlog(  # type: ignore[attr-defined]
            context=context, visible=access.grants.read_q()
        )
        return Response(ContextDetailOutputSerializer(context).data)

    @extend_schema(request=InputSerializer, responses=ContextOutputSerializer)
    def patch(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        access.require_role(Role.ADMIN)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        context = context_update(access=access, **data.validated_data)
        return Response(ContextOutputSerializer(context).data)
