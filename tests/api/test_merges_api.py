from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rest_framework.test import APIClient

from memory.models import AuditEvent, Context, Entity, Fact, Role
from memory.models.duplicate import DuplicateCandidate, DuplicateStatus
from tests.api.conftest import assert_error, response_schema


def _entity(
    api: APIClient,
    base: str,
    name: str,
    type_: str = "organisation",
    scope: str = "org/acme",
    **extra: object,
) -> int:
    response = api.post(
        f"{base}/entities", {"name": name, "type": type_, "scope": scope, **extra}, format="json"
    )
    assert response.status_code in (200, 201), response.content
    return int(response.json()["id"])


def _fact(api: APIClient, base: str, **body: object) -> dict:  # type: ignore[type-arg]
    response = api.post(f"{base}/facts", {"scope": "org/acme", **body}, format="json")
    assert response.status_code in (200, 201), response.content
    return response.json()  # type: ignore[no-any-return]


def test_fsck_finds_duplicates_by_several_methods(api: APIClient, base: str) -> None:
    acme = _entity(api, base, "Acme Corp")
    acme_inc = _entity(api, base, "ACME Inc.", scope="org/globex")
    jon = _entity(api, base, "Jon Smith", "person")
    john = _entity(api, base, "John Smith", "person")
    _entity(api, base, "Globex", scope="org/globex")
    _entity(api, base, "Apple", "product")
    _entity(api, base, "Apple", "organisation")
    report = api.post(f"{base}/fsck", {"checks": ["duplicates"]}, format="json").json()
    clusters = api.get(f"{base}/duplicates").json()["results"]
    members = [sorted(m["id"] for m in c["members"]) for c in clusters]
    assert sorted([acme, acme_inc]) in members
    assert sorted([jon, john]) in members
    assert report["duplicates"]["clusters"] == len(clusters)
    jon_cluster = next(c for c in clusters if {m["id"] for m in c["members"]} == {jon, john})
    assert "phonetic" in jon_cluster["methods"]
    # Same name, different types: never proposed.
    assert not any(
        {m["type"] for m in c["members"]} == {"product", "organisation"} for c in clusters
    )


def test_fsck_counts_every_cluster_and_shows_the_best(api: APIClient, base: str) -> None:
    """More clusters than the report samples: the count is all of them, not the sample."""
    names = [
        "Quillon", "Brastova", "Termidex", "Ogravia", "Pelluxa", "Virandol", "Castrimo",
        "Deluvian", "Frondeka", "Gravilux", "Hestamor", "Ixtarion", "Jubrella", "Kolvinth",
        "Lumbrosa", "Mextrava", "Norvalee", "Optiquar", "Prandolo", "Questrim", "Ruvalcan",
        "Sestorio", "Tumbrali", "Ulvareth", "Wexomund",
    ]  # fmt: skip
    for name in names:  # in two scopes (one scope's writes resolve to one entity)
        _entity(api, base, name)
        _entity(api, base, f"{name.upper()} Ltd.", scope="org/globex")
    report = api.post(f"{base}/fsck", {"checks": ["duplicates"]}, format="json").json()
    duplicates = report["duplicates"]
    # 24 or 25: two of the invented names may sound alike and join one cluster.
    assert duplicates["clusters"] == api.get(f"{base}/duplicates").json()["count"] > 20
    assert len(duplicates["top"]) == 20
    scores = [c["score"] for c in duplicates["top"]]
    assert scores == sorted(scores, reverse=True)


def test_dismissed_pairs_are_not_proposed_again(api: APIClient, base: str) -> None:
    jon = _entity(api, base, "Jon Smith", "person")
    john = _entity(api, base, "John Smith", "person")
    api.post(f"{base}/fsck", {"checks": ["duplicates"]}, format="json")
    assert api.get(f"{base}/duplicates").json()["count"] == 1
    dismissed = api.post(f"{base}/duplicates/dismiss", {"entities": [jon, john]}, format="json")
    assert dismissed.json() == {"dismissed_pairs": 1}
    api.post(f"{base}/fsck", {"checks": ["duplicates"]}, format="json")
    assert api.get(f"{base}/duplicates").json()["count"] == 0


