"""The clients of ``load_mixed``: threads that each keep one keep-alive connection and send
their next request as soon as the last one answers, picking by weight from ``MIX``."""

from __future__ import annotations

import argparse
import http.client
import json
import random
import re
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlencode

from benchmarks.ingest_throughput import REGISTERED, TYPES, pseudo_name

CTX = "bench-load"
SHARED_SCOPE = "org/bench"
PASSWORD = "bench-" + secrets.token_urlsafe(12)
# Endpoint label → weight in the mix.
MIX = {
    "POST memories (triples, wait)": 15,
    "POST search bm25": 15,
    "POST search hybrid": 15,
    "GET entities": 15,
    "GET facts": 15,
    "GET page overview": 5,
    "GET page entities": 5,
    "GET page search": 5,
}


@dataclass
class Seed:
    token: str
    entities: Sequence[Mapping[str, Any]]  # {"id", "name", "type"} of seeded entities
    queries: list[str]
    counts: dict[str, int]


@dataclass
class Endpoint:
    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    samples: list[str] = field(default_factory=list)


class Client(threading.Thread):
    """One agent-and-curator: a keep-alive connection, requests back to back."""

    def __init__(self, n: int, port: int, data: Seed, deadline: float, stop: threading.Event):
        super().__init__(daemon=True, name=f"client-{n}")
        self.n, self.port, self.data = n, port, data
        self.deadline, self.stop = deadline, stop
        self.rng = random.Random(1000 + n)
        self.stats: dict[str, Endpoint] = {label: Endpoint() for label in MIX}
        self.conn: http.client.HTTPConnection | None = None
        self.session = ""
        self.timeout = 60.0
        self.operations: dict[str, Callable[[], tuple[str, str, Any, bool]]] = {
            "POST memories (triples, wait)": self._ingest,
            "POST search bm25": lambda: self._search("bm25"),
            "POST search hybrid": lambda: self._search("hybrid"),
            "GET entities": self._entities,
            "GET facts": self._facts,
            "GET page overview": lambda: ("GET", f"/c/{CTX}/", None, False),
            "GET page entities": self._entities_page,
            "GET page search": self._search_page,
        }

    # A request: (method, path, JSON body or None, API call?) — API calls carry the token,
    # pages the session cookie.
    def _ingest(self) -> tuple[str, str, Any, bool]:
        scope = self.rng.choice([SHARED_SCOPE, f"{SHARED_SCOPE}/agent{self.n}"])
        return "POST", f"/api/v1/contexts/{CTX}/memories", {
            "text": "", "scope": scope, "infer": "triples", "wait": True,
            "triples": self._triples(),
        }, True  # fmt: skip

    def _triples(self) -> dict[str, Any]:
        """Two seeded entities (shared with every other writer) and two new ones; five
        relations, three attributes (one single-valued: current_title), two actions."""
        known = self.rng.sample(self.data.entities, 2)
        new = [{"name": pseudo_name(self.rng), "type": self.rng.choice(TYPES)} for _ in "ab"]
        entities = [{"name": e["name"], "type": e["type"]} for e in known] + new
        names = [e["name"] for e in entities]
        return {
            "entities": entities,
            "relations": [
                {"subject": self.rng.choice(names), "predicate": self.rng.choice(REGISTERED),
                 "object": self.rng.choice(names)}
                for _ in range(5)
            ],
            "attributes": [
                {"subject": known[0]["name"], "key": "current_title",
                 "value": f"title {self.rng.randint(1, 50)}"},
                *({"subject": self.rng.choice(names), "key": f"attr_{self.rng.randint(0, 9)}",
                   "value": f"value {self.rng.randint(1, 1000)}"} for _ in range(2)),
            ],
            "actions": [
                {"subject": self.rng.choice(names), "verb": f"did_{self.rng.randint(0, 9)}",
                 "object": self.rng.choice(names)}
                for _ in range(2)
            ],
        }  # fmt: skip

    def _search(self, mode: str) -> tuple[str, str, Any, bool]:
        target = self.rng.choice(["chunks", "chunks", "facts", "entities"])
        query = (
            self.rng.choice(self.data.queries)
            if target == "chunks"
            else self.rng.choice(self.data.entities)["name"].split()[0]
        )
        body = {"query": query, "mode": mode, "k": 10, "target": target}
        return "POST", f"/api/v1/contexts/{CTX}/search", body, True

    def _entities(self) -> tuple[str, str, Any, bool]:
        params = (
            {"q": self.rng.choice(self.data.entities)["name"][:4]}
            if self.rng.random() < 0.5
            else {}
        )
        return "GET", f"/api/v1/contexts/{CTX}/entities?{urlencode(params)}", None, True

    def _facts(self) -> tuple[str, str, Any, bool]:
        params = (
            {"subject": self.rng.choice(self.data.entities)["id"]}
            if self.rng.random() < 0.5
            else {"predicate": self.rng.choice(REGISTERED)}
        )
        return "GET", f"/api/v1/contexts/{CTX}/facts?{urlencode(params)}", None, True

    def _entities_page(self) -> tuple[str, str, Any, bool]:
        params = (
            {"q": self.rng.choice(self.data.entities)["name"][:4]}
            if self.rng.random() < 0.5
            else {}
        )
        return "GET", f"/c/{CTX}/entities/?{urlencode(params)}", None, False

    def _search_page(self) -> tuple[str, str, Any, bool]:
        params = {"q": self.rng.choice(self.data.queries), "mode": "hybrid", "target": "chunks"}
        return "GET", f"/c/{CTX}/search/?{urlencode(params)}", None, False

    def _send(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        try:
            self.conn.request(method, path, body=body, headers=headers)
            response = self.conn.getresponse()
            data = response.read()
        except BaseException:
            self.conn.close()
            self.conn = None
            raise
        if response.will_close:
            self.conn.close()
            self.conn = None
        return response.status, response.headers, data

    def login(self) -> None:
        """The login form, as a browser submits it: CSRF cookie and token, then POST."""
        status, headers, page = self._send("GET", "/accounts/login/", None, {})
        csrf = _cookies(headers)["csrftoken"]
        match = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        if status != 200 or match is None:
            raise RuntimeError(f"login page answered {status}")
        form = urlencode(
            {"username": "bench-curator", "password": PASSWORD,
             "csrfmiddlewaretoken": match.group(1).decode()}
        ).encode()  # fmt: skip
        status, headers, _ = self._send(
            "POST", "/accounts/login/", form,
            {"Content-Type": "application/x-www-form-urlencoded", "Cookie": f"csrftoken={csrf}"},
        )  # fmt: skip
        self.session = _cookies(headers).get("sessionid", "")
        if status != 302 or not self.session:
            raise RuntimeError(f"login answered {status} without a session")

    def run(self) -> None:
        labels, weights = list(MIX), list(MIX.values())
        while not self.stop.is_set() and time.monotonic() < self.deadline:
            label = self.rng.choices(labels, weights)[0]
            method, path, payload, api = self.operations[label]()
            headers = (
                {"Authorization": f"Token {self.data.token}"}
                if api
                else {"Cookie": f"sessionid={self.session}"}
            )
            body = None
            if payload is not None:
                body = json.dumps(payload).encode()
                headers["Content-Type"] = "application/json"
            self._record(label, method, path, body, headers)

    def _record(
        self, label: str, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> None:
        stats = self.stats[label]
        started = time.perf_counter()
        status, problem = 0, ""
        try:
            status, _, data = self._send(method, path, body, headers)
            if not 200 <= status < 300:
                problem = f"{status}: {data[:300]!r}"
            elif label.startswith("POST memories"):
                run = json.loads(data)["run"]
                if run["outcome"] not in ("succeeded", "succeeded_with_warnings"):
                    problem = f"run {run['id']} {run['outcome']}: {run['error'][:300]}"
        except Exception as exc:
            problem = f"{type(exc).__name__}: {exc}"
        stats.latencies_ms.append((time.perf_counter() - started) * 1000)
        stats.statuses[str(status or "exception")] += 1
        if problem:
            stats.errors += 1
            if len(stats.samples) < 5:
                stats.samples.append(problem)


def _cookies(headers: http.client.HTTPMessage) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    for header in headers.get_all("Set-Cookie") or []:
        jar.load(header)
    return {name: morsel.value for name, morsel in jar.items()}


def traffic(args: argparse.Namespace, port: int, data: Seed) -> tuple[list[Client], float]:
    """Run the clients for ``args.duration`` seconds; the clients and the elapsed time."""
    stop = threading.Event()
    clients = [Client(n, port, data, 0.0, stop) for n in range(args.clients)]
    for client in clients:
        client.login()
    started = time.monotonic()
    for client in clients:
        client.deadline = started + args.duration
        client.start()
    try:
        for client in clients:
            while client.is_alive():
                client.join(timeout=0.5)
    finally:
        stop.set()
    return clients, time.monotonic() - started
