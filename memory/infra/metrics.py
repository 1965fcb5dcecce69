"""The instruments measured as things happen, per process (prometheus-client): request
latency per endpoint (URL name) and method, search latency per mode and target. The
``/metrics`` view that exposes them, with the gauges read from the database at each
scrape, is ``memory.api.metrics``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from prometheus_client import Histogram

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

REQUEST_SECONDS = Histogram(
    "memory_request_seconds",
    "Time to answer a request, per endpoint (URL name), method and status class",
    ["endpoint", "method", "status"],
    buckets=LATENCY_BUCKETS,
)
SEARCH_SECONDS = Histogram(
    "memory_search_seconds",
    "Time of one search in the selector (embedding the query included), per mode and target",
    ["mode", "target"],
    buckets=LATENCY_BUCKETS,
)


class RequestMetricsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        match: Any = getattr(request, "resolver_match", None)
        endpoint = (match.url_name or match.view_name) if match else "unmatched"
        REQUEST_SECONDS.labels(
            endpoint=endpoint, method=request.method, status=f"{response.status_code // 100}xx"
        ).observe(time.perf_counter() - started)
        return response
