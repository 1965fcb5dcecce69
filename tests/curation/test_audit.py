"""The audit log: every change listed, each undoable by a curator."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from memory.domain.access import ContextAccess
from memory.models import AuditEvent, Predicate, PredicateAlias, Role
from memory.selectors.predicates import predicate_get
from memory.services.registry.predicates import predicate_alias_add
from tests.curation.conftest import Memory, page, person

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
        # session, user, context, membership, contexts (switcher); count; one page of events;
        # facts waiting for review (navigation)
        with django_assert_num_queries(8):
            viewer.get(f"{base}/audit/")


def test_a_long_log_is_counted_up_to_a_cap(
    access: ContextAccess, viewer: Client, base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from curation.views.audit import CappedPaginator

    monkeypatch.setattr(CappedPaginator, "cap", 60)
    AuditEvent.objects.bulk_create(
        AuditEvent(
            context=access.context, actor_label="x", action="predicate_update",
            target_type="predicate", target_id="works_at", summary=f"change {i}",
        )
        for i in range(70)
    )  # fmt: skip

    first = page(viewer.get(f"{base}/audit/"))
    last = page(viewer.get(f"{base}/audit/?page=2"))

    assert "Page 1 of more than 1 · more than 60 in all" in first
    assert "change 69" in first and "change 20" in first and "change 19" not in first
    assert "change 19" in last and "change 9" in last  # the 61st event: still reachable
    assert "change 8" not in last


def test_events_about_entities_follow_the_entities_grants(
    access: ContextAccess, client_for: Any, base: str, memory: Memory
) -> None:
    hidden = person(access, "Hidden", scope="org/globex")
    for entity in (memory.alex, hidden):
        AuditEvent.objects.create(
            context=access.context, actor_label="x", action="entity_update",
            target_type="entity", target_id=str(entity.pk), summary=f"edited {entity.name}",
        )  # fmt: skip
    AuditEvent.objects.create(
        context=access.context, actor_label="x", action="entity_update",
        target_type="entity", target_id="not-a-number", summary="edited nobody",
    )  # fmt: skip
    limited = client_for(Role.VIEWER, grants=["read:org/acme/*"])

    html = page(limited.get(f"{base}/audit/"))

    assert "edited Alex" in html and "edited Hidden" not in html
    assert "edited nobody" not in html


def _recorded_actions() -> set[str]:
    """Every ``action="..."`` passed to audit_record in the project's code."""
    import re
    from pathlib import Path

    from django.conf import settings

    found: set[str] = set()
    for folder in ("memory", "curation"):
        for path in (Path(settings.BASE_DIR) / folder).rglob("*.py"):
            text = path.read_text()
            for call in re.finditer(r"audit_record\((.{0,600}?)\n *\)", text, re.DOTALL):
                found |= set(re.findall(r'action="([a-z_]+)"', call[1]))
    # The review records fact_accept or fact_reject: action=f"fact_{action}".
    return found | {"fact_accept", "fact_reject"}


def test_the_action_filter_offers_every_action_the_services_record(
    viewer: Client, base: str
) -> None:
    from memory.selectors.audit import ACTION_LABELS

    recorded = _recorded_actions()
    html = page(viewer.get(f"{base}/audit/"))

    assert {"entity_merge", "merge_undo", "duplicates_dismiss", "entities_seed"} <= recorded
    assert recorded <= set(ACTION_LABELS), (
        f"missing from the filter: {recorded - set(ACTION_LABELS)}"
    )
    for action, label in ACTION_LABELS.items():
        assert f'<option value="{action}">{label}</option>' in html


def test_rows_name_the_entities_of_a_merge_and_its_undo(
    curator: Client, base: str, access: ContextAccess, memory: Memory
) -> None:
    from memory.services.merges.merge import entity_merge, merge_undo

    extra = person(access, "Alexander")
    record = entity_merge(access=access, survivor_id=memory.alex.pk, merged_ids=[extra.pk])
    merge_undo(access=access, merge_id=record.pk)

    html = page(curator.get(f"{base}/audit/"))

    assert "undid merge" not in html
    assert (
        f'undid the merge into <a href="{base}/entities/{memory.alex.pk}/">Alex</a>; restored '
        f'<a href="{base}/entities/{extra.pk}/">Alexander</a>'
    ) in html
    assert ">Merge undone</span>" in html and ">Entities merged</span>" in html


def test_a_conflict_resolution_row_names_its_subject(
    curator: Client, base: str, access: ContextAccess, memory: Memory
) -> None:
    from memory.services.facts.conflicts import conflict_resolve

    conflict_resolve(access=access, conflict=memory.conflict, action="keep_current")

    html = page(curator.get(f"{base}/audit/"))

    assert "of entity" not in html
    assert f'for current_title of <a href="{base}/entities/{memory.alex.pk}/">Alex</a>' in html


def test_rows_keep_the_id_of_an_entity_the_reader_may_not_see(
    client_for: Any, base: str, access: ContextAccess
) -> None:
    from memory.services.duplicates.finder import duplicates_dismiss

    shown = person(access, "Shown", scope="org/acme")  # the event's target: it is listed
    hidden = person(access, "Hidden", scope="team/blue")
    duplicates_dismiss(access=access, entity_ids=[shown.pk, hidden.pk])
    reader = client_for(Role.VIEWER, grants=["read:org/*"])

    html = page(reader.get(f"{base}/audit/"))

    assert f"marked entities [{shown.pk}, {hidden.pk}] as not duplicates" in html
    assert "Hidden" not in html
