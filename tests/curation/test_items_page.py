"""The items page: the namespace tree with its counts, a namespace's items a page at a
time, an item's JSON and lifetime and the facts it extracted, a curator's delete with
its Undo (the item and its facts come back), the admin's default for extraction, and
who may see and do what."""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from django.test import Client
from django.utils import timezone

from memory.domain.access import ContextAccess, system_access
from memory.models import AuditEvent, Context, Fact, FactStatus, Item, Role, RunOutcome
from memory.selectors.items import items_search
from memory.services.entities.writes import entity_upsert
from memory.services.ingest.run import run_execute
from memory.services.items.writes import ItemPut, items_write
from tests.fake_llm import FakeLLM
from tests.ingest import conftest as ingest

pytestmark = pytest.mark.django_db

fake_llm_server = ingest.fake_llm_server
fake_llm = ingest.fake_llm

ANSWER = ingest.extraction(
    entities=[{"name": "Maria Chen", "type": "person"}, {"name": "Globex", "type": "organisation"}],
    relations=[{"subject": "Maria Chen", "predicate": "works_at", "object": "Globex"}],
)


def put(access: ContextAccess, namespace: tuple[str, ...], key: str, value: Any, **kw: Any) -> Item:
    items_write(access=access, puts=[ItemPut(namespace=namespace, key=key, value=value, **kw)])
    return Item.objects.get(context=access.context, namespace=list(namespace), key=key)


@pytest.fixture
def shelf(access: ContextAccess) -> dict[str, Item]:
    """Items in nested namespaces: org/acme/alex (2), org/acme/sam (1), org/beta (1),
    users (1)."""
    return {
        "alex-a": put(access, ("org", "acme", "alex"), "a", {"text": "likes tea"}),
        "alex-b": put(access, ("org", "acme", "alex"), "b", {"text": "works late"}),
        "sam": put(access, ("org", "acme", "sam"), "prefs", {"theme": "dark"}),
        "beta": put(access, ("org", "beta"), "about", {"text": "a small firm"}),
        "user": put(access, ("users",), "root", {"n": 1}),
    }


def tree(response: Any) -> list[tuple[tuple[str, ...], int, int]]:
    assert response.status_code == 200, response.content
    return [(n.namespace, n.items, n.total) for n in response.context["tree"].shown]


def test_the_tree_nests_labels_and_counts_each_namespace(
    viewer: Client, base: str, shelf: dict[str, Item]
) -> None:
    assert tree(viewer.get(f"{base}/items/")) == [(("org",), 0, 4), (("users",), 1, 1)]
    opened = viewer.get(f"{base}/items/?namespace=org&namespace=acme")
    assert tree(opened) == [
        (("org",), 0, 4),
        (("org", "acme"), 0, 3),
        (("org", "acme", "alex"), 2, 2),
        (("org", "acme", "sam"), 1, 1),
        (("org", "beta"), 1, 1),
        (("users",), 1, 1),
    ]
    body = opened.content.decode()
    assert "No items in this namespace itself" in body
    assert 'href="/c/acme-test/items/?namespace=org&amp;namespace=acme&amp;namespace=alex"' in body
    # One count a namespace, its own and those below it together; the namespaces below
    # an empty one are offered beside the words that say so.
    assert ">4</span>" in body and "0 · 4" not in body
    below = body.split('data-testid="namespaces-below"')[1].split("</ul>")[0]
    assert [html.unescape(x) for x in _links(below)] == [
        "/c/acme-test/items/?namespace=org&namespace=acme&namespace=alex",
        "/c/acme-test/items/?namespace=org&namespace=acme&namespace=sam",
    ]


def _links(text: str) -> list[str]:
    return [part.split('"', 1)[0] for part in text.split('href="')[1:]]


def test_labels_of_any_characters_are_shown_and_selected_as_written(
    viewer: Client, base: str, access: ContextAccess
) -> None:
    odd = ("x/y", "a%b", "zoë\n")
    item = put(access, odd, "k", {"v": 1})
    response = viewer.get(f"{base}/items/?" + urlencode([("namespace", x) for x in odd]))
    assert tree(response) == [(odd[:1], 0, 1), (odd[:2], 0, 1), (odd, 1, 1)]
    assert [i.pk for i, _ in response.context["previews"]] == [item.pk]


