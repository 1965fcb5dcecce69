"""Property constraints through the API: for each type, a violating write answers a
warning, the report lists it, a fix clears it, and an exception clears it too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from memory.models import AuditEvent, Context, Predicate, Role
from tests.api.conftest import assert_error


def _entity(api: APIClient, base: str, name: str, type_: str = "person") -> int:
    response = api.post(
        f"{base}/entities", {"name": name, "type": type_, "scope": "org"}, format="json"
    )
    assert response.status_code in (200, 201), response.content
    return int(response.json()["id"])


def _fact(api: APIClient, base: str, subject: int, predicate: str, **rest: Any) -> dict[str, Any]:
    response = api.post(
        f"{base}/facts", {"subject": subject, "predicate": predicate, **rest}, format="json"
    )
    assert response.status_code in (200, 201), response.content
    body: dict[str, Any] = response.json()
    return body


def _constrain(api: APIClient, base: str, name: str, *constraints: dict[str, Any]) -> None:
    response = api.patch(
        f"{base}/predicates/{name}", {"constraints": list(constraints)}, format="json"
    )
    assert response.status_code == 200, response.content


def _register(api: APIClient, base: str, name: str, kind: str = "attribute") -> None:
    response = api.post(f"{base}/predicates", {"name": name, "kind": kind}, format="json")
    assert response.status_code == 201, response.content


def _report(api: APIClient, base: str, **params: Any) -> dict[str, Any]:
    response = api.get(f"{base}/constraints/violations", params)
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()
    return body


def _rows(api: APIClient, base: str, predicate: str, ctype: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = _report(api, base, predicate=predicate, type=ctype)["results"]
    return rows


def _except(api: APIClient, base: str, predicate: str, ctype: str, entity: int) -> None:
    response = api.post(
        f"{base}/constraints/exceptions",
        {"predicate": predicate, "constraint": ctype, "entity": entity},
        format="json",
    )
    assert response.status_code == 201, response.content


def _warned(written: dict[str, Any], ctype: str) -> bool:
    return any(w["constraint"] == ctype for w in written["warnings"])


@pytest.fixture
def people(api: APIClient, base: str) -> dict[str, int]:
    return {name: _entity(api, base, name) for name in ("Alex", "Maria", "Sam")}


def test_single_value(api: APIClient, base: str, people: dict[str, int]) -> None:
    _register(api, base, "birth_date")
    _constrain(api, base, "birth_date", {"type": "single_value"})
    alex = people["Alex"]
    first = _fact(api, base, alex, "birth_date", value="1990-01-01")
    assert first["warnings"] == []
    second = _fact(api, base, alex, "birth_date", value="1991-02-02")
    assert _warned(second, "single_value")
    (row,) = _rows(api, base, "birth_date", "single_value")
    assert row["entity"]["id"] == alex and row["status"] == "mandatory"
    assert row["fact_ids"] == sorted([first["fact"]["id"], second["fact"]["id"]])
    assert "2 values of birth_date" in row["message"]
    api.delete(f"{base}/facts/{second['fact']['id']}")
    assert _rows(api, base, "birth_date", "single_value") == []
    _fact(api, base, alex, "birth_date", value="1992-03-03")
    assert len(_rows(api, base, "birth_date", "single_value")) == 1
    _except(api, base, "birth_date", "single_value", alex)
    assert _rows(api, base, "birth_date", "single_value") == []


def test_format(api: APIClient, base: str, people: dict[str, int]) -> None:
    _register(api, base, "employee_id")
    _constrain(
        api, base, "employee_id", {"type": "format", "pattern": r"E\d{4}", "status": "suggestion"}
    )
    alex, maria = people["Alex"], people["Maria"]
    assert _fact(api, base, alex, "employee_id", value="E1234")["warnings"] == []
    bad = _fact(api, base, maria, "employee_id", value="12-34")
    (warning,) = bad["warnings"]
    assert warning["constraint"] == "format" and warning["status"] == "suggestion"
    assert "'12-34'" in warning["message"]
    (row,) = _rows(api, base, "employee_id", "format")
    assert row["entity"]["id"] == maria
    corrected = api.post(
        f"{base}/facts/{bad['fact']['id']}/correct", {"value": "E0034"}, format="json"
    )
    assert corrected.status_code == 201, corrected.content
    assert _rows(api, base, "employee_id", "format") == []
    _fact(api, base, people["Sam"], "employee_id", value="nope")
    _except(api, base, "employee_id", "format", people["Sam"])
    assert _rows(api, base, "employee_id", "format") == []


def test_a_write_whose_types_keep_the_rules_sends_no_check(
    api: APIClient, base: str, people: dict[str, int]
) -> None:
    """The types the writer read decide whether a type rule is checked at all: a
    well-typed works_at sends no constraint statement, an ill-typed one does and warns."""
    acme = _entity(api, base, "Acme", "organisation")

    def checks(subject: int, object_: int) -> tuple[int, dict[str, Any]]:
        with CaptureQueriesContext(connection) as queries:
            written = _fact(api, base, subject, "works_at", object=object_)
        return sum(" AS pname" in q["sql"] for q in queries.captured_queries), written

    sent, written = checks(people["Alex"], acme)
    assert (sent, written["warnings"]) == (0, [])
    sent, written = checks(people["Maria"], people["Sam"])  # a person's object
    assert sent == 1 and _warned(written, "value_type")
    sent, written = checks(acme, acme)  # an organisation's subject
    assert sent == 1 and _warned(written, "subject_type")


def test_subject_type_and_value_type(api: APIClient, base: str, people: dict[str, int]) -> None:
    """The library's own rules: works_at goes from a person to an organisation."""
    acme = _entity(api, base, "Acme", "organisation")
    alex, maria = people["Alex"], people["Maria"]
    assert _fact(api, base, alex, "works_at", object=acme)["warnings"] == []
    wrong = _fact(api, base, alex, "works_at", object=maria)
    (warning,) = wrong["warnings"]
    assert warning["constraint"] == "value_type" and "person" in warning["message"]
    backwards = _fact(api, base, acme, "works_at", object=acme)
    assert _warned(backwards, "subject_type")
    assert [r["entity"]["id"] for r in _rows(api, base, "works_at", "subject_type")] == [acme]
    assert [r["entity"]["id"] for r in _rows(api, base, "works_at", "value_type")] == [alex]
    # Fixes: retract the backwards fact, correct the object of the wrong one.
    api.delete(f"{base}/facts/{backwards['fact']['id']}")
    assert _rows(api, base, "works_at", "subject_type") == []
    api.post(f"{base}/facts/{wrong['fact']['id']}/correct", {"object": acme}, format="json")
    assert _rows(api, base, "works_at", "value_type") == []
    _fact(api, base, maria, "works_at", object=people["Sam"])
    _except(api, base, "works_at", "value_type", maria)
    assert _rows(api, base, "works_at", "value_type") == []


