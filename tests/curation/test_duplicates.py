"""The duplicates screen: clusters, preview, merge (and its undo), dismiss and scan."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from memory.domain.access import ContextAccess
from memory.models import AuditEvent, Entity, Fact, Role
from memory.models.duplicate import DuplicateCandidate, DuplicateStatus
from memory.models.merge import Merge
from memory.services.facts.write import fact_write
from tests.curation.conftest import page, person

pytestmark = pytest.mark.django_db


@dataclass
class Pair:
    alex: Entity
    alexander: Entity
    acme: Entity

    @property
    def ids(self) -> list[int]:
        return [self.alex.pk, self.alexander.pk]


def candidate(a: Entity, b: Entity, score: float = 0.9, methods: tuple[str, ...] = ()) -> Any:
    """The pair as a curator would find it (the write's own check may have stored it
    already: its score and methods are set to these)."""
    low, high = sorted([a, b], key=lambda e: e.pk)
    return DuplicateCandidate.objects.update_or_create(
        context=a.context,
        entity_a=low,
        entity_b=high,
        defaults={"score": score, "methods": list(methods or ("edit_distance", "phonetic"))},
    )[0]


@pytest.fixture
def pair(access: ContextAccess) -> Pair:
    """ "Alex Smith" and "Alexander Smith", each with a fact, proposed as duplicates."""
    alex, alexander = person(access, "Alex Smith"), person(access, "Alexander Smith")
    acme = person(access, "Acme Person")
    fact_write(access=access, subject=alex, predicate="knows", object=acme)
    fact_write(access=access, subject=alexander, predicate="lives_in", value="Berlin")
    candidate(alex, alexander)
    return Pair(alex, alexander, acme)


def _writes() -> tuple[int, int, int, list[tuple[int, int | None]]]:
    """Enough of the database to see that a refused action changed nothing."""
    merged: list[tuple[int, int | None]] = sorted(
        Entity.objects.values_list("pk", "merged_into_id")
    )
    return (
        AuditEvent.objects.count(),
        Merge.objects.count(),
        DuplicateCandidate.objects.filter(status=DuplicateStatus.OPEN).count(),
        merged,
    )


def _form(pair: Pair, survivor: Entity | None = None, name: str = "") -> dict[str, Any]:
    return {"ids": pair.ids, "survivor": (survivor or pair.alex).pk, "name": name}


def test_clusters_are_listed_with_their_methods(viewer: Client, base: str, pair: Pair) -> None:
    html = page(viewer.get(f"{base}/duplicates/"))

    assert "Alex Smith" in html and "Alexander Smith" in html
    # The finders in plain words, not their code names.
    assert "a letter or two apart" in html and "names sound alike" in html
    assert ">phonetic<" not in html and ">edit distance<" not in html
    assert "/duplicates/merge" not in html  # a viewer has no merge buttons
    assert 'aria-current="page">Duplicates' in html


def test_clusters_are_ranked_by_score(access: ContextAccess, viewer: Client, base: str) -> None:
    a, b, c, d = (person(access, n) for n in ("Bo Lee", "Bo Li", "Cy Tan", "Cy Tang"))
    candidate(a, b, score=0.6)
    candidate(c, d, score=0.95)

    html = page(viewer.get(f"{base}/duplicates/"))

    assert html.index("Cy Tan") < html.index("Bo Lee")


def test_preview_shows_what_moves_and_writes_nothing(
    curator: Client, base: str, pair: Pair
) -> None:
    before = _writes()

    response = curator.post(
        f"{base}/duplicates/preview", _form(pair, pair.alex, name="Alexander J. Smith")
    )

    html = page(response)
    assert response.status_code == 200
    assert 'Merging into <strong data-testid="final-name">Alexander J. Smith</strong>' in html
    assert 'data-testid="facts-moving">1<' in html
    assert '<span class="chip">Alexander Smith</span>' in html
    assert _writes() == before


def test_the_preview_lists_each_moving_fact_with_its_fate(
    curator: Client, base: str, pair: Pair
) -> None:
    html = page(curator.post(f"{base}/duplicates/preview", _form(pair, pair.alex)))
    table = html[html.index('data-testid="moving-facts"') :]
    assert "<code>lives_in</code>" in table and "Berlin" in table and "moves" in table
    assert "scope-warning" not in html  # one scope: no warning


def test_choosing_another_survivor_previews_its_name(
    curator: Client, base: str, pair: Pair
) -> None:
    # The name box still holds the first survivor's name when the radio changes.
    form = {**_form(pair, pair.alexander, name="Alex Smith"), "survivor_changed": "1"}
    html = page(curator.post(f"{base}/duplicates/preview", form, HTTP_HX_REQUEST="true"))
    assert 'data-testid="final-name">Alexander Smith<' in html
    assert 'value="Alexander Smith"' in html and 'hx-swap-oob="true"' in html
    # A name the curator typed (no survivor change) is kept.
    typed = page(
        curator.post(
            f"{base}/duplicates/preview",
            _form(pair, pair.alexander, name="A. Smith"),
            HTTP_HX_REQUEST="true",
        )
    )
    assert 'data-testid="final-name">A. Smith<' in typed and "hx-swap-oob" not in typed


def test_the_preview_warns_when_members_live_in_different_scope_branches(
    access: ContextAccess, curator: Client, base: str
) -> None:
    one = person(access, "Jo Park", scope="org/acme/team/a")
    other = person(access, "Jo Parke", scope="org/acme/team/b")
    candidate(one, other)
    form = {"ids": [one.pk, other.pk], "survivor": one.pk, "name": ""}
    html = page(curator.post(f"{base}/duplicates/preview", form, HTTP_HX_REQUEST="true"))
    assert 'data-testid="scope-warning"' in html
    assert "<code>org/acme/team/a</code>, <code>org/acme/team/b</code>" in html


def test_htmx_preview_answers_only_the_preview_partial(
    curator: Client, base: str, pair: Pair
) -> None:
    response = curator.post(f"{base}/duplicates/preview", _form(pair), HTTP_HX_REQUEST="true")

    html = page(response)
    assert html.lstrip().startswith('<div class="merge-preview"')
    assert "<html" not in html


def test_merge_then_undo_restores_the_entities(curator: Client, base: str, pair: Pair) -> None:
    response = curator.post(f"{base}/duplicates/merge", _form(pair, pair.alex, name="Alex Smith"))

    assert response.status_code == 302
    pair.alexander.refresh_from_db()
    assert pair.alexander.merged_into_id == pair.alex.pk
    assert set(Fact.objects.values_list("subject_id", flat=True)) == {pair.alex.pk}
    merge = Merge.objects.get()
    html = page(curator.get(response["Location"]))
    assert "Merged 1 entity into Alex Smith." in html
    assert f"/merges/{merge.pk}/undo" in html  # the message's Undo button
    assert "No open duplicate clusters" in html

    undone = curator.post(f"{base}/merges/{merge.pk}/undo", {"next": f"{base}/duplicates/"})

    assert undone.status_code == 302 and undone["Location"] == f"{base}/duplicates/"
    pair.alexander.refresh_from_db()
    assert pair.alexander.merged_into_id is None
    assert Fact.objects.get(predicate__name="lives_in").subject_id == pair.alexander.pk
    html = page(curator.get(f"{base}/duplicates/"))
    assert "Undid the merge into Alex Smith." in html
    assert "Alexander Smith" in html  # the cluster is proposed again


def test_undoing_twice_says_why(curator: Client, base: str, pair: Pair) -> None:
    curator.post(f"{base}/duplicates/merge", _form(pair))
    url = f"{base}/merges/{Merge.objects.get().pk}/undo"
    curator.post(url)

    again = curator.post(url, follow=True)

    assert "already undone" in page(again)


def test_htmx_merge_answers_the_list_with_the_message(
    curator: Client, base: str, pair: Pair
) -> None:
    response = curator.post(f"{base}/duplicates/merge", _form(pair), HTTP_HX_REQUEST="true")

    html = page(response)
    assert html.lstrip().startswith('<div id="duplicate-clusters">')
    assert "hx-swap-oob" in html and "/undo" in html


def test_dismiss_keeps_the_pair_from_coming_back(curator: Client, base: str, pair: Pair) -> None:
    response = curator.post(f"{base}/duplicates/dismiss", {"ids": pair.ids})

    assert response.status_code == 302
    assert DuplicateCandidate.objects.get().status == DuplicateStatus.DISMISSED
    assert "No open duplicate clusters" in page(curator.get(f"{base}/duplicates/"))


def test_dismiss_message_offers_an_undo_that_brings_the_pair_back(
    curator: Client, base: str, pair: Pair
) -> None:
    response = curator.post(f"{base}/duplicates/dismiss", {"ids": pair.ids}, follow=True)

    html = page(response)
    event = AuditEvent.objects.get(action="duplicates_dismiss")
    assert "Marked 2 entities as not duplicates" in html
    assert f'action="{base}/audit/{event.pk}/undo"' in html
    undone = curator.post(f"{base}/audit/{event.pk}/undo", {"next": f"{base}/duplicates/"})
    assert undone["Location"] == f"{base}/duplicates/"
    assert DuplicateCandidate.objects.get().status == DuplicateStatus.OPEN
    assert "Alexander Smith" in page(curator.get(f"{base}/duplicates/"))


def test_htmx_dismiss_answers_the_list_with_the_undo_message(
    curator: Client, base: str, pair: Pair
) -> None:
    response = curator.post(f"{base}/duplicates/dismiss", {"ids": pair.ids}, HTTP_HX_REQUEST="true")

    html = page(response)
    event = AuditEvent.objects.get(action="duplicates_dismiss")
    assert html.lstrip().startswith('<div id="duplicate-clusters">')
    assert "hx-swap-oob" in html and f"/audit/{event.pk}/undo" in html


def test_clusters_are_paginated(access: ContextAccess, viewer: Client, base: str) -> None:
    for i in range(30):
        candidate(person(access, f"Kim Park {i}"), person(access, f"Kim Parke {i}"), 0.5 + i / 100)

    first = viewer.get(f"{base}/duplicates/")
    second = viewer.get(f"{base}/duplicates/?page=2")

    assert len(first.context["rows"]) == 25 and len(second.context["rows"]) == 5
    assert first.context["rows"][0].cluster.score == pytest.approx(0.79)
    assert "30 clusters" in page(first) and "Page 2 of 2" in page(second)
    assert len(viewer.get(f"{base}/duplicates/?page=9").context["rows"]) == 5


def test_scan_runs_as_a_task_and_finds_near_identical_names(
    access: ContextAccess,
    curator: Client,
    base: str,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.TASKS = {"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}
    person(access, "Jonathan Miller")
    person(access, "Jonathon Miller")

    with django_capture_on_commit_callbacks(execute=True):
        response = curator.post(f"{base}/duplicates/scan")

    assert response["Location"] == f"{base}/duplicates/"
    html = page(curator.get(response["Location"]))
    assert "Scanning 2 entities in the background" in html
    assert "Jonathon Miller" in html and DuplicateCandidate.objects.count() == 1


def test_a_second_scan_of_a_context_waits_for_the_running_one(
    access: ContextAccess, settings: Any
) -> None:
    from memory.infra.locks import DUPLICATE_SCAN_LOCK
    from memory.tasks import duplicates_scan_task

    settings.TASKS = {"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}
    person(access, "Jonathan Miller")
    person(access, "Jonathon Miller")
    other = connection.get_new_connection(connection.get_connection_params())
    try:
        other.execute("SELECT pg_advisory_lock(%s, %s)", [DUPLICATE_SCAN_LOCK, access.context.pk])
        skipped = duplicates_scan_task.call(access.context.pk)
        # Released here: closing the connection alone returns before the server's
        # backend has ended and let go of the lock.
        other.execute("SELECT pg_advisory_unlock(%s, %s)", [DUPLICATE_SCAN_LOCK, access.context.pk])
    finally:
        other.close()

    assert "already running" in str(skipped["skipped"])
    assert not DuplicateCandidate.objects.filter(source="scan").exists()
    assert duplicates_scan_task.call(access.context.pk)["stored"] == 1


@pytest.mark.parametrize(
    ("path", "data"),
    [
        ("duplicates/preview", "form"),
        ("duplicates/merge", "form"),
        ("duplicates/dismiss", "form"),
        ("duplicates/scan", {}),
        ("merges/{merge}/undo", {}),
    ],
)
def test_viewer_cannot_merge_dismiss_scan_or_undo(
    access: ContextAccess,
    client_for: Callable[..., Client],
    base: str,
    pair: Pair,
    path: str,
    data: Any,
) -> None:
    merge = Merge.objects.create(
        context=access.context, survivor=pair.alex, merged_ids=[], final_name="x", snapshot={}
    )
    before = _writes()

    response = client_for(Role.VIEWER).post(
        f"{base}/" + path.format(merge=merge.pk), _form(pair) if data == "form" else data
    )

    assert response.status_code == 403
    assert "needs the curator role" in page(response)
    assert _writes() == before


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"survivor": "outsider"}, "must be one of the cluster"),
        ({"survivor": None}, "choose the entity that survives"),
        ({"ids": [999998, 999999], "survivor": 999999}, "entities not found"),
        ({"ids": ["x", "y"]}, "ids must be whole numbers"),
        ({"ids": ["1"]}, "a cluster has 2"),
        ({"name": "x" * 301}, "at most 300 characters"),
        ({"name": "!!!"}, "at least one letter or digit"),
    ],
)
@pytest.mark.parametrize("action", ["preview", "merge"])
def test_bad_merge_input_is_a_400_with_a_message_and_writes_nothing(
    curator: Client, base: str, pair: Pair, data: dict[str, Any], message: str, action: str
) -> None:
    form = _form(pair)
    form.update(data)
    if form["survivor"] == "outsider":
        form["survivor"] = pair.acme.pk
    if form["survivor"] is None:
        del form["survivor"]
    before = _writes()

    response = curator.post(f"{base}/duplicates/{action}", form)

    assert response.status_code == 400
    assert message in page(response)
    assert _writes() == before


def test_htmx_bad_preview_is_retargeted_to_the_list(curator: Client, base: str, pair: Pair) -> None:
    form = {**_form(pair), "survivor": pair.acme.pk}

    response = curator.post(f"{base}/duplicates/preview", form, HTTP_HX_REQUEST="true")

    assert response.status_code == 400
    assert response["HX-Retarget"] == "#duplicate-clusters"
    assert "must be one of the cluster" in page(response)


def test_dismissing_unknown_entities_is_a_400(curator: Client, base: str, pair: Pair) -> None:
    before = _writes()

    response = curator.post(f"{base}/duplicates/dismiss", {"ids": [pair.alex.pk, 999999]})

    assert response.status_code == 400
    assert "do not exist here" in page(response)
    assert _writes() == before


def test_undo_of_an_unknown_merge_is_404(curator: Client, base: str) -> None:
    assert curator.post(f"{base}/merges/999999/undo").status_code == 404


def test_duplicates_page_query_count_does_not_grow(
    access: ContextAccess, viewer: Client, base: str, django_assert_num_queries: Any
) -> None:
    for round_ in range(2):
        if round_:
            for i in range(5):
                candidate(person(access, f"Kim Park {i}"), person(access, f"Kim Parke {i}"))
        # session, user, context, membership, contexts (switcher); open pairs as ids; the
        # page's entities and pairs and the fact counts of its members (skipped when
        # there are none); whether a scan is running (the list polls while one is); facts
        # waiting for review (navigation)
        with django_assert_num_queries(11 if round_ else 8):
            response = viewer.get(f"{base}/duplicates/")
        assert len(response.context["rows"]) == 5 * round_


def test_a_chain_is_split_into_its_strongest_pairs(
    access: ContextAccess, viewer: Client, base: str
) -> None:
    a, b, c, d = (person(access, f"Robin Vale {i}") for i in range(4))
    x, y = person(access, "Kim Park"), person(access, "Kim Parke")
    candidate(c, d, 0.95)  # a chain: a–b, b–c, c–d (found in any order) ...
    candidate(a, b, 0.85)
    candidate(b, c, 0.9)
    candidate(x, y, 0.97)  # ... and a pair on its own

    rows = viewer.get(f"{base}/duplicates/").context["rows"]

    # b–c is weaker than c–d and b is not paired with d: no cluster a–b–c–d.
    assert [{m.pk for m in row.cluster.members} for row in rows] == [
        {x.pk, y.pk},
        {c.pk, d.pk},
        {a.pk, b.pk},
    ]
    assert [row.cluster.score for row in rows][1:] == [0.95, 0.85]


def test_members_paired_with_one_another_form_one_cluster(
    access: ContextAccess, viewer: Client, base: str
) -> None:
    a, b, c = (person(access, f"Robin Vale {i}") for i in range(3))
    candidate(a, b, 0.9)
    candidate(b, c, 0.8)
    candidate(a, c, 0.7)

    rows = viewer.get(f"{base}/duplicates/").context["rows"]

    assert len(rows) == 1 and {m.pk for m in rows[0].cluster.members} == {a.pk, b.pk, c.pk}
    assert [p.score for p in rows[0].cluster.pairs] == [0.9, 0.8, 0.7]


def test_the_survivor_is_pre_selected_by_the_rule_the_page_states(
    access: ContextAccess, curator: Client, base: str, pair: Pair
) -> None:
    response = curator.get(f"{base}/duplicates/")
    html = page(response)
    [row] = response.context["rows"]
    rule = "a seeded (canonical) entity first, then the one with the most facts, then the most"
    assert rule in html
    # One fact each, no aliases: the longer name.
    assert (row.survivor_id, row.name) == (pair.alexander.pk, "Alexander Smith")
    assert (
        f'value="{pair.alexander.pk}" id="survivor-{row.key}-{pair.alexander.pk}" checked' in html
    )

    fact_write(access=access, subject=pair.alex, predicate="lives_in", value="Paris")
    [row] = curator.get(f"{base}/duplicates/").context["rows"]
    assert row.survivor_id == pair.alex.pk  # more facts outweigh the longer name

    pair.alexander.seeded = True
    pair.alexander.save(update_fields=["seeded"])
    [row] = curator.get(f"{base}/duplicates/").context["rows"]
    assert row.survivor_id == pair.alexander.pk  # a seeded entity first of all
