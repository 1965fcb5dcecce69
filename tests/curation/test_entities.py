"""The entities screens: list with filters and search, detail with facts, timeline and
the neighbourhood picture, and a curator's edits."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from curation.views.entities import INCOMING, RANKED, TIMELINE
from memory.domain.access import ContextAccess
from memory.models import AuditEvent, Entity, Fact, Role
from memory.selectors.facts import entity_facts_ranked
from memory.services.entities.writes import IdentifierInput, entity_upsert
from memory.services.facts.write import fact_write
from tests.curation.conftest import Memory, page, person

pytestmark = pytest.mark.django_db


def test_list_shows_entities_with_their_fact_counts(
    viewer: Client, base: str, memory: Memory
) -> None:
    response = viewer.get(f"{base}/entities/")

    rows = {entity.name: count for entity, count in response.context["rows"]}
    assert rows == {"Alex": 3, "Sam": 1, "Acme": 0}  # current facts as subject


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("q=ale", {"Alex"}),
        ("type=organisation", {"Acme"}),
        ("scope=org/acme", {"Alex", "Sam", "Acme"}),
        ("scope=org/other", set()),
        ("seeded=yes", set()),
        ("seeded=no&type=person", {"Alex", "Sam"}),
    ],
)
def test_filters(viewer: Client, base: str, memory: Memory, query: str, names: set[str]) -> None:
    response = viewer.get(f"{base}/entities/?{query}")

    assert {entity.name for entity, _ in response.context["rows"]} == names


def test_search_as_you_type_answers_the_results_partial(
    viewer: Client, base: str, memory: Memory
) -> None:
    html = page(viewer.get(f"{base}/entities/?q=sam", HTTP_HX_REQUEST="true"))

    assert html.lstrip().startswith('<div id="entity-results">')
    assert "Sam" in html and "Alex" not in html and "<form" not in html


@pytest.mark.parametrize("query", ["scope=bad scope!", "type=alien", "seeded=maybe"])
def test_bad_filters_are_shown_as_errors(
    viewer: Client, base: str, memory: Memory, query: str
) -> None:
    response = viewer.get(f"{base}/entities/?{query}")

    assert response.status_code == 400
    assert 'class="field-error"' in page(response)


def test_entities_outside_the_grants_are_invisible(
    access: ContextAccess, client_for: Callable[..., Client], base: str, memory: Memory
) -> None:
    hidden = person(access, "Hidden", scope="org/globex")
    limited = client_for(Role.VIEWER, grants=["read:org/acme/*"])

    names = {e.name for e, _ in limited.get(f"{base}/entities/").context["rows"]}

    assert "Hidden" not in names and "Alex" in names
    assert limited.get(f"{base}/entities/{hidden.pk}/").status_code == 404


def test_detail_shows_aliases_identifiers_ranked_facts_and_timeline(
    access: ContextAccess, viewer: Client, base: str, memory: Memory
) -> None:
    entity_upsert(
        access=access,
        name="Alex",
        type="person",
        scope="org/acme",
        aliases=["Alexandra K."],
        identifiers=[IdentifierInput("email", "alex@acme.test")],
    )
    fact_write(access=access, subject=memory.alex, predicate="current_title", value="CTO")

    response = viewer.get(f"{base}/entities/{memory.alex.pk}/")

    html = page(response)
    assert "Alexandra K." in html and "alex@acme.test" in html
    ranked = [r.fact.value_text or r.fact.object.name for r in response.context["ranked"].rows]
    assert set(ranked) == {"CTO", "Acme", "Sam"}
    timeline = [(fact.value_text, fact.status) for fact, _ in response.context["timeline"].rows]
    assert ("Engineer", "superseded") in timeline
    assert "replaced by CTO" in html


def test_detail_draws_the_neighbourhood(viewer: Client, base: str, memory: Memory) -> None:
    html = page(viewer.get(f"{base}/entities/{memory.alex.pk}/"))

    svg = html[html.index('<svg class="graph"') : html.index("</svg>")]
    assert f'href="{base}/entities/{memory.acme.pk}/"' in svg  # Alex works_for Acme
    assert f'href="{base}/entities/{memory.sam.pk}/"' in svg  # Alex knows Sam
    assert "works_for" in svg and "knows" in svg


def test_the_neighbourhood_includes_incoming_edges(
    viewer: Client, base: str, memory: Memory
) -> None:
    html = page(viewer.get(f"{base}/entities/{memory.acme.pk}/"))

    assert "Alex" in html[html.index('<svg class="graph"') :]
    assert "Pointing here" in html


def test_names_are_escaped_in_the_page_and_the_picture(
    access: ContextAccess, viewer: Client, base: str, memory: Memory
) -> None:
    evil = person(access, '<script>alert("x")</script>')
    fact_write(access=access, subject=memory.alex, predicate="knows", object=evil)

    html = page(viewer.get(f"{base}/entities/{memory.alex.pk}/"))

    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)" in html


def test_unknown_entity_is_404(viewer: Client, base: str) -> None:
    assert viewer.get(f"{base}/entities/999999/").status_code == 404


def test_curator_edits_an_entity(curator: Client, base: str, memory: Memory) -> None:
    response = curator.post(
        f"{base}/entities/{memory.alex.pk}/edit",
        {
            "name": "Alex Kim",
            "type": "person",
            "aliases": "Alex\nAK",
            "attributes": '{"team": "platform"}',
            "identifiers_add": "email:alex.kim@acme.test",
        },
    )

    assert response["Location"] == f"{base}/entities/{memory.alex.pk}/"
    alex = Entity.objects.get(pk=memory.alex.pk)
    assert (alex.name, alex.aliases, alex.attributes) == (
        "Alex Kim",
        ["Alex", "AK"],
        {"team": "platform"},
    )
    assert alex.identifiers.get().value == "alex.kim@acme.test"
    assert AuditEvent.objects.get(action="entity_update").undo is not None


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"name": "", "type": "person"}, "This field is required"),
        ({"name": "X", "type": "alien"}, "Select a valid choice"),
        ({"name": "X", "type": "person", "attributes": "[1]"}, "a JSON object"),
        ({"name": "X", "type": "person", "attributes": "{nope"}, "not valid JSON"),
        (
            {"name": "X", "type": "person", "identifiers_add": "nocolon"},
            "must look like kind:value",
        ),
        ({"name": "Sam", "type": "person"}, "already has the key"),
    ],
)
def test_bad_edits_show_form_errors_and_change_nothing(
    curator: Client, base: str, memory: Memory, data: dict[str, str], error: str
) -> None:
    response = curator.post(f"{base}/entities/{memory.alex.pk}/edit", data)

    assert response.status_code == 400
    assert error in page(response)
    assert Entity.objects.get(pk=memory.alex.pk).name == "Alex"
    assert not AuditEvent.objects.exists()


def test_curator_deletes_an_entity_with_its_facts(
    curator: Client, base: str, memory: Memory
) -> None:
    response = curator.post(f"{base}/entities/{memory.sam.pk}/delete")

    assert response["Location"] == f"{base}/entities/"
    assert not Entity.objects.filter(pk=memory.sam.pk).exists()
    assert not Fact.objects.filter(subject_id=memory.sam.pk).exists()
    assert "Deleted Sam and 2 facts" in page(curator.get(response["Location"]))


def test_curator_sees_the_edit_and_delete_forms_and_a_viewer_does_not(
    viewer: Client, curator: Client, base: str, memory: Memory
) -> None:
    url = f"{base}/entities/{memory.alex.pk}/"

    assert f'action="{url}edit"' in page(curator.get(url))
    assert f'action="{url}delete"' in page(curator.get(url))
    assert f'action="{url}edit"' not in page(viewer.get(url))
    assert f'action="{url}delete"' not in page(viewer.get(url))


@pytest.mark.parametrize("action", ["edit", "delete"])
def test_viewer_cannot_edit_or_delete_an_entity(
    viewer: Client, base: str, memory: Memory, action: str
) -> None:
    response = viewer.post(
        f"{base}/entities/{memory.alex.pk}/{action}", {"name": "Alexandra", "type": "person"}
    )

    assert response.status_code == 403
    assert "needs the curator role" in page(response)
    assert Entity.objects.get(pk=memory.alex.pk).name == "Alex"
    assert not AuditEvent.objects.exists()


def test_curator_without_a_write_grant_on_the_scope_cannot_edit(
    client_for: Callable[..., Client], base: str, memory: Memory
) -> None:
    reader = client_for(Role.CURATOR, grants=["read:*", "write:org/other/*"])

    response = reader.post(
        f"{base}/entities/{memory.alex.pk}/edit", {"name": "Alexandra", "type": "person"}
    )

    assert response.status_code == 403
    assert Entity.objects.get(pk=memory.alex.pk).name == "Alex"


def test_entity_list_query_count_does_not_grow(
    access: ContextAccess,
    viewer: Client,
    base: str,
    memory: Memory,
    django_assert_num_queries: Any,
) -> None:
    for extra in (0, 10):
        for i in range(extra):
            someone = person(access, f"Person {i}")
            fact_write(access=access, subject=someone, predicate="knows", object=memory.alex)
        # session, user, context, membership, contexts (switcher); count; one page of
        # entities; their visible current fact counts; facts waiting for review (navigation)
        with django_assert_num_queries(9):
            response = viewer.get(f"{base}/entities/")
        assert len(response.context["rows"]) == 3 + extra


def test_entity_detail_query_count_does_not_grow(
    access: ContextAccess,
    viewer: Client,
    base: str,
    memory: Memory,
    django_assert_num_queries: Any,
) -> None:
    for extra in (0, 6):
        for i in range(extra):
            other = person(access, f"Friend {i}")
            fact_write(access=access, subject=memory.alex, predicate="knows", object=other)
            fact_write(access=access, subject=other, predicate="reports_to", object=memory.alex)
        # session, user, context, membership, contexts (switcher); the entity; its
        # identifiers; a page of ranked facts; a page of the timeline and its successors;
        # a page of incoming relations; the picture's out- and in-edges; audit events;
        # facts waiting for review (navigation)
        with django_assert_num_queries(14):
            viewer.get(f"{base}/entities/{memory.alex.pk}/")


def _links(html: str, param: str) -> list[str]:
    """The pager hrefs of one section (``?<param>=n``), as they appear in the page."""
    return re.findall(rf'href="([^"]*[?&]{param}=\d+[^"]*)"', html.replace("&amp;", "&"))


def test_ranked_facts_are_paged_by_links_that_work_without_javascript(
    access: ContextAccess, viewer: Client, base: str, memory: Memory
) -> None:
    for i in range(RANKED + 5):
        fact_write(access=access, subject=memory.sam, predicate="interested_in", value=f"t{i}")
    everything = [r.fact.pk for r in entity_facts_ranked(access=access, entity=memory.sam)]
    url = f"{base}/entities/{memory.sam.pk}/"

    first = viewer.get(url)
    (next_url,) = _links(page(first), "facts")
    second = viewer.get(next_url)

    assert next_url == f"{url}?facts=2"
    shown = [r.fact.pk for r in first.context["ranked"].rows]
    shown += [r.fact.pk for r in second.context["ranked"].rows]
    assert shown == everything and len(everything) == RANKED + 6  # + works_for Acme
    assert _links(page(second), "facts") == [f"{url}?facts=1"]  # only "Higher ranked"
    assert f"{RANKED + 1}–{RANKED + 6}" in page(second)


def test_a_section_pager_swaps_in_only_its_section(
    access: ContextAccess,
    viewer: Client,
    base: str,
    memory: Memory,
    django_assert_num_queries: Any,
) -> None:
    for i in range(RANKED + 5):
        fact_write(access=access, subject=memory.sam, predicate="interested_in", value=f"t{i}")

    # session, user, context, membership; the entity; its identifiers; a page of facts
    with django_assert_num_queries(7):
        response = viewer.get(
            f"{base}/entities/{memory.sam.pk}/?facts=2",
            HTTP_HX_REQUEST="true",
            HTTP_HX_TARGET="entity-facts",
        )

    html = page(response)
    assert html.lstrip().startswith('<div id="entity-facts">')
    assert "t0" in html and "Timeline" not in html and "<svg" not in html
    assert 'hx-get="' in html and 'hx-target="#entity-facts"' in html


def test_the_timeline_is_paged_newest_first(
    access: ContextAccess, viewer: Client, base: str, memory: Memory
) -> None:
    for i in range(TIMELINE + 2):  # each title supersedes the one before
        fact_write(access=access, subject=memory.sam, predicate="current_title", value=f"v{i}")
    url = f"{base}/entities/{memory.sam.pk}/"

    first = viewer.get(url)
    second = viewer.get(
        f"{url}?timeline=2", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="entity-timeline"
    )

    assert [f.value_text for f, _ in first.context["timeline"].rows][:2] == ["v20", "v19"]
    assert _links(page(first), "timeline") == [f"{url}?timeline=2"]
    assert [f.value_text for f, _ in second.context["timeline"].rows] == ["v0"]
    assert "replaced by v1" in page(second)
    assert _links(page(second), "timeline") == [f"{url}?timeline=1"]


def test_the_facts_pointing_here_are_paged(
    access: ContextAccess, viewer: Client, base: str, memory: Memory
) -> None:
    for i in range(INCOMING):  # with Alex's "knows", one more than a page
        fact_write(
            access=access, subject=person(access, f"Fan {i}"), predicate="knows", object=memory.sam
        )
    url = f"{base}/entities/{memory.sam.pk}/"

    first = viewer.get(url)
    second = viewer.get(f"{url}?incoming=2")

    names = [name for _, _, name, _ in first.context["incoming"].rows]
    assert names[0] == f"Fan {INCOMING - 1}" and len(names) == INCOMING
    assert [name for _, _, name, _ in second.context["incoming"].rows] == ["Alex"]
    assert f'href="{base}/entities/{memory.alex.pk}/">Alex</a>' in page(second)
    assert _links(page(first), "incoming") == [f"{url}?incoming=2"]


def test_a_pager_link_keeps_the_other_sections_pages(
    access: ContextAccess, viewer: Client, base: str, memory: Memory
) -> None:
    for i in range(TIMELINE + 2):
        fact_write(access=access, subject=memory.sam, predicate="current_title", value=f"v{i}")
    url = f"{base}/entities/{memory.sam.pk}/"

    html = page(viewer.get(f"{url}?timeline=2&facts=1"))

    assert _links(html, "timeline") == [f"{url}?timeline=1&facts=1"]


@pytest.mark.parametrize("number", ["0", "-1", "two", "", "99999999999999999999999"])
def test_a_bad_page_number_shows_a_page_not_an_error(
    viewer: Client, base: str, memory: Memory, number: str
) -> None:
    response = viewer.get(f"{base}/entities/{memory.alex.pk}/?facts={number}&timeline={number}")

    assert response.status_code == 200
    if number != "99999999999999999999999":
        assert {
            r.fact.value_text or r.fact.object.name for r in response.context["ranked"].rows
        } == {"Acme", "Sam", "Engineer"}


def test_an_edit_with_errors_pages_the_entity_page_not_the_edit_url(
    access: ContextAccess, curator: Client, base: str, memory: Memory
) -> None:
    for i in range(RANKED + 1):
        fact_write(access=access, subject=memory.sam, predicate="interested_in", value=f"t{i}")
    url = f"{base}/entities/{memory.sam.pk}/"

    response = curator.post(f"{url}edit", {"name": "", "type": "person"})

    assert response.status_code == 400
    assert _links(page(response), "facts") == [f"{url}?facts=2"]


def test_an_entity_edit_offers_undo_in_its_message(
    curator: Client, base: str, memory: Memory
) -> None:
    from memory.models import AuditEvent

    html = page(
        curator.post(
            f"{base}/entities/{memory.alex.pk}/edit",
            {"name": "Alexandra", "type": "person"},
            follow=True,
        )
    )
    event = AuditEvent.objects.get(action="entity_update")
    assert "Saved Alexandra." in html and f"/audit/{event.pk}/undo" in html
