"""``manage.py fsck``: the API's consistency checks for cron and CI, as a summary or the
API's JSON, exiting 1 when a check finds problems."""

from __future__ import annotations

import json
from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from memory.domain.access import ContextAccess
from memory.models import Entity, Fact
from memory.services.drift.resolve import drift_resolve
from memory.services.entities.writes import entity_upsert
from memory.services.facts.write import fact_write

pytestmark = pytest.mark.django_db


def _fsck(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("fsck", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def _fsck_failing(*args: str) -> tuple[str, CommandError]:
    out = StringIO()
    with pytest.raises(CommandError) as failed:
        call_command("fsck", *args, stdout=out, stderr=StringIO())
    return out.getvalue(), failed.value


@pytest.fixture
def make_entity(access: ContextAccess) -> Callable[..., Entity]:
    def make(name: str, type_: str = "organisation", scope: str = "org/acme") -> Entity:
        return entity_upsert(access=access, name=name, type=type_, scope=scope).entity

    return make


@pytest.fixture
def clean(access: ContextAccess, make_entity: Callable[..., Entity]) -> None:
    """Distinct entities, registered predicates, one entity without facts (allowed)."""
    alex, sam = make_entity("Alex", "person"), make_entity("Sam Okafor", "person")
    fact_write(access=access, subject=alex, predicate="knows", object=sam)
    fact_write(access=access, subject=alex, predicate="works_at", object=make_entity("Acme"))
    make_entity("Globex")


@pytest.fixture
def broken(access: ContextAccess, clean: None, make_entity: Callable[..., Entity]) -> None:
    """Two duplicate pairs, a fact left on a merged entity, a single-valued fact
    superseded by a fact that is gone, and an unregistered predicate."""
    jon = make_entity("Jon Smith", "person")
    make_entity("John Smith", "person")
    make_entity("ACME Inc.", scope="org/globex")  # in the same scope it would match Acme
    alex = Entity.objects.get(name="Alex")
    initech = make_entity("Initech")
    fact_write(access=access, subject=alex, predicate="worksFor", object=initech)
    # Merged without its facts moving: what a merge must never leave behind.
    Entity.objects.filter(pk=initech.pk).update(merged_into=Entity.objects.get(name="Globex"))
    # A single-valued fact superseded by a newer value, and the newer value deleted.
    old = fact_write(access=access, subject=jon, predicate="current_title", value="Analyst").fact
    fact_write(access=access, subject=jon, predicate="current_title", value="Senior Analyst")
    Fact.objects.filter(supersedes=old).delete()


def test_clean_context_has_no_problems_and_exits_zero(access: ContextAccess, clean: None) -> None:
    out, err = _fsck("--context", access.context.slug)
    assert out.splitlines() == [
        "duplicates: 0 open clusters of likely duplicate entities "
        "(4 entities scanned, 0 new candidate pairs)",
        "orphans: 0 problems",
        "  0 facts on merged entities",
        "  0 superseded single-valued facts without a successor",
        "  1 entity without facts (not a problem)",
        "vocabulary: 0 observed predicates not registered; "
        "100.0% of 2 current facts use registered predicates",
        "validity: 0 problems",
        "  0 facts whose validity ends before it begins",
        "  0 single-valued slots with more than one current value",
        "no problems in acme-test",
    ]
    # Progress: each check as it starts and ends.
    assert err.splitlines()[0] == "duplicates: checking…"
    assert err.splitlines()[-1].startswith("validity: done in ")


def test_problems_are_listed_and_exit_one(access: ContextAccess, broken: None) -> None:
    out, error = _fsck_failing("--context", access.context.slug)
    assert error.returncode == 1
    ids = dict(Entity.objects.values_list("name", "pk"))
    on_merged = Fact.objects.get(predicate__name="works_for").pk
    lines = out.splitlines()
    assert lines[0].startswith("duplicates: 2 open clusters of likely duplicate entities")
    clusters = lines[1:3]
    assert any(f"#{ids['Jon Smith']} Jon Smith (person)" in c for c in clusters)
    assert any(f"#{ids['ACME Inc.']} ACME Inc. (organisation)" in c for c in clusters)
    assert lines[3:] == [
        "orphans: 2 problems",
        f"  1 fact on merged entities: #{on_merged}",
        "  1 superseded single-valued fact without a successor",
        "  3 entities without facts (not a problem)",  # Globex, John Smith, ACME Inc.
        "vocabulary: 1 observed predicate not registered; "
        "66.7% of 3 current facts use registered predicates",
        "  works_for",
        "validity: 0 problems",
        "  0 facts whose validity ends before it begins",
        "  0 single-valued slots with more than one current value",
    ]
    assert str(error) == "5 problems found in acme-test (duplicates 2, orphans 2, vocabulary 1)"


def test_checks_narrow_the_run_and_the_exit_status(access: ContextAccess, broken: None) -> None:
    out, error = _fsck_failing("--context", access.context.slug, "--check", "vocabulary")
    assert out.startswith("vocabulary: 1 observed predicate") and "duplicates" not in out
    assert str(error) == "1 problem found in acme-test (vocabulary 1)"
    drift_resolve(access=access, name="works_for", action="alias", target="works_at")
    out, _ = _fsck("--context", access.context.slug, "--check", "vocabulary")
    assert out.splitlines()[-1] == "no problems in acme-test"


def test_the_summary_lists_the_first_few_findings(access: ContextAccess, clean: None) -> None:
    alex, acme = Entity.objects.get(name="Alex"), Entity.objects.get(name="Acme")
    for n in range(7):
        fact_write(access=access, subject=alex, predicate=f"partner_{n}", object=acme)
    out, _ = _fsck_failing("--context", access.context.slug, "--check", "vocabulary")
    assert out.splitlines()[1:] == [
        "  partner_0, partner_1, partner_2, partner_3, partner_4",
        "  … and 2 more",
    ]


def test_an_inverted_interval_is_a_validity_problem_and_history_is_not_an_orphan(
    access: ContextAccess, clean: None, api_client_for: Callable[..., APIClient]
) -> None:
    """An older value written after the current one is history (superseded by no fact):
    not an orphan. A stored interval that ends before it begins is a problem."""
    api = api_client_for(access.context)
    base = f"/api/v1/contexts/{access.context.slug}"
    pat = {"name": "Pat Quinn", "type": "person"}
    for value, valid in (("Director of Sales", {"valid_from": "2025-06-01T00:00:00Z"}),
                         ("Sales Intern", {"valid_from": "2019-06-01T00:00:00Z",
                                           "valid_until": "2020-08-31T00:00:00Z"})):  # fmt: skip
        body = {
            "subject": pat,
            "predicate": "current_title",
            "value": value,
            "scope": "org/acme",
            **valid,
        }
        assert api.post(f"{base}/facts", body, format="json").status_code == 201
    out, _ = _fsck("--context", access.context.slug, "--check", "orphans", "--check", "validity")
    assert "  0 superseded single-valued facts without a successor" in out.splitlines()
    assert out.splitlines()[-1] == "no problems in acme-test"
    intern = Fact.objects.get(value_text="Sales Intern")
    assert intern.valid_from is not None
    Fact.objects.filter(pk=intern.pk).update(valid_until=intern.valid_from.replace(year=2018))
    out, error = _fsck_failing("--context", access.context.slug, "--check", "validity")
    assert f"  1 fact whose validity ends before it begins: #{intern.pk}" in out.splitlines()
    assert str(error) == "1 problem found in acme-test (validity 1)"


def test_json_is_the_api_report(
    access: ContextAccess, broken: None, api_client_for: Callable[..., APIClient]
) -> None:
    slug = access.context.slug
    _fsck_failing("--context", slug)  # the first scan stores the pairs: new_pairs is 0 after
    out, error = _fsck_failing("--context", slug, "--json")
    assert error.returncode == 1
    command: dict[str, Any] = json.loads(out)
    api = api_client_for(access.context).post(f"/api/v1/contexts/{slug}/fsck", {}, format="json")
    assert api.status_code == 200
    expected = api.json()
    for report in (command, expected):  # timings differ from run to run
        report["duplicates"].pop("seconds")
    assert command == expected
    assert command["duplicates"]["clusters"] == 2 and command["duplicates"]["new_pairs"] == 0


def test_json_of_a_clean_context_exits_zero(access: ContextAccess, clean: None) -> None:
    out, _ = _fsck("--context", access.context.slug, "--check", "orphans", "--json")
    assert json.loads(out) == {
        "orphans": {
            "facts_on_merged_entities": 0,
            "facts_on_merged_entities_sample": [],
            "superseded_without_successor": 0,
            "entities_without_facts": 1,
        }
    }


def test_bad_context_or_check_is_a_command_error(access: ContextAccess) -> None:
    with pytest.raises(CommandError, match="no context 'nope'") as failed:
        _fsck("--context", "nope")
    assert failed.value.returncode == 2
    with pytest.raises(CommandError, match=r"invalid choice: 'everything'.*duplicates"):
        _fsck("--context", access.context.slug, "--check", "everything")
    with pytest.raises(CommandError, match="--context"):
        _fsck()
