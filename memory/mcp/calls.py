"""How an MCP tool runs: with the access of the request's token, inline on the request's
thread, its answer or its error turned into a ``CallToolResult``.

The SDK builds each tool's JSON schema from its signature (the ``Field`` descriptions in
``memory.mcp.arguments``) and validates arguments against it; the services then validate
what the schema cannot say (scope syntax, predicate text, budgets) and refuse writes
outside the token's grants.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.db import DataError, IntegrityError
from mcp_types import CallToolResult, TextContent

from memory.domain.access import ContextAccess
from memory.infra.transactions import write_conflicted, write_contention
from memory.kernel.errors import DomainError
from memory.kernel.scopes import ScopeError

logger = logging.getLogger(__name__)

_access: ContextVar[ContextAccess] = ContextVar("mcp_access")

ToolAnswer = dict[str, Any] | tuple[str, dict[str, Any]]


def current_access() -> ContextAccess:
    """The access of the token this MCP request came with (set by the view)."""
    return _access.get()


def bind_access(access: ContextAccess) -> None:
    _access.set(access)


def as_tool(fn: Callable[..., ToolAnswer]) -> Callable[..., Any]:
    """Run ``fn`` inline, on the request's thread, and turn its answer, or a domain error,
    into a tool result. A tool error is a result with ``isError``, never a protocol error:
    the agent reads the message and corrects itself."""

    @functools.wraps(fn)
    async def call(**kwargs: Any) -> CallToolResult:
        with _loop_detached():
            return _run(fn, kwargs)

    return call


@contextmanager
def _loop_detached() -> Iterator[None]:
    """Let synchronous Django code run inside the request's private event loop.

    The view runs each exchange in a loop of its own on the request's thread, and the
    tool is the only thing that loop is waiting for, so blocking it costs nothing. Django
    refuses database work while a loop runs in the thread (a guard against blocking a
    shared ASGI loop); the loop is unset for the call and set back after it, instead of
    handing the call to another thread and back (two waits for a busy CPU each time)."""
    loop = asyncio.events._get_running_loop()
    asyncio.events._set_running_loop(None)
    try:
        yield
    finally:
        asyncio.events._set_running_loop(loop)


def _encoded(data: Any) -> tuple[str, Any]:
    """``data`` as JSON text and as the plain values that text holds (dates, decimals and
    ids as the API writes them): one encoding serves the text and the structure."""
    text = json.dumps(data, cls=DjangoJSONEncoder, ensure_ascii=False)
    return text, json.loads(text)


def _run(fn: Callable[..., Any], kwargs: dict[str, Any]) -> CallToolResult:
    try:
        answer = fn(**kwargs)
    except DomainError as exc:
        return _error(exc.code, exc.message, exc.details)
    except ScopeError as exc:
        return _error("invalid_scope", str(exc))
    except DjangoValidationError as exc:
        return _error("invalid", "validation failed", exc.messages)
    except (IntegrityError, DataError) as exc:
        logger.warning("database refused a write from an MCP tool: %s", exc)
        return _error("constraint_violation", "the database refused this write")
    except Exception as exc:
        if write_conflicted(exc):  # rolled back as a whole: the agent may send it again
            refusal = write_contention(exc)
            return _error(refusal.code, refusal.message, refusal.details)
        logger.exception("MCP tool %s failed", fn.__name__)
        return _error("server_error", "internal error; it has been logged")
    prompt, data = answer if isinstance(answer, tuple) else (None, answer)
    encoded, plain = _encoded(data)
    text = prompt if prompt is not None else encoded  # get_context's text is the block
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=plain)


def error_text(code: str, message: str, details: Any = None) -> str:
    """A tool error's text: the API's error body, as JSON."""
    return _encoded({"error": {"code": code, "message": message, "details": details}})[0]


def _error(code: str, message: str, details: Any = None) -> CallToolResult:
    text, error = _encoded({"error": {"code": code, "message": message, "details": details}})
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=error, is_error=True
    )
