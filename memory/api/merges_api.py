"""Duplicates, merges (with preview and undo) and fsck."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory.api.common import EntityRefSerializer, access_for, query_params
from memory.api.fields import DistinctListField, JsonInput
from memory.models import Role
from memory.models.merge import Merge
from memory.selectors.duplicates import duplicate_cluster_page
from memory.services.duplicates.finder import duplicates_dismiss
from memory.services.fsck import CHECKS, fsck_run
from memory.services.merges.merge import entity_merge, entity_merge_preview, merge_undo


class DuplicateExplainSerializer(serializers.Serializer):
    field = serializers.CharField(
        help_text='"prior" (first: where the score starts, before any field), "name", '
        '"type" (only when one of the two is untyped, other), "id:<kind>", '
        '"attr:<key>:<comparator>", "embedding"'
    )
    level = serializers.CharField(help_text="how closely the two values agree")
    agrees = serializers.BooleanField()
    weight = serializers.FloatField(
        help_text="log2(m/u): positive for, negative against (the prior's: its log2 odds); "
        "the weights add up to the pair's log2 odds"
    )


class PairSerializer(serializers.Serializer):
    entity_a = serializers.IntegerField(source="entity_a_id")
    entity_b = serializers.IntegerField(source="entity_b_id")
    score = serializers.FloatField(help_text="match probability (Fellegi–Sunter)")
    methods = serializers.ListField(child=serializers.CharField())
    explain = DuplicateExplainSerializer(many=True)


class ClusterSerializer(serializers.Serializer):
    members = EntityRefSerializer(many=True)
    score = serializers.FloatField()
    methods = serializers.ListField(child=serializers.CharField())
    pairs = PairSerializer(many=True)


class DuplicateListApi(APIView):
    class Params(serializers.Serializer):
        min_score = serializers.FloatField(min_value=0, max_value=1, required=False, default=0.0)
        limit = serializers.IntegerField(min_value=1, max_value=1000, required=False, default=200)
        offset = serializers.IntegerField(min_value=0, max_value=10**7, required=False, default=0)

    class OutputSerializer(serializers.Serializer):
        count = serializers.IntegerField(help_text="clusters on this page")
        total = serializers.IntegerField(help_text="clusters in all")
        results = ClusterSerializer(many=True)

    @extend_schema(parameters=[Params], responses=OutputSerializer)
    def get(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        clusters, total = duplicate_cluster_page(
            access=access, **query_params(request, self.Params)
        )
        return Response(
            self.OutputSerializer(
                {"count": len(clusters), "total": total, "results": clusters}
            ).data
        )


class DuplicateDismissApi(APIView):
    class InputSerializer(JsonInput):
        entities = DistinctListField(
            child=serializers.IntegerField(min_value=1), min_length=2, max_length=50
        )

    class OutputSerializer(serializers.Serializer):
        dismissed_pairs = serializers.IntegerField()

    @extend_schema(request=InputSerializer, responses=OutputSerializer)
    def post(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        access.require_role(Role.CURATOR)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        pairs = duplicates_dismiss(access=access, entity_ids=data.validated_data["entities"])
        return Response(self.OutputSerializer({"dismissed_pairs": pairs}).data)


class MergeOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = Merge
        fields = [
            "id",
            "survivor",
            "merged_ids",
            "final_name",
            "summary",
            "created_at",
            "undone_at",
        ]


class MovingFactSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    subject = serializers.CharField()
    predicate = serializers.CharField()
    object = serializers.CharField()
    fate = serializers.CharField(help_text="what the merge does to it, in words")


class MergePreviewSerializer(serializers.Serializer):
    survivor = EntityRefSerializer()
    merged = EntityRefSerializer(many=True)
    final_name = serializers.CharField()
    facts_moving = serializers.IntegerField()
    aliases_added = serializers.ListField(child=serializers.CharField())
    identifiers_moving = serializers.ListField(child=serializers.CharField())
    folded = serializers.ListField(child=serializers.IntegerField())
    self_loops = serializers.ListField(child=serializers.IntegerField())
    contested = serializers.ListField(child=serializers.IntegerField())
    superseded = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="Current facts a moving single value replaces (services/facts/rules.py)",
    )
    attribute_conflicts = serializers.DictField()
    facts = MovingFactSerializer(many=True, help_text="the first 100 moving facts by name")
    scope_branches = serializers.ListField(
        child=serializers.CharField(),
        help_text="the members' scopes when they lie on different branches (a warning: the "
        "survivor's scope is kept); empty otherwise",
    )


class EntityMergeApi(APIView):
    class InputSerializer(JsonInput):
        survivor = serializers.IntegerField(min_value=1)
        merged = DistinctListField(
            child=serializers.IntegerField(min_value=1), min_length=1, max_length=50
        )
        name = serializers.CharField(max_length=300, required=False)
        preview = serializers.BooleanField(required=False, default=False)

    @extend_schema(
        request=InputSerializer,
        responses={201: MergeOutputSerializer, 200: MergePreviewSerializer},
        description="Merge entities into a survivor (201, a merge record), or with "
        "`preview: true` show what would move (200) without writing.",
    )
    def post(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        access.require_role(Role.CURATOR)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        if v["preview"]:
            plan = entity_merge_preview(
                access=access, survivor_id=v["survivor"], merged_ids=v["merged"], name=v.get("name")
            )
            return Response(MergePreviewSerializer(plan).data)
        record = entity_merge(
            access=access, survivor_id=v["survivor"], merged_ids=v["merged"], name=v.get("name")
        )
        return Response(MergeOutputSerializer(record).data, status=status.HTTP_201_CREATED)


class MergeUndoApi(APIView):
    @extend_schema(request=None, responses=MergeOutputSerializer)
    def post(self, request: Request, ctx: str, merge_id: int) -> Response:
        access = access_for(request, ctx)
        record = merge_undo(access=access, merge_id=merge_id)
        return Response(MergeOutputSerializer(record).data)


class FsckApi(APIView):
    class InputSerializer(JsonInput):
        checks = serializers.ListField(
            child=serializers.ChoiceField(choices=CHECKS), min_length=1, default=list(CHECKS)
        )

    @extend_schema(request=InputSerializer, responses={200: dict})
    def post(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(fsck_run(access=access, checks=data.validated_data["checks"]))