def test_allowed_values(api: APIClient, base: str, people: dict[str, int]) -> None:
    _register(api, base, "blood_type")
    _constrain(api, base, "blood_type", {"type": "allowed_values", "values": ["A", "B", "AB", "O"]})
    alex = people["Alex"]
    assert _fact(api, base, people["Maria"], "blood_type", value="AB")["warnings"] == []
    bad = _fact(api, base, alex, "blood_type", value="Z")
    assert _warned(bad, "allowed_values")
    assert [r["entity"]["id"] for r in _rows(api, base, "blood_type", "allowed_values")] == [alex]
    api.post(f"{base}/facts/{bad['fact']['id']}/correct", {"value": "O"}, format="json")
    assert _rows(api, base, "blood_type", "allowed_values") == []
    _fact(api, base, people["Sam"], "blood_type", value="X")
    _except(api, base, "blood_type", "allowed_values", people["Sam"])
    assert _rows(api, base, "blood_type", "allowed_values") == []


def test_allowed_values_of_a_relation_are_entities(
    api: APIClient, base: str, people: dict[str, int]
) -> None:
    _register(api, base, "citizen_of", kind="relation")
    france = _entity(api, base, "France", "location")
    mars = _entity(api, base, "Mars", "location")
    _constrain(api, base, "citizen_of", {"type": "allowed_values", "values": [france]})
    assert _fact(api, base, people["Alex"], "citizen_of", object=france)["warnings"] == []
    assert _warned(_fact(api, base, people["Maria"], "citizen_of", object=mars), "allowed_values")


