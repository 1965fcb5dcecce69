"""The API's answers say what went wrong and where to look next."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from memory.models import Document, Run
from tests.api.conftest import operation

pytestmark = pytest.mark.django_db


def test_a_bad_query_parameter_is_named(api: APIClient, base: str) -> None:
    response = api.get(f"{base}/runs?outcome=exploded")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert error["message"].startswith("invalid query parameter: outcome:")
    assert "body" not in error["message"]


def test_an_unknown_body_field_is_a_400_naming_it(api: APIClient, base: str) -> None:
    response = api.post(
        f"{base}/memories",
        {"text": "Alex joined Acme.", "scope": "org/acme", "infer": "none", "mood": "cheerful"},
        format="json",
    )

    assert response.status_code == 400
    error = response.json()["error"]
    assert "mood" in error["details"]
    assert "mood: unknown field" in error["message"]
    assert not Run.objects.exists()


def test_an_unknown_field_of_a_nested_body_is_named_too(api: APIClient, base: str) -> None:
    response = api.post(
        f"{base}/entities",
        {
            "name": "Acme",
            "type": "organisation",
            "scope": "org/acme",
            "identifiers": [{"kind": "domain", "value": "acme.example", "primary": True}],
        },
        format="json",
    )

    assert response.status_code == 400
    assert "primary" in str(response.json()["error"]["details"])


def test_an_oversized_body_is_a_413_naming_the_limit(
    api: APIClient, base: str, settings: Any
) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    body = '{"text": "' + "x" * 4096 + '", "scope": "org/acme"}'

    response = api.post(f"{base}/documents", body, content_type="application/json")

    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == "body_too_large"
    assert "1,024 bytes" in error["message"]
    assert error["details"] == {"limit_bytes": 1024}
    assert not Document.objects.exists()


def test_a_queued_memory_answers_202_with_the_runs_location(api: APIClient, base: str) -> None:
    response = api.post(
        f"{base}/memories",
        {"text": "Alex joined Acme.", "scope": "org/acme", "infer": "none"},
        format="json",
    )

    assert response.status_code == 202
    run_id = response.json()["run"]["id"]
    assert response["Location"] == f"{base}/runs/{run_id}"
    assert api.get(response["Location"]).status_code == 200


def test_the_triples_body_is_typed_in_the_openapi_schema(openapi: dict[str, Any]) -> None:
    body = operation(openapi, "post", "/memories")["requestBody"]["content"]["application/json"]
    name = body["schema"]["$ref"].rsplit("/", 1)[1]
    triples = openapi["components"]["schemas"][name]["properties"]["triples"]

    assert triples["type"] == "object" and triples["nullable"] is True
    assert set(triples["properties"]) == {"entities", "relations", "attributes", "actions"}
    relation = triples["properties"]["relations"]["items"]
    assert {"subject", "predicate", "object"} <= set(relation["required"])
    assert "$ref" not in str(triples)