def test_preview_then_merge_then_undo_restores_exactly(api: APIClient, base: str) -> None:
    acme = _entity(api, base, "Acme Corp", identifiers=[{"kind": "domain", "value": "acme.com"}])
    dup = _entity(
        api,
        base,
        "ACME Incorporated Holdings",
        attributes={"hq": "Berlin"},
        identifiers=[{"kind": "email", "value": "info@acme.com"}],
    )
    alex = _entity(api, base, "Alex", "person")
    _fact(api, base, subject=alex, predicate="works_at", object=dup)
    _fact(
        api,
        base,
        subject=dup,
        predicate="located_in",
        object={"name": "Berlin", "type": "location"},
    )
    before_facts = sorted(Fact.objects.values_list("pk", "subject_id", "object_id", "status"))

    preview = api.post(
        f"{base}/entities/merge",
        {"survivor": acme, "merged": [dup], "preview": True},
        format="json",
    )
    assert preview.status_code == 200, preview.content
    plan = preview.json()
    assert plan["facts_moving"] == 2
    assert plan["aliases_added"] == ["ACME Incorporated Holdings"]
    assert plan["identifiers_moving"] == ["email:info@acme.com"]
    assert sorted(
        (f["subject"], f["predicate"], f["object"], f["fate"]) for f in plan["facts"]
    ) == [
        ("ACME Incorporated Holdings", "located_in", "Berlin", "moves"),
        ("Alex", "works_at", "ACME Incorporated Holdings", "moves"),
    ]
    assert plan["scope_branches"] == []
    assert Entity.objects.get(pk=dup).merged_into_id is None  # preview wrote nothing

    merged = api.post(f"{base}/entities/merge", {"survivor": acme, "merged": [dup]}, format="json")
    assert merged.status_code == 201, merged.content
    works_at = api.get(f"{base}/facts", {"predicate": "works_at"}).json()["results"][0]
    assert works_at["object"]["id"] == acme
    survivor = api.get(f"{base}/entities/{acme}").json()
    assert "ACME Incorporated Holdings" in survivor["aliases"]
    assert survivor["attributes"] == {"hq": "Berlin"}
    assert {i["value"] for i in survivor["identifiers"]} == {"acme.com", "info@acme.com"}
    assert api.get(f"{base}/entities/{dup}").json()["merged_into"] == acme
    # An agent holding the old id still lands on the survivor.
    redirected = _fact(api, base, subject=dup, predicate="current_title", value="x")
    assert redirected["fact"]["subject"]["id"] == acme
    api.delete(f"{base}/facts/{redirected['fact']['id']}")

    undone = api.post(f"{base}/merges/{merged.json()['id']}/undo")
    assert undone.status_code == 200, undone.content
    restored = api.get(f"{base}/entities/{dup}").json()
    assert restored["merged_into"] is None and restored["attributes"] == {"hq": "Berlin"}
    assert [i["value"] for i in restored["identifiers"]] == ["info@acme.com"]
    assert api.get(f"{base}/entities/{acme}").json()["aliases"] == []
    after = sorted(
        Fact.objects.exclude(status="retracted").values_list(
            "pk", "subject_id", "object_id", "status"
        )
    )
    assert after == before_facts
    assert AuditEvent.objects.get(action="entity_merge").undone_at is not None
    assert_error(api.post(f"{base}/merges/{merged.json()['id']}/undo"), 409, "already_undone")


def test_merge_folds_identical_facts_and_contests_single_values(api: APIClient, base: str) -> None:
    a = _entity(api, base, "Jon Smith", "person")
    b = _entity(api, base, "John Smith", "person")
    acme = _entity(api, base, "Acme")
    _fact(api, base, subject=a, predicate="works_at", object=acme)
    _fact(api, base, subject=b, predicate="works_at", object=acme)
    _fact(api, base, subject=a, predicate="current_title", value="CTO")
    # Under the one collision rule, the moving value needs confidence >= 0.7 and >= the
    # survivor's to replace it: at 0.6 it is contested.
    _fact(api, base, subject=b, predicate="current_title", value="VP Engineering", confidence=0.6)
    plan = api.post(
        f"{base}/entities/merge", {"survivor": a, "merged": [b], "preview": True}, format="json"
    ).json()
    assert len(plan["folded"]) == 1 and len(plan["contested"]) == 1
    assert plan["superseded"] == []
    api.post(
        f"{base}/entities/merge",
        {"survivor": a, "merged": [b], "name": "John Smith"},
        format="json",
    )
    current = api.get(f"{base}/facts", {"subject": a}).json()["results"]
    assert sorted(f["predicate"] for f in current) == ["current_title", "works_at"]
    assert next(f for f in current if f["predicate"] == "works_at")["observed_count"] == 2
    assert api.get(f"{base}/conflicts").json()["count"] == 1
    assert api.get(f"{base}/entities/{a}").json()["name"] == "John Smith"


def test_undo_explains_what_blocks_it(api: APIClient, base: str) -> None:
    a = _entity(api, base, "Acme")
    b = _entity(api, base, "Acme Group")
    c = _entity(api, base, "Acme Holding")
    first = api.post(f"{base}/entities/merge", {"survivor": a, "merged": [b]}, format="json").json()
    api.post(f"{base}/entities/merge", {"survivor": c, "merged": [a]}, format="json")
    assert_error(api.post(f"{base}/merges/{first['id']}/undo"), 409, "undo_blocked")


def test_bad_merges_write_nothing(api: APIClient, base: str) -> None:
    a = _entity(api, base, "Acme")
    b = _entity(api, base, "Globex")
    for body in (
        {"survivor": a, "merged": [a]},
        {"survivor": a, "merged": []},
        {"survivor": a, "merged": [999999]},
        {"survivor": "x", "merged": [b]},
        {"survivor": a, "merged": [b], "name": "y" * 400},
    ):
        response = api.post(f"{base}/entities/merge", body, format="json")
        assert 400 <= response.status_code < 500, body
    assert not Entity.objects.filter(merged_into__isnull=False).exists()