def test_range_of_numbers_and_dates(api: APIClient, base: str, people: dict[str, int]) -> None:
    _register(api, base, "age")
    _register(api, base, "hired_on")
    _constrain(api, base, "age", {"type": "range", "min": 0, "max": 150})
    _constrain(api, base, "hired_on", {"type": "range", "min": "2000-01-01"})
    alex, maria = people["Alex"], people["Maria"]
    assert _fact(api, base, alex, "age", value=42)["warnings"] == []
    old = _fact(api, base, maria, "age", value=212)
    assert _warned(old, "range")
    assert _warned(_fact(api, base, people["Sam"], "age", value="forty"), "range")
    assert {r["entity"]["id"] for r in _rows(api, base, "age", "range")} == {
        maria,
        people["Sam"],
    }
    api.post(f"{base}/facts/{old['fact']['id']}/correct", {"value": 21}, format="json")
    assert [r["entity"]["id"] for r in _rows(api, base, "age", "range")] == [people["Sam"]]
    _except(api, base, "age", "range", people["Sam"])
    assert _rows(api, base, "age", "range") == []
    assert _fact(api, base, alex, "hired_on", value="2010-05-01")["warnings"] == []
    early = _fact(api, base, maria, "hired_on", value="1999-12-31")
    assert _warned(early, "range")
    api.delete(f"{base}/facts/{early['fact']['id']}")
    assert _rows(api, base, "hired_on", "range") == []


def test_symmetric(api: APIClient, base: str, people: dict[str, int]) -> None:
    _register(api, base, "spouse_of", kind="relation")
    _constrain(api, base, "spouse_of", {"type": "symmetric"})
    alex, maria = people["Alex"], people["Maria"]
    one_sided = _fact(api, base, alex, "spouse_of", object=maria)
    assert _warned(one_sided, "symmetric")
    assert [r["entity"]["id"] for r in _rows(api, base, "spouse_of", "symmetric")] == [alex]
    back = _fact(api, base, maria, "spouse_of", object=alex)
    assert back["warnings"] == []  # stating it back is the fix
    assert _rows(api, base, "spouse_of", "symmetric") == []
    _fact(api, base, people["Sam"], "spouse_of", object=alex)
    _except(api, base, "spouse_of", "symmetric", people["Sam"])
    assert _rows(api, base, "spouse_of", "symmetric") == []


def test_inverse(api: APIClient, base: str, people: dict[str, int]) -> None:
    _register(api, base, "mother_of", kind="relation")
    _register(api, base, "has_mother", kind="relation")
    _constrain(api, base, "mother_of", {"type": "inverse", "predicate": "has_mother"})
    alex, sam = people["Alex"], people["Sam"]
    assert _warned(_fact(api, base, alex, "mother_of", object=sam), "inverse")
    (row,) = _rows(api, base, "mother_of", "inverse")
    assert "has_mother" in row["message"]
    _fact(api, base, sam, "has_mother", object=alex)
    assert _rows(api, base, "mother_of", "inverse") == []
    _fact(api, base, people["Maria"], "mother_of", object=sam)
    _except(api, base, "mother_of", "inverse", people["Maria"])
    assert _rows(api, base, "mother_of", "inverse") == []


def test_distinct_values_reports_pairs_and_a_merge_clears_them(
    api: APIClient, base: str, people: dict[str, int]
) -> None:
    _register(api, base, "badge_number")
    _constrain(api, base, "badge_number", {"type": "distinct_values"})
    alex, maria = people["Alex"], people["Maria"]
    alex_twin = _entity(api, base, "Alexander", "person")
    _fact(api, base, alex, "badge_number", value="B-7")
    shared = _fact(api, base, alex_twin, "badge_number", value="B-7")
    assert _warned(shared, "distinct_values")
    (row,) = _rows(api, base, "badge_number", "distinct_values")
    assert {row["entity"]["id"], row["other_entity"]["id"]} == {alex, alex_twin}
    assert "should be unique" in row["message"]
    merged = api.post(
        f"{base}/entities/merge", {"survivor": alex, "merged": [alex_twin]}, format="json"
    )
    assert merged.status_code in (200, 201), merged.content
    assert _rows(api, base, "badge_number", "distinct_values") == []
    _fact(api, base, maria, "badge_number", value="B-9")
    _fact(api, base, people["Sam"], "badge_number", value="B-9")
    assert len(_rows(api, base, "badge_number", "distinct_values")) == 1
    _except(api, base, "badge_number", "distinct_values", maria)
    assert _rows(api, base, "badge_number", "distinct_values") == []


