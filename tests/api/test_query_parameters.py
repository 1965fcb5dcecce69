"""Unknown query parameters are refused on every API read, as unknown body fields are;
what each read documents in the OpenAPI schema (pagination and ``format`` included) is
taken."""

from __future__ import annotations

import re
from typing import Any

from django.urls import resolve
from rest_framework.test import APIClient

from memory.api.query_check import ALWAYS_TAKEN, query_parameters_taken
from memory.models import Context
from tests.api.conftest import assert_error


def test_an_unknown_query_parameter_is_refused_naming_it(api: APIClient, base: str) -> None:
    response = api.get(f"{base}/facts", {"colour": "red", "subject": "Acme Corp"})

    assert_error(response, 400, "unknown_parameter")
    error = response.json()["error"]
    assert error["message"].startswith("unknown query parameter: colour; this operation takes ")
    assert "subject" in error["message"] and "limit" in error["message"]
    [problem] = error["details"]["colour"]
    assert problem.startswith("unknown parameter; this operation takes as_of, ")
    assert set(error["details"]) == {"colour"}


def test_the_error_has_the_shape_of_an_unknown_body_field(api: APIClient, base: str) -> None:
    body = api.post(
        f"{base}/memories", {"text": "x", "scope": "org/acme", "mood": "ok"}, format="json"
    ).json()["error"]
    query = api.get(f"{base}/runs", {"mood": "ok", "moods": "ok"}).json()["error"]

    assert set(body) == set(query) == {"code", "message", "details"}
    assert set(query["details"]) == {"mood", "moods"}
    assert all(isinstance(v, list) and isinstance(v[0], str) for v in query["details"].values())
    assert query["message"].startswith("unknown query parameters: mood, moods;")


def test_reads_without_parameters_refuse_any(api: APIClient, base: str) -> None:
    assert_error(api.get("/api/v1/health", {"verbose": "1"}), 400, "unknown_parameter")
    assert_error(api.get(base, {"x": "1"}), 400, "unknown_parameter")
    assert api.head(f"{base}/facts", {"colour": "red"}).status_code == 400  # no body


def test_documented_paging_format_and_filters_are_taken(api: APIClient, base: str) -> None:
    paged = {"limit": "1", "offset": "0", "kind": "relation"}
    assert api.get(f"{base}/facts", paged).status_code == 200
    assert api.get(f"{base}/export", {"format": "jsonl"}).status_code == 200
    assert (
        api.get(f"{base}/predicates", {"status": "registered", "format": "json"}).status_code == 200
    )
    assert api.get(f"{base}/threads", {"offset": 0}).status_code == 200


def test_writes_and_unknown_paths_are_not_this_check(api: APIClient, base: str) -> None:
    # A POST's query string is not read; a read a view does not serve is DRF's 405.
    response = api.post(f"{base}/search?colour=red", {"query": "x"}, format="json")
    assert response.status_code == 200, response.content
    assert api.get(f"{base}/search", {"colour": "red"}).status_code == 405


def _concrete(path: str, context: Context) -> str:
    """A path of the schema with its parameters filled in (ids 1, names ``x``)."""
    path = path.replace("{ctx}", context.slug)
    return re.sub(r"\{(\w+)\}", lambda m: "1" if m.group(1).endswith("_id") else "x", path)


def test_every_read_takes_exactly_what_its_operation_documents(
    openapi: dict[str, Any], context: Context
) -> None:
    checked = 0
    for path, operations in openapi["paths"].items():
        if "get" not in operations:
            continue
        documented = {
            p["name"] for p in operations["get"].get("parameters", []) if p["in"] == "query"
        }
        view_class = resolve(_concrete(path, context)).func.cls  # type: ignore[attr-defined]
        taken = query_parameters_taken(view_class, "GET")
        assert taken - ALWAYS_TAKEN == documented - ALWAYS_TAKEN, path
        assert "400" in operations["get"]["responses"], path
        checked += 1
    assert checked >= 40
