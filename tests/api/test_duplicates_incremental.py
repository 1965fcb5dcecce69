"""Duplicates found as entities are written — no scan — scored field by field by a
Fellegi–Sunter model, withdrawn when the evidence goes, offered in clusters that do not
chain, each pair explaining itself."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from memory.matching.scoring import date_level
from memory.models import Context, Role
from memory.models.duplicate import DuplicateCandidate, DuplicateModel, DuplicateStatus
from tests.api.conftest import assert_error

pytestmark = pytest.mark.django_db


def _person(api: APIClient, base: str, name: str, scope: str = "org/acme", **extra: Any) -> int:
    body = {"name": name, "type": "person", "scope": scope} | extra
    response = api.post(f"{base}/entities", body, format="json")
    assert response.status_code in (200, 201), response.content
    return int(response.json()["id"])


def _clusters(api: APIClient, base: str, **params: Any) -> list[dict[str, Any]]:
    response = api.get(f"{base}/duplicates", params)
    assert response.status_code == 200, response.content
    return response.json()["results"]  # type: ignore[no-any-return]


def _pair_of(api: APIClient, base: str, a: int, b: int) -> dict[str, Any] | None:
    for cluster in _clusters(api, base):
        for pair in cluster["pairs"]:
            if {pair["entity_a"], pair["entity_b"]} == {a, b}:
                return pair  # type: ignore[no-any-return]
    return None


def _fields(pair: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["field"]: f for f in pair["explain"]}


PRIYA = {"date_of_birth": "1988-04-12", "postcode": "10115", "street": "Invalidenstrasse 5"}


def test_a_written_entity_is_proposed_as_a_duplicate_without_a_scan(
    api: APIClient, base: str
) -> None:
    patel = _person(api, base, "Priya Patel", attributes=PRIYA)
    patil = _person(api, base, "Priya Patil", scope="org/globex", attributes=PRIYA)

    pair = _pair_of(api, base, patel, patil)

    assert pair is not None and pair["score"] >= 0.5
    fields = _fields(pair)
    # Every field explains itself: the name one slip apart, the attributes equal, each
    # with its weight (log2 m/u) for the pair.
    # "priya" is a word no one else here has: the slip in "patel" is telling.
    assert fields["name"]["level"] == "one telling slip apart" and fields["name"]["weight"] > 0
    assert fields["attr:date_of_birth:date"]["level"] == "equal"
    assert fields["attr:postcode:code"]["agrees"] is True
    assert fields["attr:street:text"]["weight"] > 0
    assert DuplicateCandidate.objects.get().source == "check"


def test_a_strong_disagreement_counts_against_a_pair(api: APIClient, base: str) -> None:
    a = _person(api, base, "Jonathan Miller", attributes={"date_of_birth": "1970-01-05"})
    b = _person(
        api, base, "Jonathan Miller", scope="org/globex", attributes={"date_of_birth": "1992-07-30"}
    )
    c = _person(
        api,
        base,
        "Jonathan Miller",
        scope="org/initech",
        attributes={"date_of_birth": "1970-05-01"},
    )

    # a and b: one name, two different dates of birth — not proposed; a and c: a
    # day/month swap, which is a slip, so they are.
    assert _pair_of(api, base, a, b) is None
    pair = _pair_of(api, base, a, c)
    assert pair is not None
    assert _fields(pair)["attr:date_of_birth:date"]["level"] == "day/month swap or one-digit slip"
    assert date_level("1970-01-05", "1992-07-30") == 0


def test_two_different_identifiers_of_one_kind_count_against_a_pair(
    api: APIClient, base: str
) -> None:
    a = _person(api, base, "Maria Chen", identifiers=[{"kind": "email", "value": "m@one.test"}])
    b = _person(
        api,
        base,
        "Maria Chen",
        scope="org/globex",
        identifiers=[{"kind": "email", "value": "chen@two.test"}],
    )
    c = _person(api, base, "Maria Chen", scope="org/initech")

    with_other = _pair_of(api, base, a, b)
    without = _pair_of(api, base, a, c)
    assert without is not None
    # The same name; one pair also has two different e-mail addresses.
    assert with_other is None or with_other["score"] < without["score"]


def test_a_changed_entity_is_rescored(api: APIClient, base: str) -> None:
    a = _person(api, base, "Kim Park", attributes={"city": "Seoul"})
    b = _person(api, base, "Kim Parke", scope="org/globex", attributes={"city": "Busan"})
    before = _pair_of(api, base, a, b)
    assert before is not None

    changed = api.patch(f"{base}/entities/{b}", {"attributes": {"city": "Seoul"}}, format="json")

    assert changed.status_code == 200, changed.content
    after = _pair_of(api, base, a, b)
    assert after is not None and after["score"] > before["score"]
    assert _fields(after)["attr:city:text"]["level"] == "equal"


def test_a_pair_whose_evidence_is_gone_is_withdrawn(api: APIClient, base: str) -> None:
    a = _person(api, base, "Kim Park")
    b = _person(api, base, "Kim Parke", scope="org/globex")
    assert _pair_of(api, base, a, b) is not None

    renamed = api.patch(f"{base}/entities/{b}", {"name": "Olusegun Adeyemi"}, format="json")

    assert renamed.status_code == 200, renamed.content
    assert _pair_of(api, base, a, b) is None
    assert not DuplicateCandidate.objects.exists()


def test_a_dismissed_pair_stays_dismissed_when_an_entity_changes(api: APIClient, base: str) -> None:
    a = _person(api, base, "Kim Park")
    b = _person(api, base, "Kim Parke", scope="org/globex")
    dismissed = api.post(f"{base}/duplicates/dismiss", {"entities": [a, b]}, format="json")
    assert dismissed.status_code == 200, dismissed.content

    api.patch(f"{base}/entities/{b}", {"attributes": {"city": "Seoul"}}, format="json")

    assert _pair_of(api, base, a, b) is None
    assert DuplicateCandidate.objects.get().status == DuplicateStatus.DISMISSED


def test_seeding_a_file_proposes_its_duplicates_in_one_go(api: APIClient, base: str) -> None:
    rows = [
        "name,type,scope,date_of_birth,postcode",
        "Ava Lindqvist,person,org/acme,1990-03-02,11122",
        "Ava Lindquist,person,org/globex,1990-03-02,11122",
        "Bruno Ferreira,person,org/acme,1975-11-30,40010",
        "Chiara Rossi,person,org/acme,1983-06-14,20121",
    ]

    response = api.post(
        f"{base}/entities/bulk", "\n".join(rows), content_type="text/csv", QUERY_STRING=""
    )

    assert response.status_code == 200, response.content
    clusters = _clusters(api, base)
    assert [sorted(m["name"] for m in c["members"]) for c in clusters] == [
        ["Ava Lindquist", "Ava Lindqvist"]
    ]


def test_a_merge_undo_checks_the_restored_entities_again(api: APIClient, base: str) -> None:
    a = _person(api, base, "Kim Park")
    b = _person(api, base, "Kim Parke", scope="org/globex")
    merge = api.post(f"{base}/entities/merge", {"survivor": a, "merged": [b]}, format="json")
    assert merge.status_code in (200, 201), merge.content
    assert _clusters(api, base) == []
    DuplicateCandidate.objects.all().delete()  # as before incremental checks existed

    undone = api.post(f"{base}/merges/{merge.json()['id']}/undo", format="json")

    assert undone.status_code == 200, undone.content
    assert _pair_of(api, base, a, b) is not None


def test_a_chain_of_pairs_is_offered_as_its_strongest_pairs(api: APIClient, base: str) -> None:
    # a–b and b–c are pairs (one slip each), a–c is not (two slips): no cluster a–b–c.
    a = _person(api, base, "Marianne Kowalczyk")
    b = _person(api, base, "Marianne Kowalczik", scope="org/globex")
    c = _person(api, base, "Marianna Kowalczik", scope="org/initech")
    pairs = {
        frozenset((p.entity_a_id, p.entity_b_id)): p.score for p in DuplicateCandidate.objects.all()
    }
    if frozenset((a, c)) in pairs:  # the comparators call them close: make them not a pair
        DuplicateCandidate.objects.filter(entity_a_id=min(a, c), entity_b_id=max(a, c)).delete()
        pairs.pop(frozenset((a, c)))
    assert set(pairs) == {frozenset((a, b)), frozenset((b, c))}

    clusters = _clusters(api, base)

    assert all(len(c["members"]) == 2 for c in clusters)
    # The strongest pair first (the two may tie: both are one slip).
    first = frozenset(m["id"] for m in clusters[0]["members"])
    assert first in pairs and pairs[first] == max(pairs.values())


def test_a_scan_learns_the_weights_of_the_context(
    api: APIClient, base: str, context: Context
) -> None:
    rng = random.Random(5)
    lines = ["name,type,scope,date_of_birth,postcode"]
    for i in range(260):
        given, family = _word(rng, 2), _word(rng, 3)
        born = f"{rng.randint(1940, 2005)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        postcode = str(rng.randint(10000, 99999))
        lines.append(f"{given} {family},person,org/acme,{born},{postcode}")
        if i % 4 == 0:  # a quarter of them again, from another source, with a slip
            lines.append(f"{given} {family[:-1]}x,person,org/globex,{born},{postcode}")
    seeded = api.post(f"{base}/entities/bulk", "\n".join(lines), content_type="text/csv")
    assert seeded.status_code == 200, seeded.content

    report = api.post(f"{base}/fsck", {"checks": ["duplicates"]}, format="json")

    assert report.status_code == 200, report.content
    model = DuplicateModel.objects.get(context=context)
    assert model.params["fitted_pairs"] >= 200
    person = model.params["types"]["person"]
    dob = person["fields"]["attr:date_of_birth:date"]
    assert dob["m"][-1] > 0.5 > dob["u"][-1]  # equal dates: likely for one person, not two
    # The prior is over all 325 * 324 / 2 pairs of people, about the 65 that are one.
    assert person["pairs"] == 325 * 324 / 2
    assert 40 < person["prior"] * person["pairs"] < 90
    clusters = _clusters(api, base, limit=1000)
    assert len(clusters) == 65 and all(len(c["members"]) == 2 for c in clusters)


def _word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice("bdfgklmnprstvz") + rng.choice("aeiou") for _ in range(syllables))


def test_bad_list_parameters_are_a_400(api: APIClient, base: str) -> None:
    assert_error(api.get(f"{base}/duplicates", {"offset": -1}), 400)
    assert_error(api.get(f"{base}/duplicates", {"limit": "many"}), 400)
    assert_error(api.get(f"{base}/duplicates", {"min_score": 2}), 400)


def test_a_reader_without_a_grant_on_a_scope_sees_no_pair_into_it(
    api: APIClient, base: str, context: Context, api_client_for: Callable[..., APIClient]
) -> None:
    _person(api, base, "Kim Park")
    _person(api, base, "Kim Parke", scope="org/globex")
    narrow = api_client_for(context, role=Role.VIEWER, grants=["read:org/acme"])

    assert _clusters(narrow, base) == []
    assert len(_clusters(api, base)) == 1


def test_an_entity_is_checked_again_once_its_vector_is_written(api: APIClient, base: str) -> None:
    from memory.services.vectors import embeddings_drain

    org = {"type": "organisation"}
    a = _person(api, base, "Acme Corp", **org)
    b = _person(api, base, "ACME Inc.", scope="org/globex", **org)
    before = _pair_of(api, base, a, b)
    # Found by name as they were written; their vectors do not exist yet.
    assert before is not None and "embedding" not in before["methods"]

    embeddings_drain()  # what the worker runs after the commit

    after = _pair_of(api, base, a, b)
    # The drain's check asked the new vectors' neighbours: each is the other's.
    assert after is not None and "embedding" in after["methods"]