def test_conflicts_with_warns_whichever_is_written_second(
    api: APIClient, base: str, people: dict[str, int]
) -> None:
    _register(api, base, "date_of_death")
    _register(api, base, "alive_status")
    _constrain(api, base, "date_of_death", {"type": "conflicts_with", "predicate": "alive_status"})
    alex = people["Alex"]
    _fact(api, base, alex, "date_of_death", value="2020-01-01")
    alive = _fact(api, base, alex, "alive_status", value="alive")
    assert _warned(alive, "conflicts_with")  # the rule is date_of_death's, the write the other
    (row,) = _rows(api, base, "date_of_death", "conflicts_with")
    assert alive["fact"]["id"] in row["fact_ids"]
    api.delete(f"{base}/facts/{alive['fact']['id']}")
    assert _rows(api, base, "date_of_death", "conflicts_with") == []
    maria = people["Maria"]
    _fact(api, base, maria, "alive_status", value="alive")
    _fact(api, base, maria, "date_of_death", value="2021-01-01")
    _except(api, base, "date_of_death", "conflicts_with", maria)
    assert _rows(api, base, "date_of_death", "conflicts_with") == []


def test_requires(api: APIClient, base: str, people: dict[str, int]) -> None:
    _register(api, base, "job_grade")
    _constrain(api, base, "job_grade", {"type": "requires", "predicate": "works_at"})
    alex, maria = people["Alex"], people["Maria"]
    assert _warned(_fact(api, base, alex, "job_grade", value="G7"), "requires")
    assert [r["entity"]["id"] for r in _rows(api, base, "job_grade", "requires")] == [alex]
    _fact(api, base, alex, "works_at", object=_entity(api, base, "Acme", "organisation"))
    assert _rows(api, base, "job_grade", "requires") == []
    _fact(api, base, maria, "job_grade", value="G2")
    _except(api, base, "job_grade", "requires", maria)
    assert _rows(api, base, "job_grade", "requires") == []


def test_counts_filters_and_keyset_pages(api: APIClient, base: str, people: dict[str, int]) -> None:
    _register(api, base, "shoe_size")
    _constrain(
        api,
        base,
        "shoe_size",
        {"type": "range", "max": 50},
        {"type": "single_value", "status": "suggestion"},
    )
    for name in ("Alex", "Maria", "Sam"):
        _fact(api, base, people[name], "shoe_size", value=99)
    _fact(api, base, people["Alex"], "shoe_size", value=98)
    report = _report(api, base)
    assert report["count"] == 4
    assert {(c["predicate"], c["constraint"], c["count"]) for c in report["counts"]} == {
        ("shoe_size", "range", 3),
        ("shoe_size", "single_value", 1),
    }
    assert _report(api, base, status="suggestion")["count"] == 1
    assert _report(api, base, entity=people["Maria"])["count"] == 1
    assert _report(api, base, entity="Alex")["count"] == 2
    assert _report(api, base, scope="elsewhere/*")["count"] == 0
    seen, after = [], None
    while True:
        page = _report(api, base, limit=1, **({"after": after} if after else {}))
        seen += [(r["constraint"], r["entity"]["id"]) for r in page["results"]]
        assert page["count"] == 4
        after = page["next_cursor"]
        if after is None:
            break
    assert len(seen) == 4 and len(set(seen)) == 4
    assert seen == sorted(seen)


def test_report_reads_under_the_callers_grants(
    api: APIClient,
    base: str,
    context: Context,
    people: dict[str, int],
    api_client_for: Callable[..., APIClient],
) -> None:
    _register(api, base, "nickname")
    _constrain(api, base, "nickname", {"type": "format", "pattern": "[a-z]+"})
    _fact(api, base, people["Alex"], "nickname", value="X1")
    other = api.post(
        f"{base}/entities", {"name": "Hidden", "type": "person", "scope": "secret"}, format="json"
    ).json()["id"]
    _fact(api, base, other, "nickname", value="Y2", scope="secret")
    assert _report(api, base)["count"] == 2
    narrow = api_client_for(context, role=Role.VIEWER, grants=["read:org/*"])
    rows = _report(narrow, base)["results"]
    assert [r["entity"]["id"] for r in rows] == [people["Alex"]]


def test_an_exception_is_audited_and_undone(
    api: APIClient, base: str, people: dict[str, int]
) -> None:
    _register(api, base, "pet_count")
    _constrain(api, base, "pet_count", {"type": "range", "min": 0})
    _fact(api, base, people["Alex"], "pet_count", value=-1)
    _except(api, base, "pet_count", "range", people["Alex"])
    assert _rows(api, base, "pet_count", "range") == []
    event = AuditEvent.objects.filter(action="constraint_exception_add").get()
    undone = api.post(f"{base}/audit/{event.pk}/undo")
    assert undone.status_code == 200, undone.content
    assert len(_rows(api, base, "pet_count", "range")) == 1


