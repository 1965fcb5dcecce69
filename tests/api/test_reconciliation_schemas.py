"""The project's reconciliation schemas (tests/api/reconciliation_schemas/) are sound JSON
Schemas, cover every document the service tests check in both versions, and refuse what
the specification forbids — so a service answer that passes them means something."""

from __future__ import annotations

import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator, ValidationError

from tests.api.reconcile_schemas import OWN, PUBLISHED, VERSIONS, own_schemas, validate_own


@pytest.mark.parametrize("version", VERSIONS)
def test_every_schema_is_sound_and_named_by_its_place(version: str) -> None:
    _, schemas = own_schemas(version)
    assert set(schemas) == {*PUBLISHED, "common"}
    for name, schema in schemas.items():
        Draft202012Validator.check_schema(schema)
        assert schema["$id"].endswith(f"/reconciliation/{version}/{name}.json")
    for path in (OWN / version).glob("*.json"):
        json.loads(path.read_text())


ENTITY = {"id": "7", "name": "Ada Lovelace"}
REFUSED: list[tuple[str, str, Any]] = [
    # Manifests: what each version requires, and where each puts its services.
    ("0.2", "manifest", {"versions": ["0.2"], "name": "x", "identifierSpace": "i"}),
    ("0.2", "manifest", {"versions": ["1.0"], "name": "x", "identifierSpace": "i",
                         "schemaSpace": "s"}),
    ("0.2", "manifest", {"versions": ["0.2"], "name": "x", "identifierSpace": "i",
                         "schemaSpace": "s", "preview": {"url": "/p?id=1", "width": 4,
                                                         "height": 4}}),
    ("0.2", "manifest", {"versions": ["0.2"], "name": "x", "identifierSpace": "i",
                         "schemaSpace": "s", "suggest": {"entity": True}}),
    ("1.0-draft", "manifest", {"versions": ["1.0-draft"], "name": "x"}),
    ("1.0-draft", "manifest", {"versions": ["1.0-draft"], "name": "x",
                               "view": {"url": "/e/{id}"}, "suggest": {"entity": True}}),
    ("1.0-draft", "manifest", {"versions": ["1.0-draft"], "name": "x",
                               "view": {"url": "/e/{id}"}, "preview": {"width": "400",
                                                                      "height": 200}}),
    # Queries.
    ("0.2", "query-batch", {"q0": {"type": "person"}}),
    ("0.2", "query-batch", {"q0": {"query": "Ada", "colour": "red"}}),
    ("0.2", "query-batch", {"q0": {"query": "Ada", "properties": [{"pid": "email"}]}}),
    ("1.0-draft", "query-batch", {"queries": [{"conditions": []}]}),
    ("1.0-draft", "query-batch", {"queries": [{"conditions": [
        {"matchType": "property", "propertyValue": "x"}]}]}),
    ("1.0-draft", "query-batch", {"queries": [{"conditions": [
        {"matchType": "colour", "propertyValue": "x"}]}]}),
    # Candidates.
    ("0.2", "result-batch", {"q0": {"result": [ENTITY]}}),
    ("0.2", "result-batch", {"q0": {"candidates": []}}),
    ("1.0-draft", "result-batch", {"results": [{"candidates": [{"id": "7", "score": 1}]}]}),
    ("1.0-draft", "result-batch", {"results": [{"candidates": [
        ENTITY | {"features": [{"id": "name", "value": 1.0}]}]}]}),
    ("1.0-draft", "result-batch", {"q0": {"result": []}}),
    # Suggest and proposals.
    ("0.2", "suggest-entities", {"result": [{"id": "7"}]}),
    ("1.0-draft", "suggest-entities", {"results": []}),
    ("0.2", "suggest-types", {"result": [{"id": "person"}]}),
    ("1.0-draft", "suggest-properties", {"result": [{"name": "e-mail"}]}),
    ("0.2", "extend-proposal", {"type": "person"}),
    # Data extension.
    ("0.2", "extend-query", {"ids": ["7"]}),
    ("1.0-draft", "extend-query", {"ids": "7", "properties": []}),
    ("0.2", "extend-response", {"meta": [], "rows": {"7": {"rank": [{"str": "x", "int": 1}]}}}),
    ("0.2", "extend-response", {"meta": [], "rows": {"7": {"born": [{"date": "1815-12-10"}]}}}),
    ("0.2", "extend-response", {"meta": [{"id": "rank"}], "rows": {}}),
    ("1.0-draft", "extend-response", {"meta": [], "rows": {"7": {}}}),
    ("1.0-draft", "extend-response", {"meta": [], "rows": [{"id": "7", "properties": [
        {"id": "rank", "values": [{"int": 1.5}]}]}]}),
]  # fmt: skip


@pytest.mark.parametrize(("version", "name", "document"), REFUSED)
def test_what_the_specification_forbids_is_refused(version: str, name: str, document: Any) -> None:
    with pytest.raises(ValidationError):
        validate_own(version, name, document)


ACCEPTED: list[tuple[str, str, Any]] = [
    ("0.2", "result-batch", {"q0": {"result": [ENTITY | {"score": 88.5, "match": True,
                             "type": ["person"], "features": [{"id": "name", "value": True}]}]}}),
    ("1.0-draft", "result-batch", {"results": [{"candidates": [ENTITY]}, {"candidates": []}]}),
    ("0.2", "extend-response", {"meta": [{"id": "born", "name": "born"}], "rows": {"7": {
        "born": [{"date": "1815-12-10T00:00:00Z"}], "rank": [{}, {"float": 2.5}, ENTITY]}}}),
    ("1.0-draft", "suggest-properties", {"result": [{"id": "id:email", "name": "e-mail",
                                         "matchQualifiers": [{"id": "exact", "name": "exact"}]}]}),
]  # fmt: skip


@pytest.mark.parametrize(("version", "name", "document"), ACCEPTED)
def test_what_the_specification_allows_passes(version: str, name: str, document: Any) -> None:
    validate_own(version, name, document)
