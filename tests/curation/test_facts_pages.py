"""The facts list, a fact's page and the conversations pages: filters and keyset pages,
provenance ("source hidden" outside the reader's grants), and the per-fact actions with
their Undo, refused without the curator role."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.test import Client

from memory.domain.access import ContextAccess
from memory.models import AuditEvent, Context, Fact, FactStatus, Role, Turn
from memory.services.entities.writes import entity_upsert
from memory.services.facts.write import fact_write
from tests.curation.conftest import Memory, person


def _text(response: Any) -> str:
    return str(response.content.decode())


def test_the_list_filters_by_predicate_read_through_an_inverse_alias(
    viewer: Client, base: str, access: ContextAccess
) -> None:
    alex, sam = person(access, "Alex"), person(access, "Sam")
    acme = entity_upsert(access=access, name="Acme", type="organisation", scope="org/acme")
    fact_write(access=access, subject=alex, predicate="works_at", object=acme.entity)
    fact_write(access=access, subject=sam, predicate="knows", object=alex)
    page = viewer.get(f"{base}/facts/", {"predicate": "employs", "subject": "Acme"})
    assert page.status_code == 200
    text = _text(page)
    assert "works_at" in text and "knows" not in text
    assert "subject and object read swapped" in text


def test_the_list_pages_by_keyset(viewer: Client, base: str, access: ContextAccess) -> None:
    alex = person(access, "Alex")
    for i in range(55):
        fact_write(access=access, subject=alex, predicate="noted_fact", value=f"note {i:02d}")
    first = _text(viewer.get(f"{base}/facts/", {"subject": "Alex"}))
    assert "note 54" in first and "note 04" not in first
    cursor = first.split("after=")[1].split('"')[0]
    second = _text(viewer.get(f"{base}/facts/?subject=Alex&after={cursor}"))
    assert (
        "note 04" in second and "note 54" not in second and 'data-testid="next-page"' not in second
    )
    assert viewer.get(f"{base}/facts/?after=garbage").status_code == 400
    assert viewer.get(f"{base}/facts/?confidence_below=7").status_code == 400


def test_a_stale_page_link_links_to_the_first_page(viewer: Client, base: str) -> None:
    response = viewer.get(f"{base}/facts/?predicate=knows&after=abc")

    assert response.status_code == 400
    assert (
        "This page link is not valid any more: "
        f'<a href="{base}/facts/?predicate=knows">start from the first page</a>.'
    ) in _text(response)


def test_a_fact_page_shows_its_turn_and_hides_a_source_outside_the_grants(
    client_for: Callable[..., Client], base: str, access: ContextAccess, context: Context
) -> None:
    alex = person(access, "Alex")
    fact = fact_write(access=access, subject=alex, predicate="current_title", value="CTO").fact
    turn = Turn.objects.create(
        context=context,
        scope="org/secret",
        text="Alex is our CTO now.",
        speaker="Kim",
        said_at=datetime(2024, 5, 1, tzinfo=UTC),
        thread="board",
    )
    Fact.objects.filter(pk=fact.pk).update(turn=turn)
    everyone = _text(client_for(Role.VIEWER).get(f"{base}/facts/{fact.pk}/"))
    assert "Alex is our CTO now." in everyone and "Kim" in everyone
    narrow = client_for(Role.VIEWER, grants=["read:org/acme/*"]).get(f"{base}/facts/{fact.pk}/")
    assert narrow.status_code == 200
    assert "Source hidden" in _text(narrow) and "Alex is our CTO now." not in _text(narrow)


def test_retract_from_the_page_offers_undo_and_restore_brings_it_back(
    curator: Client, base: str, memory: Memory
) -> None:
    fact = Fact.objects.get(predicate__name="knows")
    response = curator.post(f"{base}/facts/{fact.pk}/retract", follow=True)
    event = AuditEvent.objects.get(action="fact_retract")
    assert f"/audit/{event.pk}/undo" in _text(response)
    assert Fact.objects.get(pk=fact.pk).status == FactStatus.RETRACTED

    curator.post(f"{base}/facts/{fact.pk}/restore")
    assert Fact.objects.get(pk=fact.pk).status == FactStatus.CURRENT


def test_correct_and_edit_from_the_page(curator: Client, base: str, memory: Memory) -> None:
    title = Fact.objects.get(predicate__name="current_title", status="current")
    response = curator.post(f"{base}/facts/{title.pk}/correct", {"value": "Staff Engineer"})
    new = Fact.objects.get(supersedes=title)
    assert response.status_code == 302 and response["Location"].endswith(f"/facts/{new.pk}/")
    page = _text(curator.get(f"{base}/facts/{new.pk}/"))
    assert f"#{title.pk}" in page and "corrected current_title of Alex" in page

    knows = Fact.objects.get(predicate__name="knows")
    bad = curator.post(f"{base}/facts/{knows.pk}/edit", {"predicate": "current_title"})
    assert bad.status_code == 400 and "a fact keeps its kind" in _text(bad)
    assert Fact.objects.get(pk=knows.pk).predicate.name == "knows"
    curator.post(f"{base}/facts/{knows.pk}/edit", {"predicate": "knows", "confidence": "0.5"})
    assert Fact.objects.get(pk=knows.pk).confidence == 0.5


def test_a_viewer_may_not_change_facts(viewer: Client, base: str, memory: Memory) -> None:
    fact = Fact.objects.get(predicate__name="knows")
    before = AuditEvent.objects.count()
    for action in ("retract", "restore", "correct", "edit"):
        assert viewer.post(f"{base}/facts/{fact.pk}/{action}").status_code == 403
    assert viewer.post(f"{base}/facts/retract", {"fact": [fact.pk]}).status_code == 403
    assert AuditEvent.objects.count() == before
    assert "fact-retract" not in _text(viewer.get(f"{base}/facts/{fact.pk}/"))


def test_many_selected_facts_retract_in_one_action(
    curator: Client, base: str, memory: Memory
) -> None:
    ids = list(Fact.objects.filter(status="current").values_list("pk", flat=True))
    curator.post(f"{base}/facts/retract", {"fact": ids})
    assert set(Fact.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"retracted"}
    assert AuditEvent.objects.filter(action="fact_retract").count() == 1
    assert curator.post(f"{base}/facts/retract", {"fact": ["x"]}).status_code == 400


def test_a_conversation_lists_its_turns_with_their_facts_and_retracts_one_turn(
    curator: Client, base: str, access: ContextAccess, context: Context
) -> None:
    alex = person(access, "Alex")
    turns = [
        Turn.objects.create(
            context=context,
            scope="org/acme",
            text=f"turn {i}",
            speaker="Kim",
            thread="t/1",
            said_at=datetime(2024, 5, 1, 10, i, tzinfo=UTC),
        )
        for i in range(2)
    ]
    fact = fact_write(access=access, subject=alex, predicate="current_title", value="CTO").fact
    Fact.objects.filter(pk=fact.pk).update(turn=turns[1])

    listing = _text(curator.get(f"{base}/conversations/"))
    assert "t/1" in listing and "Kim" in listing
    page = _text(curator.get(f"{base}/conversations/t/1/"))
    assert page.index("turn 0") < page.index("turn 1") < page.index("CTO")

    preview = curator.post(f"{base}/turns/{turns[1].pk}/retract", {"preview": "1"})
    assert "Retract 1 fact" in _text(preview)
    assert Fact.objects.get(pk=fact.pk).status == FactStatus.CURRENT
    curator.post(f"{base}/turns/{turns[1].pk}/retract")
    assert Fact.objects.get(pk=fact.pk).status == FactStatus.RETRACTED
    assert curator.post(f"{base}/turns/{turns[1].pk}/retract").status_code == 409
    assert curator.get(f"{base}/conversations/nope/").status_code == 404


def test_the_conversations_list_shows_a_thread_without_a_speaker(
    curator: Client, base: str, context: Context
) -> None:
    Turn.objects.create(context=context, scope="org/acme", text="anon", thread="quiet")
    Turn.objects.create(context=context, scope="org/acme", text="hi", speaker="Kim", thread="loud")
    response = curator.get(f"{base}/conversations/")
    assert response.status_code == 200
    listing = _text(response)
    assert "quiet" in listing and "loud" in listing and "Kim" in listing


def test_a_conversation_page_reads_the_same_few_queries_however_many_facts_it_shows(
    viewer: Client, base: str, access: ContextAccess, context: Context
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    alex = person(access, "Alex")

    def page_queries(turns: int) -> int:
        thread = f"t/{turns}"
        for i in range(turns):
            turn = Turn.objects.create(
                context=context, scope="org/acme", text=f"turn {i}", speaker="Kim", thread=thread
            )
            written = fact_write(
                access=access, subject=alex, predicate="likes", value=f"tea {thread} {i}"
            )
            Fact.objects.filter(pk=written.fact.pk).update(turn=turn)
        with CaptureQueriesContext(connection) as captured:
            html = _text(viewer.get(f"{base}/conversations/{thread}/"))
        assert html.count('data-testid="turn"') == turns
        return len(captured)

    assert page_queries(2) == page_queries(8)  # no query per turn or per fact


def test_a_subject_name_reads_as_the_api_reads_it_and_the_page_says_what_else_matched(
    viewer: Client,
    base: str,
    access: ContextAccess,
    context: Context,
    api_client_for: Callable[..., Any],
) -> None:
    acme = entity_upsert(access=access, name="Acme Corp", type="organisation", scope="org/acme")
    inc = entity_upsert(access=access, name="ACME Inc.", type="organisation", scope="org/globex")
    mine = fact_write(access=access, subject=acme.entity, predicate="founded_in", value="1999")
    fact_write(access=access, subject=inc.entity, predicate="founded_in", value="2004")
    api = api_client_for(context)

    page = viewer.get(f"{base}/facts/", {"subject": "Acme Corp"})
    answer = api.get(f"/api/v1/contexts/{context.slug}/facts", {"subject": "Acme Corp"}).json()

    assert page.status_code == 200
    shown = [f.pk for f in page.context["page"].facts]
    assert shown == [f["id"] for f in answer["results"]] == [mine.fact.pk]
    text = _text(page)
    assert "1999" in text and "2004" not in text
    assert f"also matches ACME Inc. (organisation, org/globex, #{inc.entity.pk})" in text


def test_a_subject_that_names_no_entity_reads_as_the_start_of_names_and_names_them(
    viewer: Client, base: str, access: ContextAccess
) -> None:
    acme = entity_upsert(access=access, name="Acme Corp", type="organisation", scope="org/acme")
    inc = entity_upsert(access=access, name="ACME Inc.", type="organisation", scope="org/globex")
    fact_write(access=access, subject=acme.entity, predicate="founded_in", value="1999")
    fact_write(access=access, subject=inc.entity, predicate="founded_in", value="2004")

    text = _text(viewer.get(f"{base}/facts/", {"subject": "acm"}))
    nothing = _text(viewer.get(f"{base}/facts/", {"subject": "Zyx"}))

    assert "1999" in text and "2004" in text
    assert "no entity is named &#x27;acm&#x27;: subject reads as the start of names" in text
    assert f"Acme Corp (#{acme.entity.pk})" in text and f"ACME Inc. (#{inc.entity.pk})" in text
    assert "no entity you can see is named so" in nothing