def test_constraints_round_trip_through_the_registry_file(api: APIClient, base: str) -> None:
    _register(api, base, "tax_id")
    _constrain(
        api, base, "tax_id", {"type": "distinct_values"}, {"type": "format", "pattern": "[0-9]{9}"}
    )
    exported = api.get(f"{base}/predicates/export").json()
    entry = next(p for p in exported["predicates"] if p["name"] == "tax_id")
    assert [c["type"] for c in entry["constraints"]] == ["distinct_values", "format"]
    api.patch(f"{base}/predicates/tax_id", {"constraints": []}, format="json")
    imported = api.post(f"{base}/predicates/import", exported, format="json")
    assert imported.status_code == 200, imported.content
    assert len(Predicate.objects.get(name="tax_id").constraints) == 2


def test_the_library_starts_with_constraints(api: APIClient, base: str) -> None:
    works_at = api.get(f"{base}/predicates/works_at").json()
    assert {c["type"] for c in works_at["constraints"]} == {"subject_type", "value_type"}


@pytest.mark.parametrize(
    ("name", "constraints", "code"),
    [
        ("current_title", [{"type": "value_type", "types": ["person"]}], "invalid_constraint"),
        ("current_title", [{"type": "symmetric"}], "invalid_constraint"),
        ("works_at", [{"type": "format", "pattern": "x"}], "invalid_constraint"),
        ("current_title", [{"type": "format", "pattern": "(unclosed"}], "invalid_constraint"),
        ("current_title", [{"type": "format", "pattern": "(?P<n>x)"}], "invalid_constraint"),
        ("current_title", [{"type": "range", "min": 5, "max": 1}], "invalid_constraint"),
        ("current_title", [{"type": "range", "min": 1, "max": "2020-01-01"}], "invalid_constraint"),
        ("current_title", [{"type": "nonsense"}], "invalid_constraint"),
        ("current_title", [{"type": "single_value", "status": "maybe"}], "invalid_constraint"),
        ("current_title", [{"type": "single_value", "pattern": "x"}], "invalid_constraint"),
        (
            "current_title",
            [{"type": "single_value"}, {"type": "single_value"}],
            "invalid_constraint",
        ),
        (
            "current_title",
            [{"type": "requires", "predicate": "no_such_thing"}],
            "invalid_constraint",
        ),
        ("works_at", [{"type": "inverse", "predicate": "current_title"}], "invalid_constraint"),
        ("works_at", [{"type": "inverse", "predicate": "works_at"}], "invalid_constraint"),
        ("works_at", [{"type": "allowed_values", "values": ["text"]}], "invalid_constraint"),
        ("current_title", [{"type": "single_value", "exceptions": [999999]}], "invalid_constraint"),
        ("current_title", [{"type": "single_value", "exceptions": ["x"]}], "invalid_constraint"),
        ("current_title", "not a list", None),
    ],
)
def test_constraints_that_cannot_apply_are_refused(
    api: APIClient, base: str, name: str, constraints: Any, code: str | None
) -> None:
    before = Predicate.objects.get(name=name).constraints
    response = api.patch(f"{base}/predicates/{name}", {"constraints": constraints}, format="json")
    assert_error(response, 400, code)
    assert Predicate.objects.get(name=name).constraints == before


def test_only_admins_edit_constraints_and_curators_add_exceptions(
    context: Context, base: str, api: APIClient, api_client_for: Callable[..., APIClient]
) -> None:
    curator = api_client_for(context, role=Role.CURATOR)
    viewer = api_client_for(context, role=Role.VIEWER)
    refused = curator.patch(f"{base}/predicates/current_title", {"constraints": []}, format="json")
    assert_error(refused, 403, "role_required")
    alex = _entity(api, base, "Alex")
    body = {"predicate": "current_title", "constraint": "single_value", "entity": alex}
    assert_error(viewer.post(f"{base}/constraints/exceptions", body, format="json"), 403)
    assert curator.post(f"{base}/constraints/exceptions", body, format="json").status_code == 201
    assert viewer.get(f"{base}/constraints/violations").status_code == 200


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"type": "nonsense"}, None),
        ({"status": "maybe"}, None),
        ({"after": "not-a-cursor"}, "invalid_cursor"),
        ({"limit": 0}, None),
        ({"scope": "bad scope!"}, "invalid_scope"),
        ({"predicate": "no_such_predicate"}, None),
    ],
)
def test_bad_report_parameters_are_refused(
    api: APIClient, base: str, params: dict[str, Any], code: str | None
) -> None:
    response = api.get(f"{base}/constraints/violations", params)
    assert response.status_code in (400, 404), response.content
    assert_error(response, response.status_code, code)


