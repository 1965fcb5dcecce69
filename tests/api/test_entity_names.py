"""A name written means the entity bearing exactly that name in any scope the writer may
read, before a key match; an entity nobody typed (``other``) is a duplicate candidate of
the typed one of its name, for the check at write time, the list, the scan and fsck."""

from __future__ import annotations

import json
from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from memory.models import Context, Entity
from memory.models.duplicate import DuplicateCandidate


def _entity(api: APIClient, base: str, name: str, type_: str, scope: str) -> int:
    response = api.post(
        f"{base}/entities", {"name": name, "type": type_, "scope": scope}, format="json"
    )
    assert response.status_code == 201, response.content
    return int(response.json()["id"])


def _remember(api: APIClient, base: str, triples: dict[str, Any]) -> dict[str, Any]:
    body = {"text": "", "scope": "org/acme", "infer": "triples", "triples": triples, "wait": True}
    response = api.post(f"{base}/memories", body, format="json")
    assert response.status_code == 200, response.content
    result: dict[str, Any] = response.json()["result"]
    return result


HANNAH_WORKS_AT_GLOBEX = {
    "relations": [
        {"subject": "Hannah Ortiz", "predicate": "works_at", "object": "Globex Corporation"}
    ]
}


def _globex(api: APIClient, base: str) -> tuple[int, int, int]:
    """Hannah Ortiz and Globex Corporation in org/globex; Globex (key ``globex``, as
    Globex Corporation's) in org/acme."""
    return (
        _entity(api, base, "Hannah Ortiz", "person", "org/globex"),
        _entity(api, base, "Globex Corporation", "organisation", "org/globex"),
        _entity(api, base, "Globex", "organisation", "org/acme"),
    )


def test_a_run_means_the_readable_entity_bearing_the_name_over_a_key_match(
    api: APIClient, base: str
) -> None:
    hannah, globex_corporation, _ = _globex(api, base)

    result = _remember(api, base, HANNAH_WORKS_AT_GLOBEX)

    assert result["entities_created"] == []
    matched = {m["mention"]: (m["id"], m["matched_by"]) for m in result["entities_matched"]}
    assert matched == {
        "Hannah Ortiz": (hannah, "name"),
        "Globex Corporation": (globex_corporation, "name"),
    }
    [fact] = result["facts_created"]
    assert (fact["subject"]["id"], fact["object"]["id"]) == (hannah, globex_corporation)
    assert Entity.objects.filter(name="Hannah Ortiz").count() == 1


def test_a_fact_written_by_name_means_the_same_entities(api: APIClient, base: str) -> None:
    hannah, globex_corporation, _ = _globex(api, base)

    response = api.post(
        f"{base}/facts",
        {
            "subject": {"name": "Hannah Ortiz"},
            "predicate": "works_at",
            "object": {"name": "Globex Corporation"},
            "scope": "org/acme",
        },
        format="json",
    )

    assert response.status_code == 201, response.content
    fact = response.json()["fact"]
    assert (fact["subject"]["id"], fact["object"]["id"]) == (hannah, globex_corporation)
    assert Entity.objects.count() == 3


def test_a_writer_that_cannot_read_the_scope_keeps_to_what_it_can(
    api: APIClient, base: str, context: Context, api_client_for: Callable[..., APIClient]
) -> None:
    hannah, _, globex = _globex(api, base)
    acme_only = api_client_for(context, grants=["read,write:org/acme"])

    result = _remember(acme_only, base, HANNAH_WORKS_AT_GLOBEX)

    [created] = result["entities_created"]
    assert (created["name"], created["type"], created["scope"]) == (
        "Hannah Ortiz",
        "other",
        "org/acme",
    )
    assert created["id"] != hannah
    # Globex Corporation is not readable: the key match in the writer's scope stands.
    [matched] = result["entities_matched"]
    assert (matched["id"], matched["matched_by"]) == (globex, "key")


def test_a_typed_name_keeps_to_its_type_and_two_types_are_ambiguous(
    api: APIClient, base: str
) -> None:
    _entity(api, base, "Mercury", "location", "org/globex")
    _entity(api, base, "Mercury", "product", "org/globex")

    typed = _remember(
        api,
        base,
        {
            "attributes": [
                {"subject": "Mercury", "subject_type": "person", "key": "age", "value": 3}
            ]
        },
    )
    untyped = _remember(
        api, base, {"attributes": [{"subject": "Mercury", "key": "colour", "value": "grey"}]}
    )

    [created] = typed["entities_created"]
    assert (created["name"], created["type"]) == ("Mercury", "person")
    assert untyped["facts_created"] == []
    assert {u["code"] for u in untyped["unresolved"]} == {"ambiguous_entity"}


def _untyped_hannah(api: APIClient, base: str) -> tuple[int, int]:
    hannah = _entity(api, base, "Hannah Ortiz", "person", "org/globex")
    untyped = _entity(api, base, "Hannah Ortiz", "other", "org/acme")
    return hannah, untyped


def _pairs(api: APIClient, base: str) -> dict[frozenset[int], dict[str, Any]]:
    body = api.get(f"{base}/duplicates", {"min_score": 0}).json()
    return {
        frozenset((p["entity_a"], p["entity_b"])): p
        for cluster in body["results"]
        for p in cluster["pairs"]
    }


def test_an_untyped_entity_is_a_duplicate_of_the_typed_one_of_its_name(
    api: APIClient, base: str
) -> None:
    hannah, untyped = _untyped_hannah(api, base)

    pair = _pairs(api, base)[frozenset((hannah, untyped))]  # found as it was written

    assert pair["score"] >= 0.5
    assert "key" in pair["methods"]
    [type_field] = [f for f in pair["explain"] if f["field"] == "type"]
    assert type_field["level"] == "one of them untyped (other)"
    assert type_field["weight"] < 0  # evidence against, not a veto


def test_the_scan_and_fsck_pair_them_too(api: APIClient, base: str) -> None:
    hannah, untyped = _untyped_hannah(api, base)
    DuplicateCandidate.objects.all().delete()  # as they were before the check knew them

    report = api.post(f"{base}/fsck", {"checks": ["duplicates"]}, format="json").json()

    members = [{m["id"] for m in c["members"]} for c in report["duplicates"]["top"]]
    assert {hannah, untyped} in members
    assert frozenset((hannah, untyped)) in _pairs(api, base)


def test_manage_py_fsck_reports_the_pair(api: APIClient, base: str, context: Context) -> None:
    hannah, untyped = _untyped_hannah(api, base)
    DuplicateCandidate.objects.all().delete()
    out = StringIO()

    with pytest.raises(CommandError, match="duplicates 1"):
        call_command(
            "fsck",
            "--context",
            context.slug,
            "--check",
            "duplicates",
            "--json",
            stdout=out,
            stderr=StringIO(),
        )

    report = json.loads(out.getvalue())
    members = [{m["id"] for m in c["members"]} for c in report["duplicates"]["top"]]
    assert members == [{hannah, untyped}]


def test_two_known_types_of_one_name_are_still_never_paired(api: APIClient, base: str) -> None:
    _entity(api, base, "Apple", "product", "org/acme")
    _entity(api, base, "Apple", "organisation", "org/acme")

    api.post(f"{base}/fsck", {"checks": ["duplicates"]}, format="json")

    assert _pairs(api, base) == {}
