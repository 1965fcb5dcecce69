from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from memory.models import Context, Role


@pytest.fixture
def api(context: Context, api_client_for: Callable[..., APIClient]) -> APIClient:
    """An admin's token with every grant in the ``acme-test`` context."""
    return api_client_for(context, role=Role.ADMIN)


@pytest.fixture
def base(context: Context) -> str:
    return f"/api/v1/contexts/{context.slug}"


def assert_error(response: Any, status: int, code: str | None = None) -> None:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    if code is not None:
        assert body["error"]["code"] == code, body
