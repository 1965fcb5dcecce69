"""A scripted OpenAI-compatible HTTP server for tests: the LLM is never mocked in-process.

It serves ``POST /v1/chat/completions`` from a queue of scripted answers (JSON content,
raw text, an HTTP error, a slow answer) and ``POST /v1/embeddings`` with deterministic
character-trigram vectors (similar spellings get similar vectors). Every request body is
recorded, so tests assert on the prompts the server actually received. Point
``OPENAI_BASE_URL`` at ``server.base_url``.
"""

from __future__ import annotations

import hashlib
import json
import math
import select
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DIMENSIONS = 384


@dataclass
class Scripted:
    status: int = 200
    content: str | None = None  # the assistant message (chat answers)
    body: dict[str, Any] | None = None  # a raw error body (non-200)
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    prompt_tokens: int = 120
    completion_tokens: int = 40
    # An assistant message that calls tools: [{"name", "arguments"}] (agent tests).
    tool_calls: list[dict[str, Any]] | None = None


class FakeLLM:
    def __init__(self) -> None:
        self._script: deque[Scripted] = deque()
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []  # {"path", "body"} in arrival order
        self.json_schema_supported = True
        self._server: ThreadingHTTPServer | None = None

    # --- lifecycle -----------------------------------------------------------------------

    def start(self) -> FakeLLM:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        server.daemon_threads = True
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self.requests.clear()
            self.json_schema_supported = True

    # --- scripting -----------------------------------------------------------------------

    def reply_json(self, answer: dict[str, Any], **kwargs: Any) -> None:
        self.reply_text(json.dumps(answer), **kwargs)

    def reply_text(self, content: str, *, times: int = 1, **kwargs: Any) -> None:
        for _ in range(times):
            self._push(Scripted(content=content, **kwargs))

    def reply_tool_call(self, name: str, arguments: dict[str, Any]) -> None:
        """Answer with an assistant message calling the tool ``name`` (an agent's step)."""
        self._push(Scripted(tool_calls=[{"name": name, "arguments": arguments}]))

    def reply_status(self, status: int, *, times: int = 1, message: str = "scripted error") -> None:
        # Retry hints in milliseconds keep the SDK's backoff short in tests.
        for _ in range(times):
            self._push(
                Scripted(
                    status=status,
                    body={"error": {"message": message, "type": "server_error"}},
                    headers={"retry-after-ms": "10"},
                )
            )

    def reply_slow(self, seconds: float, answer: dict[str, Any], *, times: int = 1) -> None:
        for _ in range(times):
            self._push(Scripted(content=json.dumps(answer), delay=seconds))

    def _push(self, item: Scripted) -> None:
        with self._lock:
            self._script.append(item)

    def _pop(self) -> Scripted | None:
        with self._lock:
            return self._script.popleft() if self._script else None

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._script)

    # --- what was received ---------------------------------------------------------------

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r["body"] for r in self.requests if r["path"].endswith("/chat/completions")]

    @property
    def embedding_requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r["body"] for r in self.requests if r["path"].endswith("/embeddings")]

    def _record(self, path: str, body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append({"path": path, "body": body})


def fake_embedding(text: str) -> list[float]:
    """A unit vector from hashed character trigrams: close spellings, close vectors."""
    vector = [0.0] * DIMENSIONS
    padded = f"  {text.lower()}  "
    for i in range(len(padded) - 2):
        digest = hashlib.blake2b(padded[i : i + 3].encode(), digest_size=8).digest()
        slot = int.from_bytes(digest[:4], "big") % DIMENSIONS
        vector[slot] += 1.0 if digest[4] % 2 == 0 else -1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


def _message(item: Scripted) -> dict[str, Any]:
    if not item.tool_calls:
        return {"role": "assistant", "content": item.content}
    calls = [
        {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])},
        }
        for i, call in enumerate(item.tool_calls)
    ]
    return {"role": "assistant", "content": item.content, "tool_calls": calls}


def _handler_for(fake: FakeLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {"_unparsed": raw.decode("utf-8", "replace")}
            fake._record(self.path, body)
            if self.path.endswith("/embeddings"):
                self._embeddings(body)
            elif self.path.endswith("/chat/completions"):
                self._chat(body)
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def _embeddings(self, body: dict[str, Any]) -> None:
            texts = body.get("input") or []
            texts = [texts] if isinstance(texts, str) else texts
            data = [
                {"object": "embedding", "index": i, "embedding": fake_embedding(str(t))}
                for i, t in enumerate(texts)
            ]
            self._send(
                200,
                {
                    "object": "list",
                    "data": data,
                    "model": body.get("model", "fake-embed"),
                    "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
                },
            )

        def _chat(self, body: dict[str, Any]) -> None:
            response_format = body.get("response_format") or {}
            if not fake.json_schema_supported and response_format.get("type") == "json_schema":
                self._send(
                    400,
                    {"error": {"message": "response_format json_schema is not supported"}},
                )
                return
            item = fake._pop()
            if item is None:
                # Unscripted: an error no client retries, so the test fails loudly.
                self._send(418, {"error": {"message": "the fake LLM has no scripted answer"}})
                return
            if item.delay and not self._wait_unless_client_leaves(item.delay):
                self.close_connection = True
                return
            if item.status != 200:
                self._send(item.status, item.body or {}, headers=item.headers)
                return
            self._send(
                200,
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", "fake"),
                    "choices": [
                        {
                            "index": 0,
                            "message": _message(item),
                            "finish_reason": "tool_calls" if item.tool_calls else "stop",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": item.prompt_tokens,
                        "completion_tokens": item.completion_tokens,
                        "total_tokens": item.prompt_tokens + item.completion_tokens,
                    },
                },
            )

        def _wait_unless_client_leaves(self, seconds: float) -> bool:
            """Sleep, but notice a client that gave up or died (closing at once, so its
            connection does not linger half-open); False when it left."""
            deadline = time.monotonic() + seconds
            while (left := deadline - time.monotonic()) > 0:
                readable, _, _ = select.select([self.connection], [], [], min(left, 0.05))
                if readable and not self.connection.recv(1, socket.MSG_PEEK):
                    return False
            return True

        def _send(
            self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
        ) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test): nothing to answer

    return Handler
