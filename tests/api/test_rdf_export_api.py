"""The RDF export and the registry's SHACL shapes: the export parses as Turtle and as
JSON-LD into the same graph, and pySHACL, validating the export against the shapes, finds
exactly the violations the constraint report lists."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pyshacl
import pytest
from rdflib import RDF, RDFS, XSD, Graph, Literal, Namespace, URIRef
from rest_framework.test import APIClient

from memory.models import Context, Role
from tests.api.conftest import assert_error

SH = Namespace("http://www.w3.org/ns/shacl#")


def _entity(api: APIClient, base: str, name: str, type_: str = "person", scope: str = "org") -> int:
    response = api.post(
        f"{base}/entities", {"name": name, "type": type_, "scope": scope}, format="json"
    )
    assert response.status_code in (200, 201), response.content
    return int(response.json()["id"])


def _fact(api: APIClient, base: str, subject: int, predicate: str, **rest: Any) -> int:
    response = api.post(
        f"{base}/facts", {"subject": subject, "predicate": predicate, **rest}, format="json"
    )
    assert response.status_code in (200, 201), response.content
    return int(response.json()["fact"]["id"])


def _setup(api: APIClient, base: str, name: str, kind: str, *constraints: dict[str, Any]) -> None:
    created = api.post(f"{base}/predicates", {"name": name, "kind": kind}, format="json")
    assert created.status_code == 201, created.content
    patched = api.patch(
        f"{base}/predicates/{name}", {"constraints": list(constraints)}, format="json"
    )
    assert patched.status_code == 200, patched.content


def _text(response: Any) -> str:
    return b"".join(response.streaming_content).decode()


@pytest.fixture
def graph_with_violations(api: APIClient, base: str) -> dict[str, int]:
    """Every constraint type, each broken once or more, one of them excepted."""
    ids = {n: _entity(api, base, n) for n in ("Alex", "Maria", "Sam", "Kim")}
    acme = _entity(api, base, "Acme", "organisation")
    ids["Acme"] = acme
    _setup(
        api,
        base,
        "birth_date",
        "attribute",
        {"type": "single_value"},
        {"type": "range", "min": "1900-01-01", "max": "2030-12-31"},
    )
    _setup(
        api,
        base,
        "employee_id",
        "attribute",
        {"type": "format", "pattern": r"E\d{4}"},
        {"type": "distinct_values", "status": "suggestion"},
    )
    _setup(
        api,
        base,
        "blood_type",
        "attribute",
        {"type": "allowed_values", "values": ["A", "B", "AB", "O"]},
    )
    _setup(
        api,
        base,
        "age",
        "attribute",
        {"type": "range", "min": 0, "max": 150, "exceptions": [ids["Kim"]]},
    )
    _setup(
        api,
        base,
        "spouse_of",
        "relation",
        {"type": "symmetric"},
        {"type": "value_type", "types": ["person"]},
    )
    _setup(api, base, "mother_of", "relation", {"type": "subject_type", "types": ["person"]})
    _setup(api, base, "has_mother", "relation")
    api.patch(
        f"{base}/predicates/mother_of",
        {
            "constraints": [
                {"type": "subject_type", "types": ["person"]},
                {"type": "inverse", "predicate": "has_mother"},
            ]
        },
        format="json",
    )
    _setup(api, base, "alive_status", "attribute")
    _setup(
        api,
        base,
        "date_of_death",
        "attribute",
        {"type": "conflicts_with", "predicate": "alive_status"},
        {"type": "requires", "predicate": "birth_date"},
    )
    alex, maria, sam, kim = ids["Alex"], ids["Maria"], ids["Sam"], ids["Kim"]
    _fact(api, base, alex, "birth_date", value="1990-01-01")
    _fact(api, base, alex, "birth_date", value="1991-01-01")  # single value
    _fact(api, base, maria, "birth_date", value="1850-06-01")  # range (date)
    _fact(api, base, alex, "employee_id", value="E1234")
    _fact(api, base, maria, "employee_id", value="E1234")  # distinct values
    _fact(api, base, sam, "employee_id", value="12-34")  # format
    _fact(api, base, alex, "blood_type", value="O")
    _fact(api, base, maria, "blood_type", value="Q")  # allowed values
    _fact(api, base, alex, "age", value=34)
    _fact(api, base, maria, "age", value=212)  # range (number)
    _fact(api, base, sam, "age", value="forty")  # range: not a number
    _fact(api, base, kim, "age", value=-3)  # excepted
    _fact(api, base, alex, "spouse_of", object=maria)  # symmetric (one-sided)
    _fact(api, base, sam, "spouse_of", object=acme)  # symmetric and value type
    _fact(api, base, kim, "spouse_of", object=sam)
    _fact(api, base, sam, "spouse_of", object=kim)  # Kim and Sam: both ways, fine
    _fact(api, base, acme, "mother_of", object=alex)  # subject type, inverse
    _fact(api, base, maria, "mother_of", object=sam)
    _fact(api, base, sam, "has_mother", object=maria)  # inverse stated: fine
    _fact(api, base, kim, "date_of_death", value="2020-01-01")  # requires
    _fact(api, base, kim, "alive_status", value="alive")  # conflicts
    _fact(api, base, alex, "date_of_death", value="2021-01-01")  # has a birth date: fine
    return ids


def _report_keys(api: APIClient, base: str) -> dict[tuple[str, str], set[frozenset[int]]]:
    rows = api.get(f"{base}/constraints/violations", {"limit": 500}).json()["results"]
    keys: dict[tuple[str, str], set[frozenset[int]]] = defaultdict(set)
    for row in rows:
        members = {row["entity"]["id"]}
        if row["other_entity"]:
            members.add(row["other_entity"]["id"])
        keys[(row["predicate"], row["constraint"])].add(frozenset(members))
    return dict(keys)


def _shacl_keys(results: Graph, context_iri: str) -> dict[tuple[str, str], set[frozenset[int]]]:
    keys: dict[tuple[str, str], set[frozenset[int]]] = defaultdict(set)
    shapes_prefix = f"{context_iri}predicates/shapes#"
    entity_prefix = f"{context_iri}entities/"
    for result in results.subjects(RDF.type, SH.ValidationResult):
        shape = str(results.value(result, SH.sourceShape))
        assert shape.startswith(shapes_prefix), shape
        predicate, constraint = shape[len(shapes_prefix) :].rsplit("-", 1)
        members = {int(str(results.value(result, SH.focusNode))[len(entity_prefix) :])}
        value = results.value(result, SH.value)
        if constraint == "distinct_values" and isinstance(value, URIRef):
            members.add(int(str(value)[len(entity_prefix) :]))
        keys[(predicate, constraint)].add(frozenset(members))
    return dict(keys)


def test_pyshacl_finds_what_the_report_counts(
    api: APIClient, base: str, graph_with_violations: dict[str, int]
) -> None:
    exported = api.get(f"{base}/export", {"format": "turtle"})
    assert exported.status_code == 200
    assert exported["Content-Type"].startswith("text/turtle")
    shapes = api.get(f"{base}/predicates/shapes")
    assert shapes.status_code == 200 and shapes["Content-Type"].startswith("text/turtle")
    data = Graph().parse(data=_text(exported), format="turtle")
    shacl = Graph().parse(data=shapes.content.decode(), format="turtle")
    conforms, results, _ = pyshacl.validate(data, shacl_graph=shacl)
    assert not conforms
    context_iri = f"http://testserver{base}/"
    report = _report_keys(api, base)
    # Every constraint type is broken at least once, and the two agree on each.
    assert {c for _, c in report} == {
        "single_value",
        "format",
        "subject_type",
        "value_type",
        "allowed_values",
        "range",
        "symmetric",
        "inverse",
        "distinct_values",
        "conflicts_with",
        "requires",
    }
    # The library's own rules (works_at…) have no facts here; the report and SHACL agree.
    assert _shacl_keys(results, context_iri) == report
    ids = graph_with_violations
    assert report[("age", "range")] == {frozenset({ids["Maria"]}), frozenset({ids["Sam"]})}


def test_the_export_types_entities_and_values(
    api: APIClient, base: str, graph_with_violations: dict[str, int]
) -> None:
    ctx = f"http://testserver{base}/"
    data = Graph().parse(
        data=_text(api.get(f"{base}/export", {"format": "turtle"})), format="turtle"
    )
    alex = URIRef(f"{ctx}entities/{graph_with_violations['Alex']}")
    assert (alex, RDF.type, URIRef(f"{ctx}types/person")) in data
    assert (alex, RDFS.label, Literal("Alex")) in data
    age = URIRef(f"{ctx}predicates/age")
    assert (alex, age, Literal("34", datatype=XSD.integer)) in data
    born = URIRef(f"{ctx}predicates/birth_date")
    assert (alex, born, Literal("1990-01-01", datatype=XSD.date)) in data
    spouse = URIRef(f"{ctx}predicates/spouse_of")
    assert (alex, spouse, URIRef(f"{ctx}entities/{graph_with_violations['Maria']}")) in data
    jsonld = Graph().parse(
        data=_text(api.get(f"{base}/export", {"format": "jsonld"})), format="json-ld"
    )
    assert set(jsonld) == set(data)


def test_the_export_reads_under_grants_and_leaves_history_out(
    api: APIClient, base: str, context: Context, api_client_for: Callable[..., APIClient]
) -> None:
    alex = _entity(api, base, "Alex")
    hidden = _entity(api, base, "Hidden", scope="secret")
    api.post(f"{base}/predicates", {"name": "mood", "kind": "attribute"}, format="json")
    retracted = _fact(api, base, alex, "mood", value="grumpy")
    api.delete(f"{base}/facts/{retracted}")
    _fact(api, base, alex, "mood", value="calm")
    _fact(api, base, hidden, "mood", value="secretive", scope="secret")
    narrow = api_client_for(context, role=Role.VIEWER, grants=["read:org/*"])
    text = _text(narrow.get(f"{base}/export", {"format": "turtle"}))
    assert '"calm"' in text
    assert "grumpy" not in text and "secretive" not in text and "Hidden" not in text


def test_export_format_and_role_checks(
    api: APIClient, base: str, context: Context, api_client_for: Callable[..., APIClient]
) -> None:
    viewer = api_client_for(context, role=Role.VIEWER)
    assert_error(viewer.get(f"{base}/export"), 403, "role_required")  # JSON lines: admins
    assert viewer.get(f"{base}/export", {"format": "turtle"}).status_code == 200
    assert viewer.get(f"{base}/predicates/shapes").status_code == 200
    assert_error(api.get(f"{base}/export", {"format": "xml"}), 400, "invalid_format")


def test_shapes_state_severity_and_exceptions(api: APIClient, base: str) -> None:
    alex = _entity(api, base, "Alex")
    _setup(
        api,
        base,
        "nickname",
        "attribute",
        {"type": "format", "pattern": "[a-z]+", "status": "suggestion", "exceptions": [alex]},
    )
    shacl = Graph().parse(
        data=api.get(f"{base}/predicates/shapes").content.decode(), format="turtle"
    )
    shape = URIRef(f"http://testserver{base}/predicates/shapes#nickname-format")
    assert (shape, SH.severity, SH.Warning) in shacl
    assert (shape, RDF.type, SH.NodeShape) in shacl
    # works_at's library rules are shapes too.
    works_at = URIRef(f"http://testserver{base}/predicates/shapes#works_at-value_type")
    assert (works_at, SH.severity, SH.Violation) in shacl
