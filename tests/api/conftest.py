from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from memory.models import Context, Role


@pytest.fixture
def api(context: Context, api_client_for: Callable[..., APIClient]) -> APIClient:
    """An admin's token with every grant in the ``acme-test`` context."""
    return api_client_for(context, role=Role.ADMIN)


@pytest.fixture(scope="session")
def openapi() -> dict[str, Any]:
    """The OpenAPI document as /api/schema/ serves it (generated once per test run)."""
    schema: dict[str, Any] = SchemaGenerator().get_schema(request=None, public=True)
    return schema


def operation(openapi: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    op: dict[str, Any] = openapi["paths"][f"/api/v1/contexts/{{ctx}}{path}"][method.lower()]
    return op


def response_schema(openapi: dict[str, Any], method: str, path: str, status: int) -> Any:
    """The schema of one documented answer, with a top-level component reference resolved."""
    content = operation(openapi, method, path)["responses"][str(status)]["content"]
    schema = content["application/json"]["schema"]
    if "$ref" in schema:
        schema = openapi["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


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
