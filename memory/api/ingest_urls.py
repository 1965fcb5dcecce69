"""Routes under /api/v1/contexts/<ctx>/ for memories, runs and vocabulary."""

from __future__ import annotations

from django.urls import URLPattern, path

from memory.api import ingest_api

urlpatterns: list[URLPattern] = [
    path("memories", ingest_api.MemoryCreateApi.as_view(), name="api-memories"),
    path("runs", ingest_api.RunListApi.as_view(), name="api-runs"),
    path("runs/<int:run_id>", ingest_api.RunDetailApi.as_view(), name="api-run"),
    path("runs/<int:run_id>/retry", ingest_api.RunRetryApi.as_view(), name="api-run-retry"),
    path("runs/<int:run_id>/retract", ingest_api.RunRetractApi.as_view(), name="api-run-retract"),
    path("vocabulary", ingest_api.VocabularyApi.as_view(), name="api-vocabulary"),
]