@pytest.mark.parametrize(
    "body",
    [
        {"predicate": "current_title", "constraint": "range", "entity": 1},
        {"predicate": "current_title", "constraint": "nonsense", "entity": 1},
        {"predicate": "current_title", "constraint": "single_value", "entity": 0},
        {"predicate": "current_title", "constraint": "single_value"},
        {"predicate": "current_title", "constraint": "single_value", "entity": 1, "x": 1},
    ],
)
def test_bad_exceptions_are_refused(api: APIClient, base: str, body: dict[str, Any]) -> None:
    alex = _entity(api, base, "Alex")
    if body.get("entity") == 1:
        body = {**body, "entity": alex}
    before = Predicate.objects.get(name="current_title").constraints
    response = api.post(f"{base}/constraints/exceptions", body, format="json")
    assert response.status_code in (400, 404), response.content
    assert Predicate.objects.get(name="current_title").constraints == before


def test_every_library_constraint_is_valid() -> None:
    from memory.domain.constraints import constraints_check_kind, constraints_clean
    from memory.domain.predicate_library import STANDARD_PREDICATES

    for entry in STANDARD_PREDICATES:
        cleaned = constraints_clean(list(entry.constraints))
        constraints_check_kind(cleaned, name=entry.name, kind=entry.kind)


def test_an_import_remaps_the_entity_ids_of_constraints(
    api: APIClient, base: str, make_context: Callable[..., Context], people: dict[str, int]
) -> None:
    from memory.domain.access import system_access
    from memory.models import Entity
    from memory.services.transfer.export import memory_export_lines
    from memory.services.transfer.importer import memory_import

    _register(api, base, "citizen_of", kind="relation")
    france = _entity(api, base, "France", "location")
    _constrain(
        api,
        base,
        "citizen_of",
        {"type": "allowed_values", "values": [france]},
        {"type": "requires", "predicate": "works_at", "exceptions": [people["Maria"]]},
    )
    source = Predicate.objects.get(name="citizen_of").context
    target = make_context("imported")
    memory_import(
        access=system_access(target), lines=memory_export_lines(access=system_access(source))
    )
    rules = Predicate.objects.get(context=target, name="citizen_of").constraints
    new_france = Entity.objects.get(context=target, name="France").pk
    new_maria = Entity.objects.get(context=target, name="Maria").pk
    assert rules[0]["values"] == [new_france] and rules[1]["exceptions"] == [new_maria]


def test_a_run_reports_the_constraints_its_facts_break(api: APIClient, base: str) -> None:
    _register(api, base, "employee_id")
    _constrain(api, base, "employee_id", {"type": "format", "pattern": r"E\d{4}"})
    triples = {
        "entities": [{"name": "Maria", "type": "person"}],
        "attributes": [
            {"subject": "Maria", "key": "employee_id", "value": "12-34"},
            {"subject": "Maria", "key": "favourite_colour", "value": "green"},
        ],
    }
    response = api.post(
        f"{base}/memories",
        {"text": "", "scope": "org", "infer": "triples", "triples": triples, "wait": True},
        format="json",
    )
    assert response.status_code == 200, response.content
    run, result = response.json()["run"], response.json()["result"]

    assert run["outcome"] == "succeeded_with_warnings"
    assert run["summary"]["warnings"] == 1 and run["summary"]["unresolved"] == 0
    wrong, plain = result["facts_created"]
    (warning,) = wrong["warnings"]  # the shape POST facts answers
    assert (warning["predicate"], warning["constraint"], warning["status"]) == (
        "employee_id",
        "format",
        "mandatory",
    )
    assert warning["fact_ids"] == [wrong["id"]]
    assert "warnings" not in plain
    assert result["warnings"] == [
        f"attributes[0]: {warning['message']} (mandatory format constraint of employee_id)"
    ]
