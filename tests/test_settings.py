"""Production settings: ``check --deploy`` is clean, secrets come only from the
environment, API rate limits are on (in a cache every web process can share)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from rest_framework.test import APIClient

from memory.settings import _cache

PRODUCTION = {
    "MEMORY_HTTPS": "1",
    "DEBUG": "0",
    "ALLOWED_HOSTS": "desk.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://desk.example.com",
    # Parsed, never connected to: the checks below need no database.
    "DATABASE_URL": "postgresql://desk@db.invalid:5432/memorydesk",
}


def _check_deploy(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # DJANGO_ALLOW_ASYNC_UNSAFE is set by the browser tests' fixture (Playwright runs an
    # event loop in the test thread); production never sets it, and check --deploy says so.
    dropped = {"SECRET_KEY", "DEBUG", "DJANGO_ALLOW_ASYNC_UNSAFE"}
    clean = {k: v for k, v in os.environ.items() if k not in dropped}
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=settings.BASE_DIR,
        env={**clean, "DJANGO_SETTINGS_MODULE": "memory.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_the_production_environment() -> None:
    result = _check_deploy({**PRODUCTION, "SECRET_KEY": secrets.token_urlsafe(50)})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_https_without_a_secret_key_in_the_environment_fails_loudly() -> None:
    result = _check_deploy(PRODUCTION)
    assert result.returncode != 0
    assert "set SECRET_KEY in the environment" in result.stderr


def test_an_unknown_cache_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_CACHE", "redis")
    with pytest.raises(ImproperlyConfigured, match="MEMORY_CACHE"):
        _cache()


@pytest.fixture
def database_cache(db: None, settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """MEMORY_CACHE=database, its table created as ``manage.py createcachetable`` does."""
    monkeypatch.setenv("MEMORY_CACHE", "database")
    settings.CACHES = {"default": _cache()}
    call_command("createcachetable", verbosity=0)
    cache.clear()
    yield
    cache.clear()


def test_anonymous_callers_are_rate_limited_through_the_shared_cache(
    database_cache: None,
) -> None:
    # AnonRateThrottle, 120/min by default (MEMORY_API_RATE_ANON); /health is the one API
    # route open to anonymous callers.
    limit = int(settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["anon"].split("/")[0])
    client = APIClient()
    for _ in range(limit):
        assert client.get("/api/v1/health").status_code == 200
    throttled = client.get("/api/v1/health")
    assert throttled.status_code == 429
    assert throttled.json()["error"]["code"] == "throttled"
    assert "Retry-After" in throttled.headers
