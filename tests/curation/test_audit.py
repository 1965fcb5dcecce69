"""The audit log: every change listed, each undoable by a curator."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from memory.access import ContextAccess
from memory.models import AuditEvent, Predicate, PredicateAlias
from memory.selectors.predicates import predicate_get
from memory.services.predicates import predicate_alias_add
from tests.curation.conftest import Memory, page

pytestmark = pytest.mark.django_db


@pytest.fixture
def aliased(access: ContextAccess, memory: Memory) -> AuditEvent:
    works_at = predicate_get(context=access.context, name="works_at")
    predicate_alias_add(access=access, predicate=works_at, alias="staffed_at")
    return AuditEvent.objects.get(action="predicate_alias_add")


def test_log_lists_changes_newest_first(viewer: Client, base: str, aliased: AuditEvent) -> None:
    response = viewer.get(f"{base}/audit/")

    html = page(response)
    assert [e.pk for e in response.context["page"]] == [aliased.pk]
    assert "added alias staffed_at to predicate works_at" in html
    assert f"/audit/{aliased.pk}/undo" not in html  # a viewer cannot undo


def test_filter_by_action(viewer: Client, base: str, aliased: AuditEvent) -> None:
    assert not viewer.get(f"{base}/audit/?action=drift_alias").context["page"].object_list
    assert viewer.get(f"{base}/audit/?action=predicate_alias_add").context["page"].object_list


def test_curator_undoes_a_change(curator: Client, base: str, aliased: AuditEvent) -> None:
    response = curator.post(f"{base}/audit/{aliased.pk}/undo")

    assert response["Location"] == f"{base}/audit/"
    assert not PredicateAlias.objects.filter(alias="staffed_at").exists()
    html = page(curator.get(f"{base}/audit/"))
    assert "Undone: added alias staffed_at" in html
    assert 'class="undone"' in html


def test_htmx_undo_answers_the_rows(curator: Client, base: str, aliased: AuditEvent) -> None:
    response = curator.post(f"{base}/audit/{aliased.pk}/undo", HTTP_HX_REQUEST="true")

    html = page(response)
    assert html.lstrip().startswith('<div id="audit-rows">')
    assert "hx-swap-oob" in html and "Undone" in html


def test_undoing_twice_is_a_409_with_the_reason(
    curator: Client, base: str, aliased: AuditEvent
) -> None:
    curator.post(f"{base}/audit/{aliased.pk}/undo")

    again = curator.post(f"{base}/audit/{aliased.pk}/undo")

    assert again.status_code == 409
    assert "already undone" in page(again)


def test_unknown_event_is_refused(curator: Client, base: str) -> None:
    response = curator.post(f"{base}/audit/999999/undo")

    assert response.status_code == 404 and "audit event 999999 not found" in page(response)


@pytest.mark.parametrize("target", ["https://evil.test/", "//evil.test/x"])
def test_undo_never_redirects_off_site(
    curator: Client, base: str, aliased: AuditEvent, target: str
) -> None:
    response = curator.post(f"{base}/audit/{aliased.pk}/undo", {"next": target})

    assert response["Location"] == f"{base}/audit/"


def test_audit_page_query_count_does_not_grow(
    access: ContextAccess, viewer: Client, base: str, memory: Memory, django_assert_num_queries: Any
) -> None:
    works_at = Predicate.objects.get(name="works_at")
    for extra in (1, 12):
        for i in range(extra):
            predicate_alias_add(access=access, predicate=works_at, alias=f"form_{extra}_{i}")
        # session, user, context, membership, contexts (switcher); count; one page of events
        with django_assert_num_queries(7):
            viewer.get(f"{base}/audit/")
