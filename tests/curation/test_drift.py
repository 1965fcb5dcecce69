"""The drift screen: list, alias / promote / reject one or many, undo, htmx partials."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from memory.domain.access import ContextAccess
from memory.models import AuditEvent, Fact, Predicate, PredicateAlias, Role
from memory.selectors.overview import drift_series
from memory.services.facts.write import fact_write
from memory.services.undo import audit_undo
from tests.curation.conftest import Memory, page, person

pytestmark = pytest.mark.django_db


def _status(name: str) -> str | None:
    return Predicate.objects.filter(name=name).values_list("status", flat=True).first()


def test_drift_lists_items_with_counts_examples_and_suggestions(
    viewer: Client, base: str, memory: Memory
) -> None:
    response = viewer.get(f"{base}/drift/")

    html = page(response)
    [row] = response.context["rows"]
    assert row.name == "works_for"
    assert row.item.fact_count == 2
    assert row.top_target == "works_at"
    assert "Alex" in html and "Sam" in html and "worksFor" in html  # examples, as written
    assert 'id="drift-works_for"' in html
    assert "first seen" in html


def test_each_suggestion_says_why_on_the_page_not_only_in_a_tooltip(
    viewer: Client, base: str, memory: Memory
) -> None:
    response = viewer.get(f"{base}/drift/")

    html = page(response)
    top = response.context["rows"][0].item.suggestions[0]
    why = html.split('data-testid="suggestion-why">')[1].split("</span>")[0]
    assert why.startswith(f"{top.basis.replace('_', ' ')}: name ")
    assert ", description " in why
    assert all(reason in why for reason in top.reasons)


def test_while_the_model_loads_the_page_answers_at_once_without_suggestions(
    viewer: Client, base: str, memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memory.infra import embeddings

    # The state a server is in for its first 10-20 s: the warm-up thread still loading.
    monkeypatch.setattr(embeddings._warm_up, "state", "loading")

    response = viewer.get(f"{base}/drift/")

    html = page(response)
    [row] = response.context["rows"]
    assert row.name == "works_for" and row.item.suggestions == [] and not row.top_target
    assert "the embedding model is still loading" in html
    assert 'id="suggestions-unavailable"' in html


def test_viewer_sees_no_action_forms(viewer: Client, base: str, memory: Memory) -> None:
    html = page(viewer.get(f"{base}/drift/"))

    assert "/drift/works_for/resolve" not in html
    assert "/drift/bulk" not in html and 'name="names"' not in html
    assert "resolving drift needs the curator role" in html


def test_alias_moves_the_facts_and_offers_undo(curator: Client, base: str, memory: Memory) -> None:
    response = curator.post(
        f"{base}/drift/works_for/resolve", {"action": "alias", "target": "works_at"}
    )

    assert response.status_code == 302 and response["Location"] == f"{base}/drift/"
    assert _status("works_for") is None
    assert PredicateAlias.objects.filter(alias="works_for", predicate__name="works_at").exists()
    moved = Fact.objects.filter(raw_predicate__in=["works_for", "worksFor"])
    assert {f.predicate.name for f in moved} == {"works_at"}
    after = curator.get(response["Location"])
    html = page(after)
    event = AuditEvent.objects.get(action="drift_alias")
    assert "aliased works_for → works_at; moved 2 facts" in html.lower()
    assert f'action="{base}/audit/{event.pk}/undo"' in html
    assert "No open drift" in html


def test_undo_from_the_message_brings_the_drift_back(
    curator: Client, base: str, memory: Memory
) -> None:
    curator.post(f"{base}/drift/works_for/resolve", {"action": "alias", "target": "works_at"})
    event = AuditEvent.objects.get(action="drift_alias")

    response = curator.post(f"{base}/audit/{event.pk}/undo", {"next": f"{base}/drift/"})

    assert response["Location"] == f"{base}/drift/"
    assert _status("works_for") == "observed"
    assert Fact.objects.filter(predicate__name="works_for").count() == 2
    assert "Undone: aliased works_for" in page(curator.get(f"{base}/drift/"))


def test_htmx_alias_answers_the_rows_partial_with_the_message_out_of_band(
    curator: Client, base: str, memory: Memory
) -> None:
    response = curator.post(
        f"{base}/drift/works_for/resolve",
        {"action": "alias", "target": "works_at"},
        HTTP_HX_REQUEST="true",
    )

    html = page(response)
    assert response.status_code == 200
    assert html.lstrip().startswith('<div id="drift-rows">')
    assert "<html" not in html and "context-bar" not in html
    assert 'id="flash" class="flash" aria-live="polite" hx-swap-oob="true"' in html
    assert "moved 2 facts" in html


def test_htmx_get_returns_the_partial_and_history_restore_the_page(
    viewer: Client, base: str, memory: Memory
) -> None:
    partial = page(viewer.get(f"{base}/drift/", HTTP_HX_REQUEST="true"))
    restored = page(
        viewer.get(f"{base}/drift/", HTTP_HX_REQUEST="true", HTTP_HX_HISTORY_RESTORE_REQUEST="true")
    )

    assert "<html" not in partial and 'id="drift-rows"' in partial
    assert "<html" in restored


def test_reject_retracts_the_facts(curator: Client, base: str, memory: Memory) -> None:
    curator.post(f"{base}/drift/works_for/resolve", {"action": "reject"})

    assert _status("works_for") == "rejected"
    assert set(
        Fact.objects.filter(predicate__name="works_for").values_list("status", flat=True)
    ) == {"retracted"}


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"action": "alias"}, "choose the registered predicate"),
        ({"action": "alias", "target": "no_such_predicate"}, "no predicate"),
        ({"action": "alias", "target": "knows_about_x]"}, "knows_about_x"),
        ({"action": "merge"}, "Select a valid choice"),
        ({}, "This field is required"),
    ],
)
def test_bad_resolutions_show_an_inline_error_and_change_nothing(
    curator: Client, base: str, memory: Memory, data: dict[str, str], error: str
) -> None:
    response = curator.post(f"{base}/drift/works_for/resolve", data)

    assert response.status_code == 400
    html = page(response)
    assert 'class="field-error"' in html and error in html
    assert _status("works_for") == "observed"
    assert not AuditEvent.objects.exists()


def test_resolving_an_item_that_is_no_longer_open_is_a_409(
    curator: Client, base: str, memory: Memory
) -> None:
    curator.post(f"{base}/drift/works_for/resolve", {"action": "reject"})

    again = curator.post(f"{base}/drift/works_for/resolve", {"action": "reject"})

    assert again.status_code == 409
    assert "not open drift" in page(again)


def test_promote_registers_with_the_definition(curator: Client, base: str, memory: Memory) -> None:
    response = curator.post(
        f"{base}/drift/works_for/promote",
        {
            "description": "Employment",
            "category": "work",
            "kind": "relation",
            "object_types": ["organisation"],
            "default_importance": "0.6",
            "ranking_weight": "1.2",
            "lifecycle": "stateful",
        },
    )

    assert response.status_code == 302
    predicate = Predicate.objects.get(name="works_for")
    assert (predicate.status, predicate.category, predicate.object_types) == (
        "registered",
        "work",
        ["organisation"],
    )
    assert predicate.ranking_weight == pytest.approx(1.2)
    event = AuditEvent.objects.get(action="predicate_register")
    assert event.undo is not None and event.undo["op"] == "predicate_restore"


def test_promote_form_errors_are_shown_on_the_item(
    curator: Client, base: str, memory: Memory
) -> None:
    response = curator.post(
        f"{base}/drift/works_for/promote",
        {
            "category": "Work Stuff!",
            "kind": "relation",
            "default_importance": "3",
            "ranking_weight": "1",
            "lifecycle": "stable",
            "single_valued": "on",
            "is_aggregate": "on",
        },
    )

    html = page(response)
    assert response.status_code == 400
    assert "a category is letters, digits, spaces or _" in html
    assert "less than or equal to 1" in html
    assert "cannot be both single-valued" in html
    assert '<details class="promote" open>' in html
    assert _status("works_for") == "observed"


def test_bulk_alias_and_reject(
    access: ContextAccess, curator: Client, base: str, memory: Memory
) -> None:
    fact_write(access=access, subject=memory.alex, predicate="likes_food", value="pizza")
    fact_write(access=access, subject=memory.sam, predicate="employed_at", object=memory.acme)
    chosen = {
        "action": "alias",
        "names": ["works_for", "employed_at"],
        "target:works_for": "works_at",
        "target:employed_at": "works_at",
    }
    # First the confirmation: each name → target with the facts that move; nothing moved.
    confirmation = page(curator.post(f"{base}/drift/bulk", chosen))
    ready = confirmation[confirmation.index('data-testid="bulk-ready"') :]
    assert "<code>works_for</code> → <code>works_at</code>" in ready
    assert "<code>employed_at</code> → <code>works_at</code>" in ready
    assert "Sam works_at Acme" in ready and "Alex works_at Acme" in ready
    assert _status("works_for") == _status("employed_at") == "observed"

    aliased = curator.post(f"{base}/drift/bulk", {**chosen, "confirm": "1"})
    rejected = curator.post(f"{base}/drift/bulk", {"action": "reject", "names": ["likes_food"]})

    assert aliased.status_code == rejected.status_code == 302
    assert _status("works_for") is None and _status("employed_at") is None
    assert _status("likes_food") == "rejected"
    [bulk] = AuditEvent.objects.filter(action__startswith="drift_alias")
    assert bulk.action == "drift_alias_bulk"  # one action, one undo
    assert drift_series(access=access, days=1)[-1].resolved == 3  # two aliases, one reject
    assert "Aliased 2 drift items" in page(curator.get(f"{base}/drift/"))

    # Its one undo brings both back, as one audited action that can itself be undone.
    audit_undo(access=access, event_id=bulk.pk)
    assert _status("works_for") == _status("employed_at") == "observed"
    undone = AuditEvent.objects.get(action="drift_alias_bulk_undo")
    assert "undid 2 aliases" in undone.summary
    audit_undo(access=access, event_id=undone.pk)
    assert _status("works_for") is None and _status("employed_at") is None
    assert AuditEvent.objects.filter(action="drift_alias_bulk").count() == 2


def test_bulk_reports_each_failure_and_keeps_the_others(
    curator: Client, base: str, memory: Memory
) -> None:
    response = curator.post(
        f"{base}/drift/bulk",
        {"action": "reject", "names": ["works_for", "never_seen"]},
    )

    assert response.status_code == 200
    html = page(response)
    assert "Rejected 1 drift item" in html
    assert _status("works_for") == "rejected"


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"action": "alias"}, "select at least one drift item"),
        ({"action": "explode", "names": ["works_for"]}, "Select a valid choice"),
    ],
)
def test_bulk_bad_input_changes_nothing(
    curator: Client, base: str, memory: Memory, data: dict[str, Any], error: str
) -> None:
    response = curator.post(f"{base}/drift/bulk", data)

    assert response.status_code == 400
    assert error in page(response)
    assert _status("works_for") == "observed"


def test_bulk_alias_skips_an_item_without_a_confident_target(
    curator: Client, base: str, memory: Memory
) -> None:
    # The page sends no target for an item whose top suggestion is weak: it is skipped and
    # named, never aliased to a guess.
    confirmation = page(
        curator.post(
            f"{base}/drift/bulk",
            {"action": "alias", "names": ["works_for", "employed_at"], "target:employed_at": ""},
        )
    )
    assert "Left out, no confident suggestion" in confirmation
    assert "<code>works_for</code>" in confirmation[confirmation.index("bulk-skipped") :]
    assert 'data-testid="bulk-confirm"' not in confirmation  # nothing to apply
    response = curator.post(
        f"{base}/drift/bulk",
        {"action": "alias", "names": ["works_for"], "confirm": "1"},
        follow=True,
    )

    assert "Skipped works_for: no confident suggestion" in page(response)
    assert _status("works_for") == "observed"


def test_bulk_alias_leaves_out_a_kind_mismatch_for_one_by_one(
    access: ContextAccess, curator: Client, base: str, memory: Memory
) -> None:
    fact_write(access=access, subject=memory.alex, predicate="favourite_colour", value="green")
    confirmation = page(
        curator.post(
            f"{base}/drift/bulk",
            {
                "action": "alias",
                "names": ["favourite_colour", "works_for"],
                "target:favourite_colour": "works_at",
                "target:works_for": "works_at",
            },
            HTTP_HX_REQUEST="true",
        )
    )
    assert confirmation.lstrip().startswith('<div id="drift-rows">')
    held = confirmation[confirmation.index('data-testid="bulk-held"') :]
    assert "<code>favourite_colour</code>" in held and "attribute" in held
    ready = confirmation[confirmation.index('data-testid="bulk-ready"') :]
    assert "<code>works_for</code>" in ready.split("bulk-held")[0]
    assert _status("favourite_colour") == "observed"


def test_drift_outside_the_grants_is_not_listed(
    access: ContextAccess, client_for: Callable[..., Client], base: str, memory: Memory
) -> None:
    limited = client_for(Role.CURATOR, grants=["read,write:org/globex/*"])
    bob = person(access, "Bob", scope="org/globex")
    fact_write(access=access, subject=bob, predicate="plays", value="chess")

    rows = limited.get(f"{base}/drift/").context["rows"]

    assert [r.name for r in rows] == ["plays"]


def _drift(access: ContextAccess, memory: Memory, count: int) -> None:
    for i in range(count):
        fact_write(access=access, subject=memory.sam, predicate=f"odd_fact_{i}", value=str(i))


def test_drift_page_query_count_does_not_grow_with_items(
    access: ContextAccess,
    viewer: Client,
    base: str,
    memory: Memory,
    django_assert_num_queries: Any,
) -> None:
    viewer.get(f"{base}/drift/")  # warm the suggestion embeddings (no queries either way)
    for extra in (0, 6):
        _drift(access, memory, extra)
        # session, user, context, membership, contexts (switcher); observed predicates
        # with their example ids; their usage; their rejected claims; the examples;
        # registered predicates; their aliases; the registered names of the target list;
        # facts waiting for review (navigation)
        with django_assert_num_queries(13):
            response = viewer.get(f"{base}/drift/")
        assert len(response.context["rows"]) == 1 + extra


def test_promote_forms_load_on_demand(curator: Client, base: str, memory: Memory) -> None:
    listing = page(curator.get(f"{base}/drift/"))
    partial = page(curator.get(f"{base}/drift/works_for/definition", HTTP_HX_REQUEST="true"))
    whole = curator.get(f"{base}/drift/works_for/definition")

    # The list links to the form instead of rendering one per item.
    assert f'hx-get="{base}/drift/works_for/definition"' in listing
    assert 'name="category"' not in listing
    assert partial.lstrip().startswith('<form method="post" action="')
    assert 'name="category"' in partial and "<html" not in partial
    # Without JavaScript: the drift page with that item's form open.
    assert whole.status_code == 200
    assert '<details class="promote" open>' in page(whole)


def test_promote_form_is_for_curators_and_open_drift_only(
    viewer: Client, curator: Client, base: str, memory: Memory
) -> None:
    assert viewer.get(f"{base}/drift/works_for/definition").status_code == 403
    assert curator.get(f"{base}/drift/works_at/definition").status_code == 404
    assert curator.post(f"{base}/drift/works_for/definition").status_code == 405


def test_drift_is_paged_and_an_item_s_error_shows_on_its_page(
    access: ContextAccess, curator: Client, base: str, memory: Memory
) -> None:
    _drift(access, memory, 24)  # 25 items with works_for; works_for (2 facts) comes first

    first = curator.get(f"{base}/drift/")
    second = curator.get(f"{base}/drift/?page=2")
    refused = curator.post(f"{base}/drift/odd_fact_9/resolve", {"action": "alias", "target": ""})

    assert len(first.context["rows"]) == 20 and len(second.context["rows"]) == 5
    assert "25 open items" in page(first) and "Page 2 of 2" in page(second)
    assert first.context["rows"][0].name == "works_for"
    assert first.context["rows"][0].item.suggestions  # ranked for the shown page
    # odd_fact_9 is on page 2 (equal counts go by name): its error is shown there.
    assert refused.status_code == 400
    assert any(row.name == "odd_fact_9" and row.error for row in refused.context["rows"])
    assert refused.context["page"].number == 2
    assert f'action="{base}/drift/odd_fact_9/resolve?page=2"' in page(refused)


def test_a_page_whose_items_shifted_embeds_nothing_it_has_seen(
    access: ContextAccess, memory: Memory
) -> None:
    from memory.selectors.drift import (
        drift_examples_attach,
        drift_list,
        drift_suggestions_attach,
        drift_vector_cache_info,
    )

    fact_write(access=access, subject=memory.alex, predicate="likes_food", value="pizza")
    items = drift_list(access=access, with_suggestions=False)
    drift_examples_attach(items=items)
    drift_suggestions_attach(access=access, items=items)
    seen = drift_vector_cache_info()
    # Another grouping of the same names (the list shifted after an alias): all cached.
    shifted = drift_list(access=access, with_suggestions=False)[::-1][:1]
    drift_examples_attach(items=shifted)
    drift_suggestions_attach(access=access, items=shifted)
    after = drift_vector_cache_info()
    assert after["misses"] == seen["misses"]
    assert after["hits"] > seen["hits"]
    assert [s.name for s in shifted[0].suggestions] == [
        s.name
        for s in next(i for i in items if i.predicate.name == shifted[0].predicate.name).suggestions
    ]


def test_reject_says_what_it_retracts_before_it_happens(
    curator: Client, base: str, memory: Memory
) -> None:
    html = page(curator.get(f"{base}/drift/"))

    assert "Reject refuses later writes using <code>works_for</code> and retracts its 2 " in html
    assert "current facts (kept in history; Undo brings them back)." in html
    assert 'hx-confirm="Reject the selected items?' in html  # the bulk reject asks first


def test_an_action_from_a_card_answers_its_outcome_and_undo_in_place_of_the_card(
    curator: Client, base: str, memory: Memory
) -> None:
    response = curator.post(
        f"{base}/drift/works_for/resolve",
        {"action": "reject", "in_card": "1"},
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="drift-works_for",
    )

    html = page(response)
    event = AuditEvent.objects.get(action="drift_reject")
    assert response.status_code == 200 and "HX-Retarget" not in response
    assert html.lstrip().startswith('<li class="card drift-item resolved" id="drift-works_for"')
    assert "Rejected works_for; retracted 2 facts." in html
    assert f'action="{base}/audit/{event.pk}/undo"' in html  # Undo, at the card
    assert '<span id="drift-total" hx-swap-oob="true" class="muted">0 open items</span>' in html
    assert 'id="flash"' not in html  # not at the top of the page


def test_a_refused_action_from_a_card_re_shows_the_list_with_the_reason(
    curator: Client, base: str, memory: Memory
) -> None:
    response = curator.post(
        f"{base}/drift/works_for/resolve",
        {"action": "alias", "target": "no_such_predicate", "in_card": "1"},
        HTTP_HX_REQUEST="true",
    )

    assert response.status_code == 400
    assert response["HX-Retarget"] == "#drift-rows"
    assert 'id="drift-works_for"' in page(response) and "field-error" in page(response)


def test_counts_and_articles_read_as_english(
    access: ContextAccess, curator: Client, base: str
) -> None:
    alex = person(access, "Alex")
    fact_write(access=access, subject=alex, predicate="favourite_colour", value="green")

    response = curator.post(f"{base}/drift/favourite_colour/resolve", {"action": "reject"})

    assert AuditEvent.objects.get(action="drift_reject").summary == (
        "rejected favourite_colour; retracted 1 fact"
    )
    assert "Rejected favourite_colour; retracted 1 fact." in page(curator.get(response["Location"]))