def test_a_namespace_lists_its_own_items_by_key_a_page_at_a_time(
    viewer: Client, base: str, access: ContextAccess
) -> None:
    for i in range(55):
        put(access, ("notes",), f"k{i:02d}", {"i": i})
    put(access, ("notes", "deeper"), "k00", {"below": True})
    first = viewer.get(f"{base}/items/?namespace=notes")
    assert [item.key for item, _ in first.context["previews"]] == [f"k{i:02d}" for i in range(50)]
    assert "Page 1 of 2" in first.content.decode()
    second = viewer.get(f"{base}/items/?namespace=notes&page=2")
    assert [item.key for item, _ in second.context["previews"]] == [
        f"k{i:02d}" for i in range(50, 55)
    ]
    # htmx swaps the tree and the list together, without the page around them.
    partial = viewer.get(f"{base}/items/?namespace=notes", HTTP_HX_REQUEST="true")
    text = partial.content.decode()
    assert text.lstrip().startswith('<div class="items-layout" id="items-browser">')
    assert "<html" not in text


def test_an_item_page_shows_its_json_as_stored_and_its_lifetime(
    viewer: Client, base: str, access: ContextAccess
) -> None:
    value = {"name": "Zoë", "nested": {"list": [1, 2.5, None, True]}, "big": 2**70 + 1}
    item = put(access, ("org", "acme"), "profile/zoë", value, index=["name"], ttl=90.0)
    response = viewer.get(f"{base}/items/{item.pk}/")
    assert response.status_code == 200
    body = response.content.decode()
    stored = Item.objects.get(pk=item.pk).value
    assert html.escape(json.dumps(stored, indent=2, ensure_ascii=False)) in body
    assert json.loads(response.context["found"].value_json) == value
    assert "90 minutes after its last write or read" in body
    assert item.expires_at is not None
    assert timezone.localtime(item.expires_at).strftime("%-d %b %Y %H:%M") in body
    assert "<code>name</code>" in body  # the indexed path
    assert "Nothing: it was put without extraction." in body
    whole = put(access, ("org", "acme"), "all", {"note": "x"}, index=["$"])
    shown = viewer.get(f"{base}/items/{whole.pk}/").content.decode()
    assert "Indexed</dt><dd>the whole value" in shown


def extracted_item(access: ContextAccess, fake_llm: FakeLLM) -> Item:
    fake_llm.reply_json(ANSWER)
    text = {"text": "Maria Chen works at Globex."}
    item = put(access, ("org", "maria"), "bio", text, index=["text"], extract=True)
    assert item.run is not None and item.turn is not None
    assert run_execute(run_id=item.run.pk).outcome == RunOutcome.SUCCEEDED
    return item


def test_an_item_page_lists_the_facts_it_extracted_and_the_fact_page_names_the_item(
    viewer: Client, base: str, access: ContextAccess, fake_llm: FakeLLM
) -> None:
    # Known before: the retraction of the run keeps them, and the fact as retracted.
    for name, type_ in (("Maria Chen", "person"), ("Globex", "organisation")):
        entity_upsert(access=access, name=name, type=type_, scope="org/maria")
    item = extracted_item(access, fake_llm)
    fact = Fact.objects.get(context=access.context)
    body = viewer.get(f"{base}/items/{item.pk}/").content.decode()
    assert f'href="/c/acme-test/facts/{fact.pk}/"' in body
    assert "Maria Chen" in body and "works_at" in body
    assert 'class="badge status-current"' in body and "trust-trusted" in body
    assert f'href="/c/acme-test/runs/{item.run_id}/"' in body

    fact_page = viewer.get(f"{base}/facts/{fact.pk}/").content.decode()
    assert 'data-testid="provenance-item"' in fact_page
    assert f'href="/c/acme-test/items/{item.pk}/"' in fact_page
    # Overwritten, the item no longer holds what the fact was taken from.
    put(access, ("org", "maria"), "bio", {"text": "Maria left."})
    fact_page = viewer.get(f"{base}/facts/{fact.pk}/").content.decode()
    assert Fact.objects.get(pk=fact.pk).status == FactStatus.RETRACTED
    assert 'data-testid="provenance-item-gone"' in fact_page
    assert 'data-testid="provenance-item"' not in fact_page


