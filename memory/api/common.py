"""Pieces every API view shares: the caller's access, shared output shapes, pagination."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from memory.domain.access import ContextAccess, context_access_resolve
from memory.kernel.errors import ValidationFailed
from memory.models import ApiToken


def access_for(request: Request, ctx: str) -> ContextAccess:
    """The caller's role and grants in context ``ctx`` (404 when it may not see it)."""
    token = request.auth if isinstance(request.auth, ApiToken) else None
    return context_access_resolve(user=request.user, slug=ctx, token=token)


def paginated(
    request: Request,
    queryset: Any,
    serializer_class: type[serializers.Serializer],
    view: Any,
    *,
    prepare: Callable[[list[Any]], object] | None = None,
) -> Response:
    """One page of ``queryset``. The view declares ``pagination_class``, which is also what
    tells the OpenAPI schema that its list answers are pages. ``prepare`` completes the
    page's rows (counts, suggestions) before they are serialized, as the dashboard's pages
    do for theirs: per page, not for every row of the list."""
    paginator = view.pagination_class()
    page: Any = paginator.paginate_queryset(queryset, request, view=view)
    if prepare is not None:
        prepare(list(page))
    data = serializer_class(page, many=True).data
    return paginator.get_paginated_response(data)


def represented(serializer_class: type[serializers.Serializer], instance: Any) -> Any:
    """``serializer_class(instance).data``, for an output serializer that reads no
    context: DRF builds a serializer's fields anew for every instance (a model
    serializer's from the model's fields), which cost a small write's answer more than
    writing its JSON. The fields are built once per class and read only afterwards, so
    requests on several threads can share them."""
    return _bound(serializer_class).to_representation(instance)


@functools.cache
def _bound(serializer_class: type[serializers.Serializer]) -> serializers.Serializer:
    serializer = serializer_class()
    serializer.fields  # noqa: B018  (built now, once, rather than by the first answers)
    return serializer


class EntityRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    type = serializers.CharField()


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    details = serializers.JSONField(allow_null=True)


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()


def query_params(request: Request, params: type[serializers.Serializer]) -> dict[str, Any]:
    """The query string validated by ``params`` (400 naming each bad value).

    A plain dict, not the QueryDict: DRF reads a missing boolean in form-like data as
    false, and an absent filter must stay absent.
    """
    data = params(data=request.query_params.dict())
    if not data.is_valid():
        problems = "; ".join(
            f"{name}: {' '.join(str(m) for m in messages)}"
            for name, messages in data.errors.items()
        )
        raise ValidationFailed(
            f"invalid query parameter{'s' if len(data.errors) > 1 else ''}: {problems}",
            code="invalid",
            details=data.errors,
        )
    return dict(data.validated_data)
