"""/metrics: Prometheus' text format, for a staff session or the bearer secret only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from memory.models import Context

pytestmark = pytest.mark.django_db


def _sample(text: str, name: str, **labels: str) -> float:
    """The value of one sample line (the labels given must all match)."""
    for line in text.splitlines():
        named = line.startswith((name + "{", name + " "))
        if named and all(f'{key}="{value}"' in line for key, value in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no sample {name} {labels} in the metrics")


@pytest.mark.parametrize("authorization", [None, "Bearer wrong", "Token s3cret-metrics"])
def test_refused_without_the_secret_or_a_staff_session(
    settings: Any, authorization: str | None
) -> None:
    settings.MEMORY_METRICS_TOKEN = "s3cret-metrics"
    headers: dict[str, Any] = {"HTTP_AUTHORIZATION": authorization} if authorization else {}
    response = Client().get("/metrics", **headers)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"


def test_no_secret_configured_means_no_bearer_access(settings: Any) -> None:
    settings.MEMORY_METRICS_TOKEN = ""
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 401


def test_a_member_who_is_not_staff_is_refused(
    context: Context, make_user: Callable[..., Any]
) -> None:
    browser = Client()
    browser.force_login(make_user(context=context))
    assert browser.get("/metrics").status_code == 401


def test_metrics_count_requests_searches_runs_and_the_queue(
    settings: Any, context: Context, api_client_for: Callable[..., APIClient]
) -> None:
    settings.MEMORY_METRICS_TOKEN = "s3cret-metrics"
    api = api_client_for(context)
    base = f"/api/v1/contexts/{context.slug}"
    scrape = Client()
    before = scrape.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-metrics").content.decode()
    searched = api.post(f"{base}/search", {"query": "anything", "mode": "bm25"}, format="json")
    assert searched.status_code == 200
    response = scrape.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    text = response.content.decode()

    def searches(body: str) -> float:
        try:
            return _sample(body, "memory_search_seconds_count", mode="bm25", target="chunks")
        except AssertionError:
            return 0.0

    assert searches(text) == searches(before) + 1
    assert _sample(text, "memory_request_seconds_count", endpoint="api-search", status="2xx") >= 1
    assert _sample(text, "memory_task_queue_depth") >= 0
    assert "memory_embedding_backlog" in text and "memory_ingest_runs" in text


def test_a_staff_session_reads_them(make_user: Callable[..., Any]) -> None:
    staff = make_user()
    staff.is_staff = True
    staff.save()
    browser = Client()
    browser.force_login(staff)
    response = browser.get("/metrics")
    assert response.status_code == 200 and b"memory_request_seconds" in response.content