def test_delete_retracts_what_the_item_extracted_and_undo_brings_both_back(
    curator: Client, base: str, access: ContextAccess, fake_llm: FakeLLM
) -> None:
    item = extracted_item(access, fake_llm)
    fact = Fact.objects.get(context=access.context)
    row = Item.objects.filter(pk=item.pk).values().get()
    assert row["embedding"] is not None and row["text"]

    response = curator.post(f"{base}/items/{item.pk}/delete", follow=True)
    assert response.status_code == 200
    assert response.redirect_chain[-1][0] == "/c/acme-test/items/"  # its namespace is empty
    assert not Item.objects.filter(pk=item.pk).exists()
    # Its entities came from the item alone: they and the fact go with the run.
    assert not Fact.objects.filter(pk=fact.pk).exists()
    [message] = list(response.context["messages"])
    assert "Deleted item org / maria · bio and retracted the 1 fact it extracted" in str(message)
    event = AuditEvent.objects.get(context=access.context, action="item_delete")
    assert message.extra_tags == f"undo:{event.pk}"
    assert curator.get(f"{base}/items/{item.pk}/").status_code == 404

    undone = curator.post(f"{base}/audit/{event.pk}/undo")
    assert undone.status_code == 302
    back: dict[str, Any] = dict(Item.objects.filter(pk=item.pk).values().get())
    before: dict[str, Any] = dict(row)
    # The same id, value, text, vector, times and extraction.
    assert list(back.pop("embedding")) == list(before.pop("embedding"))
    assert back == before
    assert Fact.objects.get(pk=fact.pk).status == FactStatus.CURRENT
    found = items_search(access=access, namespace_prefix=("org",), query="Globex")
    assert [hit.item.pk for hit in found] == [item.pk]  # indexed again
    assert AuditEvent.objects.filter(context=access.context, undone_at__isnull=False).count() == 2


def test_undo_is_refused_when_the_item_was_written_again(
    curator: Client, base: str, access: ContextAccess, shelf: dict[str, Item]
) -> None:
    item = shelf["sam"]
    curator.post(f"{base}/items/{item.pk}/delete")
    put(access, ("org", "acme", "sam"), "prefs", {"theme": "light"})
    event = AuditEvent.objects.get(context=access.context, action="item_delete")
    response = curator.post(f"{base}/audit/{event.pk}/undo", follow=True)
    assert "was written again since" in response.content.decode()
    assert Item.objects.get(namespace=["org", "acme", "sam"], key="prefs").value == {
        "theme": "light"
    }
    assert AuditEvent.objects.get(pk=event.pk).undone_at is None


def test_only_a_curator_who_may_write_the_namespace_undoes_a_delete(
    curator: Client,
    viewer: Client,
    client_for: Callable[..., Client],
    base: str,
    access: ContextAccess,
    shelf: dict[str, Item],
) -> None:
    item = shelf["beta"]
    curator.post(f"{base}/items/{item.pk}/delete")
    event = AuditEvent.objects.get(context=access.context, action="item_delete")
    elsewhere = client_for(Role.CURATOR, grants=["read:*", "read,write:users"])
    for client in (viewer, elsewhere):
        response = client.post(f"{base}/audit/{event.pk}/undo")
        assert response.status_code == 403
        assert not Item.objects.filter(pk=item.pk).exists()
        assert AuditEvent.objects.get(pk=event.pk).undone_at is None
    assert curator.post(f"{base}/audit/{event.pk}/undo").status_code == 302
    assert Item.objects.filter(pk=item.pk).exists()
    again = curator.post(f"{base}/audit/{event.pk}/undo", follow=True)
    assert "already undone" in again.content.decode()
    assert Item.objects.filter(pk=item.pk).count() == 1


