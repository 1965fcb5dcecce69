"""Requests, shared by the sync and async clients: configuration, how each call is
built, retries with backoff (honouring ``Retry-After``) and error mapping."""

from __future__ import annotations

import asyncio
import email.utils
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar
from urllib.parse import quote

import httpx

from memorydesk._wire import WIRE_ERRORS, Wire, json_body, wire_usable
from memorydesk.errors import MemoryDeskError, TransportError, error_for

T = TypeVar("T")

RETRY_STATUSES = frozenset({429, 502, 503, 504})
MAX_RETRY_AFTER = 60.0
DEFAULT_TIMEOUT = 30.0


@dataclass(frozen=True)
class Config:
    """Where and as whom: arguments first, then ``MEMORY_DESK_URL``,
    ``MEMORY_DESK_TOKEN`` and ``MEMORY_DESK_CONTEXT``."""

    url: str
    token: str
    context: str
    timeout: float = DEFAULT_TIMEOUT
    max_retries: int = 3
    backoff: float = 0.5

    @classmethod
    def resolve(
        cls,
        *,
        url: str | None,
        token: str | None,
        context: str | None,
        timeout: float | None,
        max_retries: int | None,
        backoff: float | None = None,
    ) -> Config:
        url = url or os.environ.get("MEMORY_DESK_URL")
        token = token or os.environ.get("MEMORY_DESK_TOKEN")
        context = context or os.environ.get("MEMORY_DESK_CONTEXT")
        missing = [
            name
            for name, value in (
                ("url (MEMORY_DESK_URL)", url),
                ("token (MEMORY_DESK_TOKEN)", token),
                ("context (MEMORY_DESK_CONTEXT)", context),
            )
            if not value
        ]
        if missing:
            raise ValueError("Memory Desk client needs " + ", ".join(missing))
        assert url and token and context
        return cls(
            url=url.rstrip("/"),
            token=token,
            context=context,
            timeout=DEFAULT_TIMEOUT if timeout is None else timeout,
            max_retries=3 if max_retries is None else max_retries,
            backoff=0.5 if backoff is None else backoff,
        )

    @property
    def context_url(self) -> str:
        return f"{self.url}/api/v1/contexts/{quote(self.context, safe='')}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Token {self.token}", "Accept": "application/json"}


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and how to read its answer. ``path`` is below the context
    (``facts/3``) unless it starts with ``/`` or is a full URL (a next page)."""

    method: str
    path: str
    parse: Callable[[Any], T]
    params: Any = None
    json: Any = None
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def url(self, config: Config) -> str:
        if self.path.startswith(("http://", "https://")):
            return self.path
        if self.path.startswith("/"):
            return config.url + self.path
        return f"{config.context_url}/{self.path}" if self.path else config.context_url


class _Response(Protocol):
    """What the client reads of an answer: httpx's ``Response`` or the wire's ``Answer``."""

    @property
    def status_code(self) -> int: ...
    @property
    def headers(self) -> Any: ...
    @property
    def content(self) -> bytes: ...
    @property
    def text(self) -> str: ...
    def json(self) -> Any: ...


def _retry_after(response: _Response) -> float | None:
    header = response.headers.get("Retry-After")
    if not header:
        return None
    try:
        return max(0.0, float(header))
    except ValueError:
        when = email.utils.parsedate_to_datetime(header)
        return max(0.0, when.timestamp() - time.time()) if when else None


def _delay(config: Config, attempt: int, retry_after: float | None) -> float:
    if retry_after is not None:
        return min(retry_after, MAX_RETRY_AFTER)
    return config.backoff * (2**attempt) * (0.5 + random.random())


def _answer(call: Call[T], response: _Response) -> T:
    if response.status_code >= 400:
        try:
            body: Any = response.json()
        except ValueError:
            body = response.text
        raise error_for(response.status_code, body, retry_after=_retry_after(response))
    if response.status_code == 204 or not response.content:
        return call.parse(None)
    if response.headers.get("content-type", "").startswith("application/json"):
        return call.parse(response.json())
    return call.parse(response.text)


def _request_args(config: Config, call: Call[Any]) -> dict[str, Any]:
    args: dict[str, Any] = {
        "method": call.method,
        "url": call.url(config),
        "params": call.params,
        "headers": call.headers or None,
    }
    if call.content is not None:
        args["content"] = call.content
    elif call.json is not None or call.method in ("POST", "PUT", "PATCH"):
        args["json"] = call.json if call.json is not None else {}
    return args


class SyncTransport:
    """Calls with retries. Without an ``httpx.Client`` of the caller's, a plain-HTTP
    server is reached through the wire (``memorydesk._wire``: the standard library's
    HTTP, a third of httpx's cost per call); anything else through httpx."""

    def __init__(self, config: Config, http: httpx.Client | None = None) -> None:
        self.config = config
        self.wire: Wire | None = None
        if http is None and wire_usable(config.url):
            self.wire = Wire(config.url, headers=config.headers, timeout=config.timeout)
            self.http = None
        else:
            self.http = http or httpx.Client(headers=config.headers, timeout=config.timeout)
            if http is not None:
                self.http.headers.update(config.headers)

    def run(self, call: Call[T]) -> T:
        attempt = 0
        while True:
            try:
                response = self._send(call)
            except (httpx.TransportError, *WIRE_ERRORS) as exc:
                if attempt >= self.config.max_retries:
                    raise TransportError(f"{type(exc).__name__}: {exc}") from exc
                time.sleep(_delay(self.config, attempt, None))
                attempt += 1
                continue
            if response.status_code in RETRY_STATUSES and attempt < self.config.max_retries:
                time.sleep(_delay(self.config, attempt, _retry_after(response)))
                attempt += 1
                continue
            return _answer(call, response)

    def _send(self, call: Call[Any]) -> _Response:
        args = _request_args(self.config, call)
        if self.wire is None:
            assert self.http is not None
            return self.http.request(**args)
        headers = dict(args["headers"] or {})
        content = args.get("content")
        if "json" in args:
            content = json_body(args["json"])
            headers.setdefault("Content-Type", "application/json")
        return self.wire.request(
            args["method"], args["url"], params=args["params"], content=content, headers=headers
        )

    def close(self) -> None:
        if self.wire is not None:
            self.wire.close()
        if self.http is not None:
            self.http.close()


class AsyncTransport:
    def __init__(self, config: Config, http: httpx.AsyncClient | None = None) -> None:
        self.config = config
        self.http = http or httpx.AsyncClient(headers=config.headers, timeout=config.timeout)
        if http is not None:
            self.http.headers.update(config.headers)

    async def run(self, call: Call[T]) -> T:
        attempt = 0
        while True:
            try:
                response = await self.http.request(**_request_args(self.config, call))
            except httpx.TransportError as exc:
                if attempt >= self.config.max_retries:
                    raise TransportError(f"{type(exc).__name__}: {exc}") from exc
                await asyncio.sleep(_delay(self.config, attempt, None))
                attempt += 1
                continue
            if response.status_code in RETRY_STATUSES and attempt < self.config.max_retries:
                await asyncio.sleep(_delay(self.config, attempt, _retry_after(response)))
                attempt += 1
                continue
            return _answer(call, response)

    async def close(self) -> None:
        await self.http.aclose()


__all__ = ["AsyncTransport", "Call", "Config", "MemoryDeskError", "SyncTransport"]
