"""What every reconciliation endpoint shares: who asks (the API token header, a
dashboard session, or a read-only key in the path), CORS on every answer, the key's
throttle, the service's own URL, and the readers of request values they all use."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.urls import reverse
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from memory.api.common import access_for
from memory.domain.access import ContextAccess
from memory.kernel.errors import NotFound, ValidationFailed
from memory.kernel.scopes import Grants
from memory.models import ApiToken, Role, TokenPurpose
from memory.services.tokens import token_authenticate
from memory.web.throttling import RateBudget

CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
    "Access-Control-Allow-Headers": "Authorization, Content-Type",
    "Access-Control-Max-Age": "86400",
}


class ReconcileKeyThrottle(RateBudget):
    """Requests through one reconciliation key (OpenRefine sends a batch of 10 rows a
    request: the anonymous rate would stall it)."""

    scope = "reconcile_key"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        key = view.kwargs.get("key")
        return f"throttle_reconcile_{ApiToken.digest_of(key)[:32]}" if key else None


class ReconcileView(APIView):
    """Shared: who is asking (header or key), CORS, the service's URLs."""

    parser_classes = [JSONParser, FormParser, MultiPartParser]

    def get_authenticators(self) -> list[Any]:
        if self.kwargs.get("key"):
            return []  # the key in the path is the credential, and the only one
        return super().get_authenticators()

    def get_permissions(self) -> Sequence[Any]:
        if self.kwargs.get("key") or self.request.method == "OPTIONS":
            return [AllowAny()]  # a CORS preflight carries no credentials
        return super().get_permissions()

    def get_throttles(self) -> list[BaseThrottle]:
        if self.kwargs.get("key"):
            return [ReconcileKeyThrottle()]
        return super().get_throttles()

    def options(self, request: Any, *args: Any, **kwargs: Any) -> Response:
        return Response(status=204)

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)
        for name, value in CORS_HEADERS.items():
            response[name] = value
        return response

    def access(self, request: Request, ctx: str) -> ContextAccess:
        key = self.kwargs.get("key")
        if not key:
            return access_for(request, ctx)
        return reconcile_key_access(ctx, key)

    def base_url(self, request: Request, ctx: str) -> str:
        key = self.kwargs.get("key")
        if key:
            path = reverse("api-reconcile-key", kwargs={"ctx": ctx, "key": key})
        else:
            path = reverse("api-reconcile", kwargs={"ctx": ctx})
        return request.build_absolute_uri(path)


def reconcile_key_access(ctx: str, key: str) -> ContextAccess:
    """The read-only access a reconciliation key grants (404 for any key that is not a
    live one of this context: a wrong key tells nothing)."""
    token = token_authenticate(key, purpose=TokenPurpose.RECONCILE, context_slug=ctx)
    if token is None:
        raise NotFound(f"context {ctx[:100]!r} not found", code="context_not_found")
    read_only = [g for g in Grants.from_strings(token.grants).items if g.access == "read"]
    return ContextAccess(
        context=token.context, user=token.user, role=Role.VIEWER, grants=Grants(tuple(read_only))
    )


def json_object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValidationFailed(f"{what} must be a JSON object", code="invalid_query")
    return value


def int_param(request: Request, name: str, default: int, most: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= most:
        raise ValidationFailed(f"{name} must be 1–{most}", code=f"invalid_{name}")
    return int(raw)


def type_ref(type_: str) -> dict[str, str]:
    return {"id": type_, "name": type_}
