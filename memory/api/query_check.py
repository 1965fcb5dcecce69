"""Unknown query parameters are refused, as unknown body fields are (decision 0036): a
misspelt or unsupported filter (``GET facts?colour=red``, ``?subjcet=Alex``) must not
vanish and answer more than was asked.

What a read takes is what its OpenAPI operation documents, read from the declarations
the schema is generated from: its method's ``extend_schema(parameters=…)`` (a
serializer's fields, or ``OpenApiParameter``s in the query), its view's pagination
parameters (``limit``, ``offset``), and ``format``. One check for every API view,
``QueryParameterCheck``, before the view runs: a 400 ``unknown_parameter`` in the one
error shape, naming each unknown parameter and what the operation takes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from drf_spectacular.plumbing import force_instance
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.views import APIView

from memory.web.errors import error_body

API_PREFIX = "/api/v1/"
# Taken by every read: the export's and the bulk files' ``format`` is an ordinary
# parameter (``URL_FORMAT_OVERRIDE`` is off), documented where it means something.
ALWAYS_TAKEN = frozenset({"format"})
READS = ("GET", "HEAD")


# What each (view, method) takes, worked out on its first request: views never change.
_TAKEN: dict[tuple[str, str], frozenset[str]] = {}


def query_parameters_taken(view_class: type[APIView], method: str) -> frozenset[str]:
    """The query parameters ``method`` of ``view_class`` documents (HEAD reads as GET)."""
    method = "GET" if method == "HEAD" else method
    key = (f"{view_class.__module__}.{view_class.__qualname__}", method)
    taken = _TAKEN.get(key)
    if taken is None:
        taken = _TAKEN[key] = _taken(view_class, method)
    return taken


def _taken(view_class: type[APIView], method: str) -> frozenset[str]:
    names = set(ALWAYS_TAKEN)
    handler = getattr(view_class, method.lower(), None)
    schema_class = getattr(handler, "kwargs", {}).get("schema")
    if schema_class is not None:
        schema = schema_class()
        # What the schema generator gives the schema: a bare view (extend_schema asks it
        # for its API version) and the method.
        schema.view = _bare_view(view_class)
        schema.method = method
        for parameter in schema.get_override_parameters():
            names |= _query_names(parameter)
    pagination = getattr(view_class, "pagination_class", None)
    if pagination is not None:
        paginator = pagination()
        names |= {p["name"] for p in paginator.get_schema_operation_parameters(None)}
    return frozenset(names)


def _bare_view(view_class: type[APIView]) -> APIView:
    view = view_class()
    view.args, view.kwargs, view.request = (), {}, None  # type: ignore[assignment]
    return view


def _query_names(parameter: Any) -> set[str]:
    if isinstance(parameter, OpenApiParameter):
        taken = parameter.location == OpenApiParameter.QUERY and not parameter.exclude
        return {parameter.name} if taken and not parameter.response else set()
    if isinstance(parameter, serializers.BaseSerializer) or (
        isinstance(parameter, type) and issubclass(parameter, serializers.BaseSerializer)
    ):
        fields = force_instance(parameter).fields
        return {name for name, field in fields.items() if not field.read_only}
    return set()


def unknown_parameters_response(names: list[str], taken: frozenset[str]) -> HttpResponse:
    listed = ", ".join(sorted(taken - ALWAYS_TAKEN)) or "no other parameters"
    problem = f"unknown parameter; this operation takes {listed}"
    shown = ", ".join(names[:5]) + (f" (and {len(names) - 5} more)" if len(names) > 5 else "")
    return JsonResponse(
        error_body(
            "unknown_parameter",
            f"unknown query parameter{'s' if len(names) > 1 else ''}: {shown}; "
            f"this operation takes {listed}",
            {name[:100]: [problem] for name in names},
        ),
        status=400,
    )


class QueryParameterCheck:
    """Refuse an API read whose query string names a parameter it does not document."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., Any],
        view_args: Any,
        view_kwargs: Any,
    ) -> HttpResponse | None:
        if request.method not in READS or not request.GET:
            return None
        view_class = getattr(view_func, "cls", None)
        if not request.path.startswith(API_PREFIX) or not isinstance(view_class, type):
            return None
        if not issubclass(view_class, APIView) or not hasattr(view_class, "get"):
            return None  # not a read this view serves: DRF's 405 says so
        taken = query_parameters_taken(view_class, request.method)
        unknown = sorted(set(request.GET) - taken)
        return unknown_parameters_response(unknown, taken) if unknown else None
