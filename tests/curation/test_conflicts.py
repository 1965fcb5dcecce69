"""The conflicts screen: values side by side; keep one, keep both, or edit."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from memory.domain.access import ContextAccess
from memory.models import AuditEvent, Fact
from memory.models import Conflict as ConflictRecord
from memory.services.facts.write import fact_write
from memory.services.registry.predicates import predicate_register
from tests.curation.conftest import Memory, page, person

pytestmark = pytest.mark.django_db


def _titles() -> dict[str, str]:
    return dict(
        Fact.objects.filter(predicate__name="current_title").values_list("value_text", "status")
    )


def test_conflict_shows_both_values_side_by_side(viewer: Client, base: str, memory: Memory) -> None:
    html = page(viewer.get(f"{base}/conflicts/"))

    assert 'class="side-by-side"' in html
    current, contested = html.index("Current value"), html.index("New value")
    assert current < html.index("Engineer") < contested < html.index("CTO")
    assert "confidence 0.40" in html
    assert f"/conflicts/{memory.conflict.pk}/resolve" not in html  # a viewer has no buttons


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("keep_current", {"Engineer": "current", "CTO": "retracted"}),
        ("keep_new", {"Engineer": "superseded", "CTO": "current"}),
        ("keep_both", {"Engineer": "current", "CTO": "superseded"}),
    ],
)
def test_resolutions(
    curator: Client, base: str, memory: Memory, action: str, expected: dict[str, str]
) -> None:
    response = curator.post(f"{base}/conflicts/{memory.conflict.pk}/resolve", {"action": action})

    assert response.status_code == 302
    assert _titles() == expected
    assert ConflictRecord.objects.get().status == "resolved"
    assert "No open conflicts" in page(curator.get(f"{base}/conflicts/"))


def test_edit_writes_the_corrected_value(curator: Client, base: str, memory: Memory) -> None:
    curator.post(
        f"{base}/conflicts/{memory.conflict.pk}/resolve",
        {"action": "edit", "value": "Chief Technology Officer"},
    )

    assert _titles()["Chief Technology Officer"] == "current"
    assert _titles()["CTO"] == "retracted"


def test_htmx_resolution_answers_the_list_partial(
    curator: Client, base: str, memory: Memory
) -> None:
    response = curator.post(
        f"{base}/conflicts/{memory.conflict.pk}/resolve?status=open",
        {"action": "keep_new"},
        HTTP_HX_REQUEST="true",
    )

    html = page(response)
    assert html.lstrip().startswith('<div id="conflict-rows">')
    assert "made the new value current" in html and "hx-swap-oob" in html


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"action": "edit"}, "type the corrected value"),
        ({"action": "edit", "value": "   "}, "type the corrected value"),
        ({"action": "flip"}, "Select a valid choice"),
        ({"action": "edit", "value": "x" * 2001}, "at most 2000 characters"),
    ],
)
def test_bad_input_is_shown_on_the_conflict_and_changes_nothing(
    curator: Client, base: str, memory: Memory, data: dict[str, str], error: str
) -> None:
    response = curator.post(f"{base}/conflicts/{memory.conflict.pk}/resolve", data)

    assert response.status_code == 400
    assert error in page(response)
    assert _titles() == {"Engineer": "current", "CTO": "contested"}
    assert not AuditEvent.objects.exists()


def test_resolving_twice_is_a_409(curator: Client, base: str, memory: Memory) -> None:
    url = f"{base}/conflicts/{memory.conflict.pk}/resolve"
    curator.post(url, {"action": "keep_new"})

    again = curator.post(url, {"action": "keep_current"})

    assert again.status_code == 409
    assert _titles() == {"Engineer": "superseded", "CTO": "current"}


def test_resolved_tab_lists_resolved_conflicts(curator: Client, base: str, memory: Memory) -> None:
    curator.post(f"{base}/conflicts/{memory.conflict.pk}/resolve", {"action": "keep_new"})

    html = page(curator.get(f"{base}/conflicts/?status=resolved"))

    # What was kept, in words, under labels that no longer call the old value current.
    assert "Kept the new value “CTO”; it replaced “Engineer”." in html
    assert "keepnew" not in html and "keep_new" not in html
    assert "Value before" in html and "Current value" not in html


def test_resolving_a_conflict_offers_undo_in_its_message(
    curator: Client, base: str, memory: Memory
) -> None:
    done = curator.post(
        f"{base}/conflicts/{memory.conflict.pk}/resolve", {"action": "keep_new"}, follow=True
    )
    html = page(done)
    assert "made the new value current" in html
    undo = re.search(r'action="([^"]*/audit/\d+/undo)"', html)
    assert undo is not None, html
    curator.post(undo.group(1))
    memory.conflict.refresh_from_db()
    assert memory.conflict.status == "open"


def test_unknown_conflict_is_404(curator: Client, base: str, memory: Memory) -> None:
    assert (
        curator.post(f"{base}/conflicts/999999/resolve", {"action": "keep_new"}).status_code == 404
    )


def test_conflicts_page_query_count_does_not_grow(
    access: ContextAccess,
    viewer: Client,
    base: str,
    memory: Memory,
    django_assert_num_queries: Any,
) -> None:
    # A single-valued relation: its conflicts' objects are joined, not fetched one by one.
    predicate_register(access=access, name="line_manager", kind="relation", single_valued=True)
    for round_ in range(2):
        if round_:
            for i in range(5):
                someone = person(access, f"Person {i}")
                fact_write(
                    access=access, subject=someone, predicate="line_manager", object=memory.alex
                )
                fact_write(
                    access=access,
                    subject=someone,
                    predicate="line_manager",
                    object=memory.sam,
                    confidence=0.3,
                )
        # session, user, context, membership, contexts (switcher); count of conflicts;
        # one page of conflicts with subject, predicate, both facts and objects joined;
        # facts waiting for review (navigation)
        with django_assert_num_queries(8):
            response = viewer.get(f"{base}/conflicts/")
        assert len(response.context["page"].object_list) == 1 + 5 * round_