def test_an_item_of_another_context_is_not_found_and_stays(
    curator: Client, base: str, make_context: Callable[..., Context]
) -> None:
    other = system_access(make_context("other"))
    theirs = put(other, ("org",), "theirs", {"x": 1})
    assert curator.get(f"{base}/items/{theirs.pk}/").status_code == 404
    assert curator.post(f"{base}/items/{theirs.pk}/delete").status_code == 404
    assert Item.objects.filter(pk=theirs.pk).exists()
    assert not AuditEvent.objects.filter(action="item_delete").exists()


def test_the_writes_take_posts_only(
    curator: Client, admin: Client, base: str, shelf: dict[str, Item]
) -> None:
    assert curator.get(f"{base}/items/{shelf['beta'].pk}/delete").status_code == 405
    assert admin.get(f"{base}/items/extract?item_extract=on").status_code == 405
    assert Item.objects.filter(pk=shelf["beta"].pk).exists()


def test_deleting_the_last_item_of_a_namespace_returns_to_the_nearest_one_left(
    curator: Client, base: str, shelf: dict[str, Item]
) -> None:
    response = curator.post(f"{base}/items/{shelf['sam'].pk}/delete")
    assert response["Location"] == "/c/acme-test/items/?namespace=org&namespace=acme"
    response = curator.post(f"{base}/items/{shelf['alex-a'].pk}/delete")
    assert response["Location"] == (
        "/c/acme-test/items/?namespace=org&namespace=acme&namespace=alex"
    )


def test_a_viewer_reads_but_cannot_delete(
    viewer: Client, base: str, shelf: dict[str, Item]
) -> None:
    item = shelf["beta"]
    page = viewer.get(f"{base}/items/{item.pk}/").content.decode()
    assert 'data-testid="item-delete"' not in page
    response = viewer.post(f"{base}/items/{item.pk}/delete")
    assert response.status_code == 403
    assert "needs the curator role" in response.content.decode()
    assert Item.objects.filter(pk=item.pk).exists()


def test_a_curator_without_a_write_grant_on_the_namespace_cannot_delete(
    client_for: Callable[..., Client], base: str, shelf: dict[str, Item]
) -> None:
    curator = client_for(Role.CURATOR, grants=["read:*", "read,write:users"])
    item = shelf["beta"]
    assert (
        'data-testid="item-delete"' not in curator.get(f"{base}/items/{item.pk}/").content.decode()
    )
    response = curator.post(f"{base}/items/{item.pk}/delete")
    assert response.status_code == 403
    assert Item.objects.filter(pk=item.pk).exists()
    mine = shelf["user"]
    assert 'data-testid="item-delete"' in curator.get(f"{base}/items/{mine.pk}/").content.decode()


def test_namespaces_outside_the_grants_are_not_there(
    client_for: Callable[..., Client], base: str, shelf: dict[str, Item]
) -> None:
    reader = client_for(Role.CURATOR, grants=["read,write:org/acme/*"])
    assert tree(reader.get(f"{base}/items/")) == [(("org",), 0, 3)]
    for path in (
        f"items/{shelf['user'].pk}/",
        f"items/{shelf['beta'].pk}/",
        "items/?namespace=users",
        "items/?namespace=org&namespace=beta",
    ):
        response = reader.get(f"{base}/{path}")
        assert response.status_code == 404, path
        assert "Not found" in response.content.decode()  # the styled page
    response = reader.post(f"{base}/items/{shelf['user'].pk}/delete")
    assert response.status_code == 404
    assert Item.objects.filter(pk=shelf["user"].pk).exists()


