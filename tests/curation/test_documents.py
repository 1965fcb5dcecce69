"""The documents screens: the list with its filters, a document's chunks and keywords,
and a curator's delete (role, write grant, audit)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from memory.domain.access import ContextAccess
from memory.models import AuditEvent, Chunk, Document, Role
from memory.services.ingest.documents import document_create
from tests.curation.conftest import page

pytestmark = pytest.mark.django_db

HANDBOOK = (
    "The onboarding handbook explains expense reports. Expense reports are filed monthly "
    "through the finance portal. Travel bookings need manager approval."
)


@pytest.fixture
def handbook(access: ContextAccess) -> Document:
    return document_create(
        access=access,
        title="Onboarding handbook",
        text=HANDBOOK,
        scope="org/acme/hr",
        embed_later=True,
    )


@pytest.fixture
def menu(access: ContextAccess) -> Document:
    return document_create(
        access=access,
        title="Lunch menu",
        text="Soup of the day: tomato. Pasta on Friday.",
        scope="org/acme",
        embed_later=True,
    )


def test_list_filters_by_title_and_scope(
    viewer: Client, base: str, handbook: Document, menu: Document
) -> None:
    every = viewer.get(f"{base}/documents/")
    by_title = viewer.get(f"{base}/documents/?q=HANDBOOK")
    by_scope = viewer.get(f"{base}/documents/?scope=org/acme")

    assert [d.title for d in every.context["page"]] == ["Lunch menu", "Onboarding handbook"]
    assert [d.title for d in by_title.context["page"]] == ["Onboarding handbook"]
    assert [d.title for d in by_scope.context["page"]] == ["Lunch menu"]
    assert f'href="{base}/documents/{handbook.pk}/"' in page(every)


def test_a_bad_scope_filter_is_a_400_with_the_reason(viewer: Client, base: str) -> None:
    response = viewer.get(f"{base}/documents/?scope=" + "x" * 400)

    assert response.status_code == 400
    assert "Scope" in page(response)


def test_the_list_shows_only_documents_the_grants_can_read(
    client_for: Callable[..., Client], base: str, handbook: Document, menu: Document
) -> None:
    outsider = client_for(Role.VIEWER, grants=["read:org/acme/hr/*"])

    response = outsider.get(f"{base}/documents/")

    assert [d.title for d in response.context["page"]] == ["Onboarding handbook"]
    assert outsider.get(f"{base}/documents/{menu.pk}/").status_code == 404


def test_a_document_page_shows_its_chunks_and_scored_keywords(
    viewer: Client, base: str, handbook: Document
) -> None:
    response = viewer.get(f"{base}/documents/{handbook.pk}/")

    html = page(response)
    assert response.status_code == 200
    assert "Travel bookings need manager approval." in html
    keywords = {k.text: k.score for k in response.context["keywords"]}
    assert "expense reports" in keywords and keywords["expense reports"] > 1
    assert "expense reports" in html and f"{keywords['expense reports']:.1f}" in html
    assert "Delete this document" not in html  # a viewer is offered no delete


def test_the_overview_links_its_document_count(
    viewer: Client, base: str, handbook: Document
) -> None:
    html = page(viewer.get(f"{base}/"))

    assert f'href="{base}/documents/"' in html
    assert '1</span><span class="stat-label">document<' in html


def test_a_curator_deletes_a_document_and_the_audit_log_names_it(
    curator: Client, base: str, handbook: Document
) -> None:
    response = curator.post(f"{base}/documents/{handbook.pk}/delete")

    assert response.status_code == 302
    assert not Document.objects.filter(pk=handbook.pk).exists()
    assert not Chunk.objects.filter(document_id=handbook.pk).exists()
    event = AuditEvent.objects.get(action="document_delete")
    assert event.summary == "deleted document Onboarding handbook"
    assert "Deleted Onboarding handbook" in page(curator.get(f"{base}/documents/"))


def test_a_viewer_may_not_delete_a_document(viewer: Client, base: str, handbook: Document) -> None:
    response = viewer.post(f"{base}/documents/{handbook.pk}/delete")

    assert response.status_code == 403
    assert Document.objects.filter(pk=handbook.pk).exists()


def test_a_curator_without_a_write_grant_may_not_delete(
    client_for: Callable[..., Client], base: str, handbook: Document
) -> None:
    reader = client_for(Role.CURATOR, grants=["read:*"])

    response = reader.post(f"{base}/documents/{handbook.pk}/delete")

    assert response.status_code == 403
    assert Document.objects.filter(pk=handbook.pk).exists()


def test_deleting_a_missing_document_is_a_404(curator: Client, base: str) -> None:
    assert curator.post(f"{base}/documents/999999/delete").status_code == 404
    assert curator.get(f"{base}/documents/999999/delete").status_code == 405


def test_a_member_with_a_write_grant_adds_a_pasted_document(viewer: Client, base: str) -> None:
    html = page(viewer.get(f"{base}/documents/"))
    assert "Add a document" in html and f'action="{base}/documents/add"' in html

    response = viewer.post(
        f"{base}/documents/add",
        {"title": "Travel policy", "scope": "org/acme", "text": HANDBOOK, "source": "wiki"},
    )

    document = Document.objects.get(title="Travel policy")
    assert (
        response.status_code == 302 and response["Location"] == f"{base}/documents/{document.pk}/"
    )
    assert (document.scope, document.source) == ("org/acme", "wiki")
    assert Chunk.objects.filter(document=document).count() == 1
    shown = page(viewer.get(response["Location"]))
    assert "Added Travel policy: 1 chunk," in shown  # said where it happened, in words


def test_a_text_file_is_added_as_a_document(viewer: Client, base: str) -> None:
    upload = SimpleUploadedFile("notes.md", b"# Notes\n\nShipping takes two days.")

    response = viewer.post(
        f"{base}/documents/add", {"title": "Notes", "scope": "org/acme", "file": upload}
    )

    assert response.status_code == 302
    assert "Shipping takes two days." in Document.objects.get(title="Notes").text


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"title": "Empty", "scope": "org/acme"}, "Paste the document&#x27;s text or choose"),
        ({"title": "Bad scope", "scope": "ORG ACME", "text": "words"}, "Scope"),
        ({"title": "", "scope": "org/acme", "text": "words"}, "This field is required."),
    ],
)
def test_bad_input_re_shows_the_form_with_the_reason_and_writes_nothing(
    viewer: Client, base: str, fields: dict[str, str], message: str
) -> None:
    response = viewer.post(f"{base}/documents/add", fields)

    assert response.status_code == 400
    html = page(response)
    assert message in html and '<details class="card add-document" open>' in html
    assert not Document.objects.exists()


def test_a_file_that_is_not_text_is_refused(viewer: Client, base: str) -> None:
    upload = SimpleUploadedFile("photo.md", b"\xff\xd8\xff\xe0 not utf-8")

    response = viewer.post(
        f"{base}/documents/add", {"title": "Photo", "scope": "org/acme", "file": upload}
    )

    assert response.status_code == 400
    assert "not UTF-8 text" in page(response)
    assert not Document.objects.exists()


def test_adding_needs_a_write_grant_on_the_scope(
    client_for: Callable[..., Client], base: str
) -> None:
    reader = client_for(Role.CURATOR, grants=["read:*"])
    assert "Add a document" not in page(reader.get(f"{base}/documents/"))
    writer = client_for(Role.VIEWER, grants=["read:*", "write:org/acme/hr/*"])

    refused = reader.post(f"{base}/documents/add", {"title": "T", "scope": "org/acme", "text": "x"})
    elsewhere = writer.post(
        f"{base}/documents/add", {"title": "T", "scope": "org/acme", "text": "x"}
    )

    assert (refused.status_code, elsewhere.status_code) == (403, 403)
    assert not Document.objects.exists()
    assert writer.get(f"{base}/documents/add").status_code == 405
