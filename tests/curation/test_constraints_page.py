"""The constraints page: counts and violations for every member, fixes in place for
curators (retract, correct, exception), each with an Undo; refusals for the rest."""

from __future__ import annotations

import pytest
from django.test import Client

from memory.domain.access import ContextAccess
from memory.models import AuditEvent, Entity, Fact, Predicate
from memory.services.entities.writes import entity_upsert
from memory.services.facts.write import fact_write
from tests.curation.conftest import page, person

pytestmark = pytest.mark.django_db


@pytest.fixture
def broken(access: ContextAccess) -> dict[str, Entity]:
    """Alex works at a person (value type); Acme works at Acme (subject type)."""
    alex, sam = person(access, "Alex"), person(access, "Sam")
    acme = entity_upsert(access=access, name="Acme", type="organisation", scope="org/acme").entity
    fact_write(access=access, subject=alex, predicate="works_at", object=sam)
    fact_write(access=access, subject=acme, predicate="works_at", object=acme)
    return {"alex": alex, "sam": sam, "acme": acme}


def _fact(subject: Entity) -> Fact:
    return Fact.objects.get(subject=subject, predicate__name="works_at", status="current")


def test_every_member_sees_counts_and_violations(
    viewer: Client, base: str, broken: dict[str, Entity]
) -> None:
    html = page(viewer.get(f"{base}/constraints/"))
    assert 'data-testid="violation-count">2 violations<' in html
    assert "subject_type" in html and "value_type" in html
    assert "Alex works_at an entity of type person" in html
    assert "Retract" not in html and "Exception for" not in html  # viewers look only
    filtered = page(viewer.get(f"{base}/constraints/", {"type": "subject_type"}))
    assert filtered.count('data-testid="violation"') == 1


def test_a_curator_retracts_with_undo(
    curator: Client, base: str, broken: dict[str, Entity]
) -> None:
    fact = _fact(broken["acme"])
    response = curator.post(
        f"{base}/constraints/retract",
        {"fact": fact.pk, "next": f"{base}/constraints/?type=subject_type", "focus": "0"},
    )
    assert response.status_code == 302
    assert response["Location"] == f"{base}/constraints/?type=subject_type&focus=0"
    fact.refresh_from_db()
    assert fact.status == "retracted"
    html = page(curator.get(response["Location"]))
    assert "No fact breaks a constraint of this filter" in html and "Undo" in html


def test_a_curator_corrects_the_object_in_place(
    curator: Client, base: str, broken: dict[str, Entity]
) -> None:
    fact = _fact(broken["alex"])
    response = curator.post(f"{base}/constraints/correct", {"fact": fact.pk, "object": "Acme"})
    assert response.status_code == 302
    assert _fact(broken["alex"]).object_id == broken["acme"].pk
    html = page(curator.get(response["Location"]))
    assert "1 violation<" in html and "Undo" in html


def test_a_curator_adds_an_exception_and_undoes_it(
    curator: Client, base: str, broken: dict[str, Entity]
) -> None:
    body = {"predicate": "works_at", "constraint": "value_type", "entity": broken["alex"].pk}
    response = curator.post(f"{base}/constraints/except", body)
    assert response.status_code == 302
    rule = next(
        c for c in Predicate.objects.get(name="works_at").constraints if c["type"] == "value_type"
    )
    assert rule["exceptions"] == [broken["alex"].pk]
    event = AuditEvent.objects.get(action="constraint_exception_add")
    assert curator.post(f"/c/acme-test/audit/{event.pk}/undo").status_code == 302
    rule = next(
        c for c in Predicate.objects.get(name="works_at").constraints if c["type"] == "value_type"
    )
    assert rule["exceptions"] == []


def test_viewers_cannot_fix(viewer: Client, base: str, broken: dict[str, Entity]) -> None:
    fact = _fact(broken["alex"])
    assert viewer.post(f"{base}/constraints/retract", {"fact": fact.pk}).status_code == 403
    assert (
        viewer.post(f"{base}/constraints/correct", {"fact": fact.pk, "object": "Acme"}).status_code
        == 403
    )
    body = {"predicate": "works_at", "constraint": "value_type", "entity": broken["alex"].pk}
    assert viewer.post(f"{base}/constraints/except", body).status_code == 403
    assert _fact(broken["alex"]).object_id == broken["sam"].pk


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("retract", {"fact": "x"}),
        ("correct", {"fact": ""}),
        ("except", {"predicate": "works_at", "constraint": "nonsense", "entity": "1"}),
        ("except", {"predicate": "works_at", "constraint": "range", "entity": "ALEX"}),
    ],
)
def test_bad_fixes_are_refused(
    curator: Client, base: str, broken: dict[str, Entity], path: str, body: dict[str, str]
) -> None:
    if body.get("entity") == "ALEX":
        body = {**body, "entity": str(broken["alex"].pk)}  # works_at has no range rule
    response = curator.post(f"{base}/constraints/{path}", body)
    assert response.status_code in (400, 404)
    assert AuditEvent.objects.count() == 0


def test_bad_filters_are_refused(viewer: Client, base: str) -> None:
    assert viewer.get(f"{base}/constraints/", {"type": "nonsense"}).status_code == 400
    assert viewer.get(f"{base}/constraints/", {"after": "garbage"}).status_code == 400
    assert viewer.get(f"{base}/constraints/", {"predicate": "no_such"}).status_code == 404


def test_the_registry_page_shows_and_edits_constraints(
    admin: Client, curator: Client, base: str
) -> None:
    html = page(admin.get(f"{base}/registry/works_at/"))
    assert 'id="predicate-constraints"' in html and "value_type" in html
    assert "types: organisation" in html
    assert 'id="constraints-json"' in html
    assert 'id="constraints-json"' not in page(curator.get(f"{base}/registry/works_at/"))
    rules = '[{"type": "single_value", "status": "suggestion"}]'
    saved = admin.post(f"{base}/registry/current_role/constraints", {"constraints": rules})
    assert saved.status_code == 302
    assert Predicate.objects.get(name="current_role").constraints == [
        {"type": "single_value", "status": "suggestion", "exceptions": []}
    ]
    refused = admin.post(
        f"{base}/registry/current_role/constraints",
        {"constraints": '[{"type": "value_type", "types": ["person"]}]'},
        follow=True,
    )
    assert "judges the object entity of a relation" in page(refused)
    assert len(Predicate.objects.get(name="current_role").constraints) == 1
    assert (
        admin.post(
            f"{base}/registry/current_role/constraints", {"constraints": "{oops"}
        ).status_code
        == 302
    )
    assert (
        curator.post(f"{base}/registry/current_role/constraints", {"constraints": "[]"}).status_code
        == 403
    )
    assert len(Predicate.objects.get(name="current_role").constraints) == 1
