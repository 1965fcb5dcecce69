"""The registry screen: categories, aliases (collisions inline), flags, edit, JSON out/in."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from memory.domain.access import ContextAccess
from memory.models import AuditEvent, Predicate, PredicateAlias, PredicateStatus
from memory.services.facts.write import fact_write
from memory.services.registry.predicates import predicate_register
from tests.curation.conftest import Memory, page

pytestmark = pytest.mark.django_db


def _aliases(name: str) -> set[str]:
    return set(PredicateAlias.objects.filter(predicate__name=name).values_list("alias", flat=True))


def _upload(data: Any, name: str = "registry.json") -> SimpleUploadedFile:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    return SimpleUploadedFile(name, raw, content_type="application/json")


def test_registry_groups_predicates_by_category_with_fact_counts(
    viewer: Client, base: str, memory: Memory
) -> None:
    response = viewer.get(f"{base}/registry/")

    html = page(response)
    predicates = {p.name: p for p in response.context["predicates"]}
    assert predicates["knows"].fact_count == 1
    assert "works_for" not in predicates  # drift is not registered
    assert '<section class="category">' in html and "<h2>identity" in html
    assert 'id="p-works_at"' in html and "employed_by" in html  # a standard alias


def test_status_filter_shows_drift(viewer: Client, base: str, memory: Memory) -> None:
    response = viewer.get(f"{base}/registry/?status=observed")

    assert [p.name for p in response.context["predicates"]] == ["works_for"]


def test_category_filter_and_htmx_partial(viewer: Client, base: str, memory: Memory) -> None:
    response = viewer.get(f"{base}/registry/?category=identity", HTTP_HX_REQUEST="true")

    html = page(response)
    assert html.lstrip().startswith('<div id="registry-table">')
    assert "<h2>identity" in html and "<h2>work" not in html


def test_curator_adds_an_alias(curator: Client, base: str, memory: Memory) -> None:
    response = curator.post(f"{base}/registry/works_at/aliases", {"alias": "Employed-At"})

    assert response.status_code == 302
    assert response["Location"] == f"{base}/registry/#p-works_at"
    assert "employed_at" in _aliases("works_at")
    assert AuditEvent.objects.filter(action="predicate_alias_add").count() == 1


def test_htmx_alias_add_answers_the_row(curator: Client, base: str, memory: Memory) -> None:
    response = curator.post(
        f"{base}/registry/works_at/aliases", {"alias": "staffed_at"}, HTTP_HX_REQUEST="true"
    )

    html = page(response)
    assert response.status_code == 200
    assert html.lstrip().startswith('<tr id="p-works_at">')
    assert "staffed_at" in html


@pytest.mark.parametrize(
    ("alias", "error"),
    [
        ("knows", "collides with the registered predicate"),
        ("employed_by", "0"),  # already this predicate's own alias: accepted unchanged
        ("works_for", "exists as an observed predicate (drift)"),
        ("works_at", "is the name of"),
        ("", "type an alias"),
    ],
)
def test_alias_collisions_are_shown_inline(
    curator: Client, base: str, memory: Memory, alias: str, error: str
) -> None:
    response = curator.post(
        f"{base}/registry/works_at/aliases", {"alias": alias}, HTTP_HX_REQUEST="true"
    )

    if error == "0":
        assert response.status_code == 200
        return
    assert response.status_code == 400
    html = page(response)
    assert html.lstrip().startswith('<tr id="p-works_at">')
    assert '<p class="field-error" role="alert">' in html and error in html
    assert not AuditEvent.objects.exists()


def test_alias_collision_without_javascript_renders_the_page_with_the_row_error(
    curator: Client, base: str, memory: Memory
) -> None:
    response = curator.post(f"{base}/registry/works_at/aliases", {"alias": "knows"})

    html = page(response)
    assert response.status_code == 400
    assert "<html" in html
    row = html[html.index('id="p-works_at"') :]
    assert "collides with the registered predicate" in row[: row.index("</tr>")]


def test_alias_from_the_predicate_page_returns_there(
    curator: Client, base: str, memory: Memory
) -> None:
    ok = curator.post(f"{base}/registry/works_at/aliases", {"alias": "hired_at", "view": "detail"})
    bad = curator.post(f"{base}/registry/works_at/aliases", {"alias": "knows", "view": "detail"})

    assert ok["Location"] == f"{base}/registry/works_at/"
    assert bad.status_code == 400 and "collides" in page(bad)
    assert "Facts" in page(bad)  # the predicate page


def test_curator_removes_an_alias(curator: Client, base: str, memory: Memory) -> None:
    curator.post(f"{base}/registry/works_at/aliases/remove", {"alias": "employed_by"})
    missing = curator.post(f"{base}/registry/works_at/aliases/remove", {"alias": "nope_nope"})

    assert "employed_by" not in _aliases("works_at")
    assert missing.status_code == 400 and "has no alias" in page(missing)


def test_admin_toggles_a_flag_with_a_message_that_offers_undo(
    admin: Client, base: str, memory: Memory
) -> None:
    on = admin.post(
        f"{base}/registry/works_at/flags",
        {"flag": "exclude_from_prompt", "value": "1"},
        follow=True,
    )

    assert Predicate.objects.get(name="works_at").exclude_from_prompt is True
    html = page(on)
    assert "works_at: not in prompt is now on." in html
    event = AuditEvent.objects.filter(action="predicate_update").latest("pk")
    assert f'action="{base}/audit/{event.pk}/undo"' in html
    assert 'aria-pressed="true" title="On: click to turn off"' in html
    admin.post(f"{base}/audit/{event.pk}/undo")
    assert Predicate.objects.get(name="works_at").exclude_from_prompt is False


def test_turning_single_valued_on_warns_with_the_subjects_holding_several_values(
    admin: Client, base: str, access: ContextAccess, memory: Memory
) -> None:
    predicate_register(access=access, name="favourite_colour", kind="attribute", category="misc")
    for value in ("red", "blue", "green"):
        fact_write(access=access, subject=memory.alex, predicate="favourite_colour", value=value)
    fact_write(access=access, subject=memory.sam, predicate="favourite_colour", value="red")

    response = admin.post(
        f"{base}/registry/favourite_colour/flags",
        {"flag": "single_valued", "value": "1"},
        follow=True,
    )

    html = page(response)
    assert "favourite_colour: single-valued is now on." in html
    assert "1 subject already holds several current favourite_colour values" in html


def test_every_definition_field_explains_itself_and_offers_the_categories(
    admin: Client, base: str, memory: Memory
) -> None:
    from curation.forms.registry import PredicateDefinitionForm

    html = page(admin.get(f"{base}/registry/works_at/"))

    for name, field in PredicateDefinitionForm.base_fields.items():
        assert field.help_text, f"{name} has no help text"
    assert '<datalist id="id_category-choices"><option value="' in html
    assert "How facts age" in html


def test_a_category_as_the_registry_shows_it_is_accepted(
    admin: Client, base: str, memory: Memory
) -> None:
    response = admin.post(f"{base}/registry/works_at/edit", _definition(category="Human Resources"))

    assert response.status_code == 302
    assert Predicate.objects.get(name="works_at").category == "human_resources"


def test_flags_that_cannot_go_together_are_refused_inline(
    admin: Client, base: str, memory: Memory
) -> None:
    admin.post(f"{base}/registry/knows/flags", {"flag": "is_aggregate", "value": "1"})

    response = admin.post(f"{base}/registry/knows/flags", {"flag": "single_valued", "value": "1"})
    unknown = admin.post(f"{base}/registry/knows/flags", {"flag": "name", "value": "1"})

    assert response.status_code == 400
    assert "cannot be both single_valued" in page(response)
    assert unknown.status_code == 400
    assert Predicate.objects.get(name="knows").single_valued is False


def _definition(**overrides: Any) -> dict[str, Any]:
    data = {
        "description": "Employment by an organisation",
        "category": "work",
        "kind": "relation",
        "subject_types": ["person"],
        "object_types": ["organisation"],
        "inverse": "employs",
        "default_importance": "0.7",
        "ranking_weight": "1.5",
        "lifecycle": "stateful",
        "default_validity_days": "",
    }
    return {**data, **overrides}


def test_admin_edits_a_predicate(admin: Client, base: str, memory: Memory) -> None:
    response = admin.post(f"{base}/registry/works_at/edit", _definition(single_valued="on"))

    assert response["Location"] == f"{base}/registry/works_at/"
    works_at = Predicate.objects.get(name="works_at")
    assert (works_at.category, works_at.single_valued, works_at.ranking_weight) == (
        "work",
        True,
        1.5,
    )
    assert AuditEvent.objects.get(action="predicate_update").undo is not None


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ({"category": "9 lives!"}, "a category is letters, digits, spaces or _"),
        ({"ranking_weight": "0"}, "greater than or equal to 0.01"),
        ({"kind": "feeling"}, "Select a valid choice"),
        ({"single_valued": "on", "is_aggregate": "on"}, "cannot be both"),
        ({"subject_types": ["alien"]}, "Select a valid choice"),
        ({"inverse": "bad]]"}, "inverse"),
    ],
)
def test_bad_edits_show_form_errors_and_change_nothing(
    admin: Client, base: str, memory: Memory, overrides: dict[str, Any], error: str
) -> None:
    before = Predicate.objects.get(name="works_at").category

    response = admin.post(f"{base}/registry/works_at/edit", _definition(**overrides))

    assert response.status_code == 400
    assert error in page(response)
    assert Predicate.objects.get(name="works_at").category == before
    assert not AuditEvent.objects.exists()


def test_predicate_page_lists_its_facts(viewer: Client, base: str, memory: Memory) -> None:
    html = page(viewer.get(f"{base}/registry/knows/"))

    assert 'id="predicate-facts"' in html and "Alex" in html and "Sam" in html


def test_unknown_predicate_is_404(viewer: Client, base: str) -> None:
    assert viewer.get(f"{base}/registry/no_such_thing/").status_code == 404


def test_admin_unregisters_and_the_audit_log_can_undo_it(
    admin: Client, base: str, memory: Memory
) -> None:
    admin.post(f"{base}/registry/knows/unregister")
    assert Predicate.objects.get(name="knows").status == PredicateStatus.OBSERVED

    event = AuditEvent.objects.get(action="predicate_unregister")
    admin.post(f"{base}/audit/{event.pk}/undo")

    assert Predicate.objects.get(name="knows").status == PredicateStatus.REGISTERED


def test_export_contains_every_registered_predicate_with_fields_and_aliases(
    admin: Client, base: str, memory: Memory
) -> None:
    response = admin.get(f"{base}/registry/export.json")

    assert response["Content-Disposition"] == 'attachment; filename="acme-test-registry.json"'
    data = json.loads(response.content)
    assert data["format"] == "memory-desk-registry" and data["version"] == 1
    by_name = {p["name"]: p for p in data["predicates"]}
    assert "works_for" not in by_name
    assert by_name["works_at"]["kind"] == "relation"
    assert "employed_by" in by_name["works_at"]["aliases"]
    assert set(by_name["current_title"]) >= {
        "description",
        "kind",
        "single_valued",
        "is_aggregate",
        "ranking_weight",
        "default_validity_days",
        "aliases",
    }
    assert by_name["current_title"]["single_valued"] is True


def test_export_then_import_elsewhere_round_trips(
    admin: Client, base: str, memory: Memory, access: ContextAccess
) -> None:
    predicate_register(access=access, name="favourite_colour", kind="attribute", category="misc")
    exported = json.loads(admin.get(f"{base}/registry/export.json").content)
    Predicate.objects.filter(name="favourite_colour").delete()
    PredicateAlias.objects.filter(alias="employed_by").delete()

    response = admin.post(f"{base}/registry/import", {"file": _upload(exported)})

    assert response.status_code == 302
    assert Predicate.objects.get(name="favourite_colour").category == "misc"
    assert "employed_by" in _aliases("works_at")
    report = {
        r["name"]: r["outcome"] for r in admin.get(f"{base}/registry/").context["import_report"]
    }
    assert report["favourite_colour"] == "created"
    assert report["works_at"] == "updated"
    assert report["knows"] == "unchanged"


def test_import_updates_fields_and_promotes_drift(admin: Client, base: str, memory: Memory) -> None:
    file = {
        "predicates": [
            {"name": "knows", "description": "Acquainted", "ranking_weight": 2},
            {"name": "worksFor", "kind": "relation", "category": "work"},
        ]
    }

    admin.post(f"{base}/registry/import", {"file": _upload(file)})

    assert Predicate.objects.get(name="knows").description == "Acquainted"
    assert Predicate.objects.get(name="works_for").status == PredicateStatus.REGISTERED
    report = admin.get(f"{base}/registry/").context["import_report"]
    assert report == [
        {"name": "knows", "outcome": "updated", "detail": "description, ranking_weight"},
        {"name": "works_for", "outcome": "promoted", "detail": ""},
    ]
    assert admin.get(f"{base}/registry/").context["import_report"] is None  # shown once


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"{not json", "the file is not JSON"),
        (b"\xff\xfe\x00", "not UTF-8"),
        (b"", "The submitted file is empty"),
        (json.dumps({"predicates": "nope"}).encode(), "predicates: Input should be a valid list"),
        (json.dumps({"format": "other", "predicates": []}).encode(), "format"),
        (json.dumps([{"name": "x_y", "colour": "red"}]).encode(), "Extra inputs are not permitted"),
        (json.dumps([{"name": "x_y", "single_valued": "yes"}]).encode(), "single_valued"),
        (json.dumps([{"name": "a_b"}, {"name": "aB"}]).encode(), "are the same predicate"),
        (json.dumps([{"name": "a]b"}]).encode(), "a]b"),
        (json.dumps(42).encode(), "expected a JSON object with a"),
    ],
)
def test_invalid_registry_files_are_refused_with_a_clear_message(
    admin: Client, base: str, memory: Memory, raw: bytes, error: str
) -> None:
    before = Predicate.objects.count()

    response = admin.post(f"{base}/registry/import", {"file": _upload(raw)})

    assert response.status_code == 400
    assert error in page(response)
    assert Predicate.objects.count() == before
    assert not AuditEvent.objects.exists()


def test_an_import_with_any_bad_predicate_imports_nothing(
    admin: Client, base: str, memory: Memory
) -> None:
    file = [
        {"name": "brand_new", "kind": "attribute"},
        {"name": "knows", "ranking_weight": 50},
        {"name": "also_new", "aliases": ["knows"]},
    ]

    response = admin.post(f"{base}/registry/import", {"file": _upload(file)})

    html = page(response)
    assert response.status_code == 400
    assert "Nothing was imported" in html
    outcomes = {r["name"]: r for r in response.context["import_report"]}
    assert outcomes["brand_new"]["outcome"] == "created"
    assert outcomes["knows"]["outcome"] == "error"
    assert "ranking_weight" in outcomes["knows"]["detail"]
    assert outcomes["also_new"]["outcome"] == "error"
    assert not Predicate.objects.filter(name__in=["brand_new", "also_new"]).exists()
    assert Predicate.objects.get(name="knows").ranking_weight != 50
    assert not AuditEvent.objects.exists()


def test_registry_page_query_count_does_not_grow(
    access: ContextAccess, viewer: Client, base: str, memory: Memory, django_assert_num_queries: Any
) -> None:
    for extra in (0, 8):
        for i in range(extra):
            predicate_register(
                access=access, name=f"extra_{i}", category=f"cat_{i}", aliases=[f"other_{i}"]
            )
        # session, user, context, membership, contexts (switcher); categories;
        # predicates; their aliases; their visible use (the usage log); facts waiting for
        # review (navigation)
        with django_assert_num_queries(10):
            response = viewer.get(f"{base}/registry/")
        assert len(response.context["predicates"]) == 44 + extra


def test_an_alias_added_in_place_says_so_with_an_undo(
    curator: Client, base: str, memory: Memory
) -> None:
    response = curator.post(
        f"{base}/registry/works_at/aliases", {"alias": "staffed_at"}, HTTP_HX_REQUEST="true"
    )
    html = page(response)
    event = AuditEvent.objects.get(action="predicate_alias_add")
    assert 'id="flash"' in html and 'hx-swap-oob="true"' in html
    assert "staffed_at is now an alias of works_at." in html
    assert f"/audit/{event.pk}/undo" in html
    curator.post(f"{base}/audit/{event.pk}/undo")
    assert "staffed_at" not in _aliases("works_at")


def test_unregistering_a_predicate_offers_undo(admin: Client, base: str, memory: Memory) -> None:
    html = page(admin.post(f"{base}/registry/knows/unregister", follow=True))
    event = AuditEvent.objects.filter(action__contains="unregister").latest("pk")
    assert f"/audit/{event.pk}/undo" in html


def _inverse_alias(access: ContextAccess) -> PredicateAlias:
    works_at = Predicate.objects.get(context=access.context, name="works_at")
    PredicateAlias.objects.filter(context=access.context, alias="has_staff").delete()
    return PredicateAlias.objects.create(
        context=access.context, predicate=works_at, alias="has_staff", inverse=True
    )


def test_the_registry_and_the_predicate_page_mark_inverse_aliases(
    access: ContextAccess, viewer: Client, base: str
) -> None:
    _inverse_alias(access)

    registry = page(viewer.get(f"{base}/registry/"))
    detail = page(viewer.get(f"{base}/registry/works_at/"))

    assert '<code>has_staff</code> <span class="inverse-mark"' in registry
    assert '<code>has_staff</code> <span class="inverse-mark"' in detail
    assert "read backwards" in detail and "subject and object swapped" in detail


def test_a_curator_is_told_that_editing_a_predicate_needs_an_admin(
    curator: Client, admin: Client, base: str
) -> None:
    as_curator = page(curator.get(f"{base}/registry/works_at/"))
    as_admin = page(admin.get(f"{base}/registry/works_at/"))

    assert "needs the <strong>admin</strong> role in this context; you are a curator" in as_curator
    assert "you may add and remove its aliases" in as_curator
    assert 'id="predicate-edit"' not in as_curator
    assert 'id="predicate-edit-needs-admin"' not in as_admin and 'id="predicate-edit"' in as_admin
    listing = page(curator.get(f"{base}/registry/"))
    assert "need the <strong>admin</strong> role; you are a curator and may add" in listing
