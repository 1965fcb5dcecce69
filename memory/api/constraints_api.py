"""The constraint report (``GET constraints/violations``), exceptions to a constraint
(``POST constraints/exceptions``) and the registry's constraints as SHACL shapes
(``GET predicates/shapes``)."""

from __future__ import annotations

from dataclasses import asdict
from urllib.parse import urlencode

from django.http import HttpResponse
from django.urls import reverse
from drf_spectacular.utils import OpenApiTypes, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory.api.common import access_for, query_params
from memory.api.facts import ENTITY_PARAM_HELP, ConstraintViolationSerializer, EntityParamField
from memory.api.fields import JsonInput, PredicateTextField, ScopeFilterField
from memory.domain.constraints import CONSTRAINT_STATUSES, CONSTRAINT_TYPES
from memory.kernel.scopes import grant_parse
from memory.selectors.constraints import MAX_PAGE, constraint_violations, violation_as_dict
from memory.selectors.entities import entity_get
from memory.selectors.entity_lookup import resolve_entity_name
from memory.selectors.predicates import predicate_get
from memory.services.registry.constraint_exceptions import constraint_exception_add
from memory.services.transfer.shapes import registry_shapes_turtle


def context_iri_base(request: Request, ctx: str) -> str:
    """The context's API address, the base of its RDF IRIs (ends in ``/``)."""
    return request.build_absolute_uri(reverse("api-context", kwargs={"ctx": ctx})) + "/"


class ViolationCountSerializer(serializers.Serializer):
    predicate = serializers.CharField()
    constraint = serializers.ChoiceField(choices=CONSTRAINT_TYPES)
    status = serializers.ChoiceField(choices=CONSTRAINT_STATUSES)
    count = serializers.IntegerField()


class ConstraintViolationsApi(APIView):
    class Params(serializers.Serializer):
        predicate = PredicateTextField(required=False, help_text="any form of the name")
        type = serializers.ChoiceField(choices=CONSTRAINT_TYPES, required=False)
        status = serializers.ChoiceField(choices=CONSTRAINT_STATUSES, required=False)
        entity = EntityParamField(required=False, help_text=ENTITY_PARAM_HELP)
        scope = ScopeFilterField(required=False, help_text="a scope pattern: `P`, `P/*` or `*`")
        after = serializers.CharField(
            required=False, max_length=2000, help_text="the `next_cursor` of the page before"
        )
        limit = serializers.IntegerField(required=False, min_value=1, default=50)

    class OutputSerializer(serializers.Serializer):
        count = serializers.IntegerField(help_text="violations the filters keep, every page")
        counts = ViolationCountSerializer(many=True)
        next_cursor = serializers.CharField(allow_null=True)
        next = serializers.CharField(allow_null=True)
        results = ConstraintViolationSerializer(many=True)

    @extend_schema(
        parameters=[Params],
        responses=OutputSerializer,
        description="The constraint report under your grants: one row per subject that "
        "breaks a constraint of its predicate (per pair of subjects for distinct_values), "
        "ordered by predicate, constraint and entity, with counts by predicate and "
        f"constraint. Keyset pages of `limit` rows (at most {MAX_PAGE}): pass "
        "`next_cursor` as `after`. Judges current, trusted facts.",
    )
    def get(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        p = query_params(request, self.Params)
        predicate = (
            predicate_get(context=access.context, name=p["predicate"]) if "predicate" in p else None
        )
        entity = (
            resolve_entity_name(access=access, ref=p["entity"]).entity if "entity" in p else None
        )
        report = constraint_violations(
            access=access,
            predicate=predicate,
            constraint=p.get("type"),
            status=p.get("status"),
            entity=entity.pk if entity is not None else None,
            scope=_scope_pattern(p.get("scope")),
            after=p.get("after"),
            limit=min(p["limit"], MAX_PAGE),
        )
        next_url = None
        if report.next_cursor:
            query = {k: v for k, v in request.query_params.items() if k != "after"}
            query["after"] = report.next_cursor
            next_url = request.build_absolute_uri(request.path) + "?" + urlencode(query)
        body = {
            "count": report.total,
            "counts": [asdict(c) for c in report.counts],
            "next_cursor": report.next_cursor,
            "next": next_url,
            "results": [violation_as_dict(v) for v in report.results],
        }
        return Response(self.OutputSerializer(body).data)


def _scope_pattern(scope: str | None) -> str | None:
    if not scope:
        return None
    grant_parse(f"read:{scope}")  # a malformed pattern answers 400 invalid_scope
    return scope


class ConstraintExceptionApi(APIView):
    class InputSerializer(JsonInput):
        predicate = PredicateTextField()
        constraint = serializers.ChoiceField(choices=CONSTRAINT_TYPES)
        entity = serializers.IntegerField(min_value=1)

    class OutputSerializer(serializers.Serializer):
        predicate = serializers.CharField()
        constraints = serializers.ListField(child=serializers.DictField())

    @extend_schema(
        request=InputSerializer,
        responses={201: OutputSerializer},
        description="Make an entity an exception to one constraint of a predicate "
        "(curators): its facts are no longer reported under it. Audited; undo it from the "
        "audit log.",
    )
    def post(self, request: Request, ctx: str) -> Response:
        access = access_for(request, ctx)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        predicate = predicate_get(context=access.context, name=v["predicate"])
        entity = entity_get(access=access, entity_id=v["entity"])
        updated = constraint_exception_add(
            access=access, predicate=predicate, constraint=v["constraint"], entity=entity
        )
        return Response(
            self.OutputSerializer(
                {"predicate": updated.name, "constraints": updated.constraints}
            ).data,
            status=status.HTTP_201_CREATED,
        )


class PredicateShapesApi(APIView):
    @extend_schema(
        responses={(200, "text/turtle"): OpenApiTypes.STR},
        description="The registry's constraints as SHACL shapes in Turtle, over the IRIs "
        "of `export?format=turtle`: core SHACL where it can state the rule, SHACL-SPARQL "
        "for symmetric, inverse, distinct values, conflicts-with and requires.",
    )
    def get(self, request: Request, ctx: str) -> HttpResponse:
        access = access_for(request, ctx)
        text = registry_shapes_turtle(access=access, base=context_iri_base(request, ctx))
        return HttpResponse(text, content_type="text/turtle; charset=utf-8")