def test_an_expired_item_is_not_found(viewer: Client, base: str, access: ContextAccess) -> None:
    item = put(access, ("tmp",), "soon", {"x": 1}, ttl=1.0)
    Item.objects.filter(pk=item.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert viewer.get(f"{base}/items/{item.pk}/").status_code == 404
    assert viewer.get(f"{base}/items/?namespace=tmp").status_code == 404
    assert tree(viewer.get(f"{base}/items/")) == []


@pytest.mark.parametrize(
    ("query", "status", "words"),
    [
        ("namespace=nowhere", 404, "no items under the namespace"),
        ("namespace=", 400, "labels must not be empty"),
        ("namespace=a%00b", 400, "must not contain NUL"),
        ("&".join(["namespace=x"] * 21), 400, "at most 20"),
    ],
)
def test_bad_namespaces_get_a_clear_page(
    viewer: Client, base: str, shelf: dict[str, Item], query: str, status: int, words: str
) -> None:
    response = viewer.get(f"{base}/items/?{query}")
    assert response.status_code == status
    assert words in response.content.decode()


def test_an_unknown_item_is_the_styled_404(viewer: Client, base: str) -> None:
    response = viewer.get(f"{base}/items/987654/")
    assert response.status_code == 404
    assert "item 987654 not found" in response.content.decode()
    assert viewer.post(f"{base}/items/987654/delete").status_code == 403  # viewer: role first


def test_the_page_reads_in_a_fixed_number_of_queries(
    viewer: Client, base: str, access: ContextAccess, django_assert_num_queries: Any
) -> None:
    for extra in (1, 12):
        for i in range(extra):
            put(access, ("q", f"n{i}"), f"k{i}", {"i": i})
            put(access, ("q",), f"k{extra}-{i}", {"i": i})
        # session, user, context, membership; the tree's namespaces with their counts;
        # the namespace's item count and page; contexts (switcher); facts waiting for
        # review (navigation)
        with django_assert_num_queries(9):
            response = viewer.get(f"{base}/items/?namespace=q")
        assert response.status_code == 200


def test_an_admin_sets_whether_puts_extract_by_default_with_an_undo(
    admin: Client, curator: Client, base: str, context: Context
) -> None:
    assert curator.post(f"{base}/items/extract", {"item_extract": "on"}).status_code == 403
    for bad in ({"item_extract": "maybe"}, {"item_extract": "ON"}, {}):
        refused = admin.post(f"{base}/items/extract", bad)
        assert refused.status_code == 400
        assert "Choose whether item puts extract facts" in refused.content.decode()
    assert not AuditEvent.objects.filter(context=context).exists()
    context.refresh_from_db()
    assert context.item_extract is False
    response = admin.post(f"{base}/items/extract", {"item_extract": "on"}, follow=True)
    context.refresh_from_db()
    assert context.item_extract is True
    event = AuditEvent.objects.get(context=context)
    assert event.summary == "changed settings: item_extract off → on"
    [message] = list(response.context["messages"])
    assert message.extra_tags.startswith("undo:")
    assert 'value="on" selected' in response.content.decode()
    admin.post(f"{base}/audit/{message.extra_tags.removeprefix('undo:')}/undo")
    context.refresh_from_db()
    assert context.item_extract is False


def test_saving_the_setting_keeps_the_namespace_the_page_showed(
    admin: Client, base: str, context: Context
) -> None:
    page = f"http://testserver{base}/items/"
    kept = admin.post(
        f"{base}/items/extract",
        {"item_extract": "on"},
        HTTP_REFERER=f"{page}?namespace=org&namespace=a%2Fb%0Ac",
    )
    assert kept["Location"] == "/c/acme-test/items/?namespace=org&namespace=a%2Fb%0Ac"
    # From another page, or with an address that names no valid namespace: the tree.
    for referer in (f"http://testserver{base}/facts/?namespace=org", f"{page}?namespace=",
                    f"{page}?namespace=a%00b", f"{page}?namespace={'x' * 3000}", ""):  # fmt: skip
        response = admin.post(f"{base}/items/extract", {"item_extract": "off"},
                              HTTP_REFERER=referer)  # fmt: skip
        assert response["Location"] == "/c/acme-test/items/", referer
    context.refresh_from_db()
    assert context.item_extract is False


def test_saving_the_setting_unchanged_records_nothing(
    admin: Client, base: str, context: Context
) -> None:
    response = admin.post(f"{base}/items/extract", {"item_extract": "off"}, follow=True)
    [message] = list(response.context["messages"])
    assert str(message) == "Item puts already keep the item only unless they say otherwise."
    assert not message.extra_tags.startswith("undo:")
    assert not AuditEvent.objects.filter(context=context).exists()