def test_viewer_cannot_merge_dismiss_or_fsck(
    api: APIClient, base: str, context: Context, api_client_for: Callable[..., APIClient]
) -> None:
    a = _entity(api, base, "Acme")
    b = _entity(api, base, "ACME Group")
    viewer = api_client_for(context, role=Role.VIEWER)
    assert_error(
        viewer.post(f"{base}/entities/merge", {"survivor": a, "merged": [b]}, format="json"),
        403,
        "role_required",
    )
    assert_error(
        viewer.post(f"{base}/duplicates/dismiss", {"entities": [a, b]}, format="json"),
        403,
        "role_required",
    )
    assert_error(viewer.post(f"{base}/fsck", {"checks": ["orphans"]}, format="json"), 403)
    # The writes' own check may have proposed the pair; nothing dismissed or merged it.
    assert not DuplicateCandidate.objects.exclude(status=DuplicateStatus.OPEN).exists()


def test_merge_needs_write_grants_on_every_entity(
    api: APIClient, base: str, context: Context, api_client_for: Callable[..., APIClient]
) -> None:
    a = _entity(api, base, "Acme", scope="org/acme")
    b = _entity(api, base, "ACME Inc", scope="org/globex")
    limited = api_client_for(context, role=Role.CURATOR, grants=["read:*", "write:org/acme/*"])
    assert_error(
        limited.post(f"{base}/entities/merge", {"survivor": a, "merged": [b]}, format="json"),
        403,
        "scope_forbidden",
    )
    hidden = api_client_for(context, role=Role.CURATOR, grants=["read,write:org/acme/*"])
    assert_error(
        hidden.post(f"{base}/entities/merge", {"survivor": a, "merged": [b]}, format="json"), 404
    )


def test_duplicates_respect_read_grants(
    api: APIClient, base: str, context: Context, api_client_for: Callable[..., APIClient]
) -> None:
    _entity(api, base, "Acme", scope="org/acme")
    _entity(api, base, "ACME Inc", scope="org/globex")
    api.post(f"{base}/fsck", {"checks": ["duplicates"]}, format="json")
    assert api.get(f"{base}/duplicates").json()["count"] == 1
    limited = api_client_for(context, role=Role.CURATOR, grants=["read,write:org/acme/*"])
    assert limited.get(f"{base}/duplicates").json()["count"] == 0


def test_fsck_reports_orphans_and_vocabulary(api: APIClient, base: str) -> None:
    _fact(api, base, subject={"name": "Alex"}, predicate="worksFor", object={"name": "Acme"})
    _fact(api, base, subject={"name": "Alex"}, predicate="knows", object={"name": "Sam"})
    report = api.post(f"{base}/fsck", {"checks": ["orphans", "vocabulary"]}, format="json").json()
    assert report["orphans"]["facts_on_merged_entities"] == 0
    assert report["vocabulary"]["registered_share"] == 0.5
    assert report["vocabulary"]["observed_sample"] == ["works_for"]
    assert_error(api.post(f"{base}/fsck", {"checks": ["everything"]}, format="json"), 400)


def test_duplicates_list_is_documented_as_answered(
    api: APIClient, base: str, openapi: dict[str, Any]
) -> None:
    # An object with a count, documented as a bare array.
    body = api.get(f"{base}/duplicates").json()
    assert body == {"count": 0, "total": 0, "results": []}
    schema = response_schema(openapi, "GET", "/duplicates", 200)
    assert set(schema["properties"]) == {"count", "total", "results"}


def test_an_id_listed_twice_is_refused(api: APIClient, base: str, openapi: dict[str, Any]) -> None:
    # [a, a] passed the 2-50 length check and then failed the service's count of distinct ids.
    a, b = _entity(api, base, "Acme"), _entity(api, base, "Globex")
    dismissed = api.post(f"{base}/duplicates/dismiss", {"entities": [a, a, b]}, format="json")
    assert_error(dismissed, 400, "invalid")
    merged = api.post(f"{base}/entities/merge", {"survivor": a, "merged": [b, b]}, format="json")
    assert_error(merged, 400, "invalid")
    assert Entity.objects.filter(merged_into__isnull=False).count() == 0
    assert not DuplicateCandidate.objects.exists()
    dismiss = openapi["components"]["schemas"]["DuplicateDismissInputRequest"]
    assert dismiss["properties"]["entities"]["uniqueItems"] is True


def test_the_preview_names_the_scope_branches_of_its_members(api: APIClient, base: str) -> None:
    one = _entity(api, base, "Globex", scope="org/acme/team/a")
    other = _entity(api, base, "Globex Inc", scope="org/acme/team/b")
    inside = _entity(api, base, "Globex Corp", scope="org/acme/team/a/x")
    apart = api.post(
        f"{base}/entities/merge",
        {"survivor": one, "merged": [other], "preview": True},
        format="json",
    ).json()
    assert apart["scope_branches"] == ["org/acme/team/a", "org/acme/team/b"]
    nested = api.post(
        f"{base}/entities/merge",
        {"survivor": one, "merged": [inside], "preview": True},
        format="json",
    ).json()
    assert nested["scope_branches"] == []
