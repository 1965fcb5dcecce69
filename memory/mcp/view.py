"""``/mcp``: the MCP streamable-HTTP endpoint, a Django view in the web process.

A DRF view, so the token is checked exactly as for the REST API (``ApiTokenAuthentication``,
the same throttles, the same JSON error shape, 401 before any MCP message is read), and
the token's context and grants become the access every tool acts with.

The request itself is handed to the SDK's streamable-HTTP transport in stateless,
JSON-response mode: each POST is one JSON-RPC exchange with no server-side session, so
any web process (and any gunicorn worker) can answer any request, and WSGI serves it
like any other view. The SDK's coroutine runs in an event loop of this request's own,
on this request's thread, and the tools run inline in it (``memory.mcp.tools``): no
thread hands the request to another, so a tool uses the request's database connection
and its request cycle, and a loaded machine adds no scheduling waits (docs/decisions/0052).
"""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from typing import Any

import anyio
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from drf_spectacular.utils import extend_schema
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from memory.domain.access import ContextAccess, context_access_resolve
from memory.mcp.server import mcp_protocol_server
from memory.mcp.tools import bind_access
from memory.models import ApiToken
from memory.web.authentication import ApiTokenAuthentication
from memory.web.errors import error_body


class _AnyAccept(BaseContentNegotiation):
    """MCP clients accept ``application/json, text/event-stream``; the SDK answers them.
    DRF's errors (401, 429) are JSON whatever the Accept header says."""

    def select_parser(self, request: Any, parsers: Any) -> Any:
        return None

    def select_renderer(self, request: Any, renderers: Any, format_suffix: Any = None) -> Any:
        return (JSONRenderer(), JSONRenderer.media_type)


class McpEndpoint(APIView):
    authentication_classes = [ApiTokenAuthentication]  # a token names one context
    permission_classes = [IsAuthenticated]
    content_negotiation_class = _AnyAccept
    parser_classes: list[Any] = []

    @extend_schema(exclude=True)
    def post(self, request: Request) -> HttpResponse:
        return _serve(request)

    @extend_schema(exclude=True)
    def get(self, request: Request) -> HttpResponse:
        return _serve(request)  # the transport answers 405: no stream without a session

    @extend_schema(exclude=True)
    def delete(self, request: Request) -> HttpResponse:
        return _serve(request)


def _serve(request: Request) -> HttpResponse:
    token = request.auth
    assert isinstance(token, ApiToken)  # the only authentication class
    access = context_access_resolve(user=request.user, slug=token.context.slug, token=token)
    django_request: HttpRequest = request._request
    try:
        body = django_request.body
    except RequestDataTooBig:
        return JsonResponse(
            error_body("too_large", "the request body is larger than MEMORY_MAX_REQUEST_BYTES"),
            status=413,
        )
    status, headers, content = _on_this_thread(access, _asgi_scope(django_request), body)
    response = HttpResponse(content, status=status)
    for name, value in headers:
        if name.lower() not in ("content-length", "connection"):
            response[name] = value
    return response


def _asgi_scope(request: HttpRequest) -> dict[str, Any]:
    headers = [
        (name.lower().encode("latin-1"), value.encode("latin-1"))
        for name, value in request.headers.items()
        if name.lower() != "content-length"
    ]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.path.encode("utf-8"),
        "root_path": "",
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "headers": headers,
        "client": (request.META.get("REMOTE_ADDR", ""), 0),
        "server": (request.get_host(), int(request.get_port() or 0)),
    }


def _on_this_thread(
    access: ContextAccess, scope: dict[str, Any], body: bytes
) -> tuple[int, list[tuple[str, str]], bytes]:
    """Run the exchange to its end in a new event loop on this thread (WSGI threads have
    none running). The loop lives for this request only, like the SDK objects in it."""
    with asyncio.Runner() as runner:
        return runner.run(_exchange(access, scope, body))


async def _exchange(
    access: ContextAccess, scope: dict[str, Any], body: bytes
) -> tuple[int, list[tuple[str, str]], bytes]:
    """One HTTP exchange through the SDK's transport; its answer collected for Django."""
    bind_access(access)
    sent_body = False
    answered = anyio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": body, "more_body": False}
        # Asked again only to watch for a disconnect: the client is there until answered.
        await answered.wait()
        return {"type": "http.disconnect"}

    status = 500
    headers: list[tuple[str, str]] = []
    chunks: list[bytes] = []

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            headers.extend(
                (k.decode("latin-1"), v.decode("latin-1")) for k, v in message["headers"]
            )
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                answered.set()

    # Stateless: a manager per exchange costs a few objects; it must run in this event
    # loop, which lives only as long as the request.
    manager = StreamableHTTPSessionManager(
        app=mcp_protocol_server(), json_response=True, stateless=True
    )
    async with manager.run():
        await manager.handle_request(scope, receive, send)
    return status, headers, b"".join(chunks)
