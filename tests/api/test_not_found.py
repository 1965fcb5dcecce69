"""Unknown API paths answer the JSON error shape; a trailing slash is named as the cause."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_a_trailing_slash_gets_a_404_that_says_paths_have_none() -> None:
    response = Client().get("/api/v1/health/")

    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "not_found"
    assert "API paths have no trailing slash; try /api/v1/health" in error["message"]
    assert error["details"] == {"path": "/api/v1/health"}


def test_a_trailing_slash_on_a_context_path_names_the_path_without_it() -> None:
    error = Client().post("/api/v1/contexts/acme/memories/", {}).json()["error"]

    assert error["details"] == {"path": "/api/v1/contexts/acme/memories"}


def test_an_unknown_api_path_is_a_plain_json_404() -> None:
    response = Client().get("/api/v1/nothing-here")

    assert response.status_code == 404
    assert response.json()["error"] == {
        "code": "not_found",
        "message": "no such resource",
        "details": None,
    }
    slashed = Client().get("/api/v1/nothing-here/").json()["error"]
    assert slashed["message"] == "no such resource: API paths have no trailing slash"
    assert slashed["details"] is None  # without the slash it is no path either
