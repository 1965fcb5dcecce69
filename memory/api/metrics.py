"""``/metrics`` in Prometheus' text format (prometheus-client).

Measured as they happen, per process (``memory.infra.metrics``): request latency per endpoint
(URL name) and method, search latency per mode and target. Read from the database at each
scrape: ingest runs per outcome, the task queue's depth, the embedding backlog, each
replica's lag.

With several gunicorn processes set ``PROMETHEUS_MULTIPROC_DIR`` to an empty folder
shared by them (docs/DEPLOY.md "Monitoring"): each process writes its samples there and
any one answers for all.

Guarded: a staff session, or ``Authorization: Bearer $MEMORY_METRICS_TOKEN``.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Iterator

from django.conf import settings
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, JsonResponse
from django_tasks_db.models import DBTaskResult
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import REGISTRY, Collector

from memory.infra.replicas import replica_aliases, replica_health
from memory.models import Run
from memory.services.vectors import embedding_backlog


class DatabaseCollector(Collector):
    """Gauges read from the database at scrape time: state, not events."""

    def collect(self) -> Iterator[Metric]:
        runs = GaugeMetricFamily(
            "memory_ingest_runs", "Ingest runs by outcome (all contexts)", labels=["outcome"]
        )
        for row in Run.objects.values("outcome").annotate(n=Count("pk")).order_by():
            runs.add_metric([row["outcome"] or "pending"], row["n"])
        yield runs
        queue = GaugeMetricFamily("memory_task_queue_depth", "Tasks waiting for a worker")
        queue.add_metric([], DBTaskResult.objects.filter(status="READY").count())
        yield queue
        backlog = GaugeMetricFamily(
            "memory_embedding_backlog", "Rows waiting for a vector", labels=["target"]
        )
        for target, waiting in (embedding_backlog() or {}).items():
            backlog.add_metric([target], waiting)
        yield backlog
        lag = GaugeMetricFamily(
            "memory_replica_lag_seconds", "Replay lag of each read replica", labels=["replica"]
        )
        up = GaugeMetricFamily(
            "memory_replica_up", "1 when the replica serves reads", labels=["replica"]
        )
        for alias in replica_aliases():
            health = replica_health(alias)
            up.add_metric([alias], 1.0 if health.state == "ok" else 0.0)
            if health.lag_seconds is not None:
                lag.add_metric([alias], health.lag_seconds)
        yield lag
        yield up


def _registry() -> CollectorRegistry:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        registry = CollectorRegistry()
        registry.register(_ProcessMetrics())
    registry.register(DatabaseCollector())
    return registry


class _ProcessMetrics(Collector):
    """This process's own histograms (the default registry's)."""

    def collect(self) -> Iterator[Metric]:
        yield from REGISTRY.collect()


def metrics_view(request: HttpRequest) -> HttpResponse:
    if not _allowed(request):
        return JsonResponse(
            {
                "error": {
                    "code": "not_authenticated",
                    "message": "metrics need a staff session or Authorization: Bearer "
                    "<MEMORY_METRICS_TOKEN>",
                    "details": None,
                }
            },
            status=401,
            headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
        )
    return HttpResponse(generate_latest(_registry()), content_type=CONTENT_TYPE_LATEST)


def _allowed(request: HttpRequest) -> bool:
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated and user.is_staff:
        return True
    secret = settings.MEMORY_METRICS_TOKEN
    given = request.headers.get("Authorization", "")
    return bool(secret) and hmac.compare_digest(given.encode(), f"Bearer {secret}".encode())
