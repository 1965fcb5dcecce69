"""The chat model, through the ``openai`` SDK against any OpenAI-compatible server.

Contract of ``chat_structured``: temperature 0; a JSON-schema response format, falling back
to ``json_object`` (remembered per server and model) when the server rejects it; the
answer parsed and validated with Pydantic; one repair round when it is not valid; the
SDK's timeout and its retries with exponential backoff (honouring ``Retry-After``) on
408/409/429/5xx and connection errors. Every call's raw text and token counts come back,
on success and on failure, so a run can keep them.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from django.conf import settings
from pydantic import BaseModel, ValidationError

from memory.kernel.errors import DomainError

if TYPE_CHECKING:
    import openai

T = TypeVar("T", bound=BaseModel)

REPAIR_ECHO_CHARS = 8_000  # how much of an invalid answer is shown back to the model
MAX_ERRORS_SHOWN = 8

_schema_rejected: set[tuple[str, str]] = set()
_schema_lock = threading.Lock()


@dataclass(frozen=True)
class ChatCall:
    content: str
    prompt_tokens: int
    completion_tokens: int
    response_format: str  # "json_schema" | "json_object"
    duration_ms: float
    finish_reason: str | None = None


class LLMError(DomainError):
    """The model could not give a usable answer. ``calls`` are the answers it did give."""

    status = 502  # the model answered, but not usably
    code = "llm_error"

    def __init__(
        self, message: str, *, code: str | None = None, calls: list[ChatCall] | None = None
    ) -> None:
        super().__init__(message, code=code)
        self.calls = list(calls or [])


class LLMNotConfigured(LLMError):
    status = 503
    code = "llm_not_configured"


class LLMCallFailed(LLMError):
    code = "llm_call_failed"


class LLMInvalidOutput(LLMError):
    code = "llm_invalid_output"


@dataclass
class StructuredAnswer(Generic[T]):
    value: T
    calls: list[ChatCall] = field(default_factory=list)


def chat_model_configured() -> bool:
    return bool(settings.MEMORY_CHAT_MODEL)


def chat_structured(
    *, messages: list[dict[str, str]], model: type[T], schema_name: str
) -> StructuredAnswer[T]:
    """Ask for a JSON answer matching ``model``; one repair round on an invalid answer.

    Raises LLMNotConfigured, LLMCallFailed (timeout, HTTP error after retries, server
    unreachable) or LLMInvalidOutput (invalid twice); each carries the calls made.
    """
    if not chat_model_configured():
        raise LLMNotConfigured(
            "no chat model is configured: set MEMORY_CHAT_MODEL (and OPENAI_BASE_URL / "
            "OPENAI_API_KEY) to extract with infer=llm"
        )
    schema = model.model_json_schema()
    calls: list[ChatCall] = []
    first = _call(messages=messages, schema_name=schema_name, schema=schema, calls=calls)
    value, problem = _parse(first.content, model)
    if value is not None:
        return StructuredAnswer(value=value, calls=calls)
    repair = [
        *messages,
        {"role": "assistant", "content": first.content[:REPAIR_ECHO_CHARS]},
        {
            "role": "user",
            "content": f"Your answer was not valid: {problem}\n"
            "Answer again with only one JSON object that follows the schema given above.",
        },
    ]
    second = _call(messages=repair, schema_name=schema_name, schema=schema, calls=calls)
    value, second_problem = _parse(second.content, model)
    if value is not None:
        return StructuredAnswer(value=value, calls=calls)
    raise LLMInvalidOutput(
        f"the model's answer was not valid twice (after one repair request): {second_problem}",
        calls=calls,
    )


def _parse(content: str, model: type[T]) -> tuple[T | None, str]:
    text = _strip_fences(content)
    try:
        data = json.loads(text)
    except ValueError as exc:
        shown = text[:60].replace("\n", " ")
        return None, f"it is not JSON ({exc.__class__.__name__}: {exc}; starts {shown!r})"
    if not isinstance(data, dict):
        return None, f"expected a JSON object, got {type(data).__name__}"
    try:
        return model.model_validate(data), ""
    except ValidationError as exc:
        errors = [
            f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}"
            for err in exc.errors()[:MAX_ERRORS_SHOWN]
        ]
        more = exc.error_count() - len(errors)
        return None, "; ".join(errors) + (f" (and {more} more errors)" if more > 0 else "")


def _strip_fences(content: str) -> str:
    """Some servers wrap JSON in a Markdown fence even in JSON mode."""
    text = content.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text.strip()


def _call(
    *,
    messages: list[dict[str, str]],
    schema_name: str,
    schema: dict[str, Any],
    calls: list[ChatCall],
) -> ChatCall:
    import openai  # the SDK takes half a second to import: only a process that calls it

    model_name = settings.MEMORY_CHAT_MODEL
    server = settings.OPENAI_BASE_URL or "https://api.openai.com/v1"
    key = (server, model_name)
    with _schema_lock:
        use_schema = key not in _schema_rejected
    if use_schema:
        response_format: dict[str, Any] = {
            "type": "json_schema",
            "json_schema": {"name": schema_name, "schema": schema, "strict": False},
        }
        try:
            call = _complete(messages=messages, response_format=response_format, calls=calls)
        except (openai.BadRequestError, openai.UnprocessableEntityError):
            # The server does not do JSON schemas (many local servers): JSON mode instead,
            # and do not ask this server again in this process.
            with _schema_lock:
                _schema_rejected.add(key)
        else:
            return call
    return _complete(messages=messages, response_format={"type": "json_object"}, calls=calls)


def _complete(
    *, messages: list[dict[str, str]], response_format: dict[str, Any], calls: list[ChatCall]
) -> ChatCall:
    import openai

    client = _client(
        settings.OPENAI_BASE_URL,
        settings.OPENAI_API_KEY,
        settings.MEMORY_LLM_TIMEOUT_SECONDS,
        settings.MEMORY_LLM_MAX_RETRIES,
    )
    started = time.perf_counter()
    try:
        response = client.chat.completions.create(  # type: ignore[call-overload]
            model=settings.MEMORY_CHAT_MODEL,
            messages=messages,
            temperature=0,
            response_format=response_format,
        )
    except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
        if response_format["type"] == "json_schema":
            raise  # the caller falls back to JSON mode
        raise _failure(exc, calls) from exc
    except openai.OpenAIError as exc:
        raise _failure(exc, calls) from exc
    choice = response.choices[0] if response.choices else None
    usage = response.usage
    call = ChatCall(
        content=(choice.message.content if choice is not None else None) or "",
        prompt_tokens=(usage.prompt_tokens if usage is not None else 0) or 0,
        completion_tokens=(usage.completion_tokens if usage is not None else 0) or 0,
        response_format=response_format["type"],
        duration_ms=round((time.perf_counter() - started) * 1000, 1),
        finish_reason=choice.finish_reason if choice is not None else None,
    )
    calls.append(call)
    return call


def _failure(exc: openai.OpenAIError, calls: list[ChatCall]) -> LLMCallFailed:
    import openai

    tries = settings.MEMORY_LLM_MAX_RETRIES + 1
    timeout = settings.MEMORY_LLM_TIMEOUT_SECONDS
    if isinstance(exc, openai.APITimeoutError):
        return LLMCallFailed(
            f"the chat model did not answer within {timeout:g} s (tried {tries} times)",
            code="llm_timeout",
            calls=calls,
        )
    if isinstance(exc, openai.RateLimitError):
        return LLMCallFailed(
            f"the chat model endpoint kept answering 429 Too Many Requests (tried {tries} times)",
            code="llm_rate_limited",
            calls=calls,
        )
    if isinstance(exc, openai.APIStatusError):
        detail = " ".join(str(exc.message).split())[:200]
        return LLMCallFailed(
            f"the chat model endpoint answered HTTP {exc.status_code}"
            + (f" (tried {tries} times)" if exc.status_code >= 500 else "")
            + f": {detail}",
            code="llm_http_error",
            calls=calls,
        )
    if isinstance(exc, openai.APIConnectionError):
        return LLMCallFailed(
            f"could not reach the chat model at {settings.OPENAI_BASE_URL or 'api.openai.com'} "
            f"(tried {tries} times)",
            code="llm_unreachable",
            calls=calls,
        )
    return LLMCallFailed(f"the chat model call failed: {exc}", calls=calls)


@lru_cache(maxsize=8)
def _client(base_url: str, api_key: str, timeout: float, max_retries: int) -> openai.OpenAI:
    """One SDK client (and connection pool) per configuration."""
    import openai

    return openai.OpenAI(
        api_key=api_key or "not-needed",
        base_url=base_url or None,
        timeout=timeout,
        max_retries=max_retries,
    )
