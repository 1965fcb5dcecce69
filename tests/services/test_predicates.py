"""The predicate registry: standard library, canonicalization, edits, drift and the prompt."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction

from memory.domain.access import ContextAccess
from memory.domain.predicate_library import STANDARD_PREDICATES
from memory.kernel.errors import Conflict, NotFound, PermissionDenied, ValidationFailed
from memory.kernel.scopes import Grants
from memory.models import (
    AuditEvent,
    Context,
    Entity,
    Fact,
    Predicate,
    PredicateAlias,
    PredicateMode,
    PredicateStatus,
    Role,
)
from memory.selectors.predicates import (
    predicate_canonicalize,
    predicate_get,
    predicate_has,
    predicate_list,
    registry_index_for_write,
    registry_index_load,
    registry_render_for_prompt,
)
from memory.services.registry.predicates import (
    predicate_alias_add,
    predicate_register,
    predicate_unregister,
    predicate_update,
    registry_install_standard,
)
from memory.services.registry.resolution import (
    UnknownPredicate,
    predicate_observe,
    predicate_record_refused,
    predicate_resolve_for_write,
)

MakeContext = Callable[..., Context]


def _access_as(context: Context, role: Role) -> ContextAccess:
    return ContextAccess(context=context, user=None, role=role, grants=Grants.everything())


def _fact_on(context: Context, predicate: Predicate) -> Fact:
    # Set up with the ORM: these tests are about the registry, not about fact writes.
    subject = Entity.objects.create(
        context=context, scope="org", name="Dana", type="person", normalized_key="dana"
    )
    return Fact.objects.create(
        context=context,
        scope="org",
        subject=subject,
        predicate=predicate,
        raw_predicate=predicate.name,
        kind="attribute",
        value="x",
        value_text="x",
    )


# --- the standard library -------------------------------------------------------------


def test_new_context_has_the_44_standard_predicates_by_category(context: Context) -> None:
    registered = predicate_list(context=context, status=PredicateStatus.REGISTERED)
    assert registered.count() == 44
    assert Counter(p.category for p in registered) == {
        "identity": 7,
        "organizational": 6,
        "task": 4,
        "decision": 1,
        "communication": 8,
        "observation": 5,
        "event": 2,
        "priority": 2,
        "document": 6,
        "social": 3,
    }


def test_standard_predicates_carry_the_library_flags(context: Context) -> None:
    by_name = {p.name: p for p in predicate_list(context=context)}
    title = by_name["current_title"]
    assert (title.single_valued, title.lifecycle, title.default_importance) == (
        True,
        "stateful",
        1.0,
    )
    assert by_name["interaction_count"].is_aggregate
    assert by_name["committed_to"].exclude_from_prompt
    assert by_name["committed_to"].default_validity_days == 90
    assert by_name["profile"].kind == "narrative"
    assert by_name["works_at"].object_types == ["organisation"]
    assert by_name["has_document"].object_types == []
    assert [p.name for p in by_name.values() if p.single_valued] == [
        "current_role",
        "current_title",
    ]
    assert all(p.description and p.example for p in by_name.values())


def test_standard_aliases_are_installed_normalized(context: Context) -> None:
    inverse = dict(
        PredicateAlias.objects.filter(context=context, inverse=True).values_list(
            "alias", "predicate__name"
        )
    )
    # The library's inverse names start as inverse aliases, unless registered themselves.
    assert inverse["employs"] == "works_at" and inverse["parent_of"] == "subsidiary_of"
    assert "manages" not in inverse and "merged_with" not in inverse
    aliases = dict(
        PredicateAlias.objects.filter(context=context, inverse=False).values_list(
            "alias", "predicate__name"
        )
    )
    assert aliases["employed_by"] == "works_at"
    assert aliases["employee_of"] == "works_at"
    assert aliases["agreed_to"] == "decision_made"
    # "worksAt" normalizes onto the name itself: covered by normalization, not an alias row.
    assert "works_at" not in aliases
    expected = {a for p in STANDARD_PREDICATES for a in p.aliases} - {"worksAt"}
    assert set(aliases) == expected


def test_install_standard_is_idempotent(context: Context) -> None:
    aliases_before = PredicateAlias.objects.filter(context=context).count()
    assert registry_install_standard(context=context) == 0
    assert Predicate.objects.filter(context=context).count() == 44
    assert PredicateAlias.objects.filter(context=context).count() == aliases_before


def test_install_standard_fills_in_only_what_is_missing(context: Context) -> None:
    Predicate.objects.filter(context=context, name__in=["knows", "works_at"]).delete()
    assert registry_install_standard(context=context) == 2
    assert predicate_canonicalize(context=context, name="employed_by").canonical == "works_at"


# --- canonicalization -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "via"),
    [
        ("works_at", "exact"),
        ("worksAt", "normalized"),
        ("works-at", "normalized"),
        ("Works At", "normalized"),
        ("WORKS_AT", "normalized"),
        ("employed_by", "alias"),
        ("Employed By", "alias"),
        ("employeeOf", "alias"),
        ("wroks_at", "fuzzy"),
        ("work_at", "fuzzy"),
    ],
)
def test_canonicalize_resolves_every_form_of_works_at(context: Context, raw: str, via: str) -> None:
    result = predicate_canonicalize(context=context, name=raw)
    assert (result.input, result.canonical, result.registered, result.via) == (
        raw,
        "works_at",
        True,
        via,
    )
    assert result.predicate is not None and result.predicate.name == "works_at"


@pytest.mark.parametrize(
    ("typo", "expected"),
    [("curent_title", "current_title"), ("reprots_to", "reports_to")],
)
def test_canonicalize_fixes_typos_in_permissive_mode(
    context: Context, typo: str, expected: str
) -> None:
    result = predicate_canonicalize(context=context, name=typo)
    assert (result.canonical, result.via) == (expected, "fuzzy")


@pytest.mark.parametrize(
    ("raw", "canonical", "via"),
    [
        ("works_with", "works_with", "exact"),
        ("knows", "knows", "exact"),
        ("colleague_of", "colleague_of", "exact"),
        ("is_member_on", "is_member_on", "none"),
        ("manager", "manager", "none"),
        ("owned", "owned", "none"),
    ],
)
def test_canonicalize_never_crosses_concepts(
    context: Context, raw: str, canonical: str, via: str
) -> None:
    result = predicate_canonicalize(context=context, name=raw)
    assert (result.canonical, result.via) == (canonical, via)


def test_canonicalize_does_not_guess_in_strict_mode(make_context: MakeContext) -> None:
    strict = make_context("strict-ctx", predicate_mode="strict")
    result = predicate_canonicalize(context=strict, name="wroks_at")
    assert (result.canonical, result.registered, result.via) == ("wroks_at", False, "none")
    assert predicate_canonicalize(context=strict, name="worksAt").via == "normalized"


def test_canonicalize_unknown_gives_normalized_form(context: Context) -> None:
    result = predicate_canonicalize(context=context, name="Likes Pizza")
    assert (result.canonical, result.registered, result.via, result.predicate) == (
        "likes_pizza",
        False,
        "none",
        None,
    )


def test_canonicalize_refuses_hostile_text(context: Context) -> None:
    with pytest.raises(ValidationFailed) as raised:
        predicate_canonicalize(context=context, name="KNOWS]->() DETACH DELETE n //")
    assert raised.value.code == "invalid_predicate"


def test_canonicalize_with_a_loaded_index_runs_no_queries(
    context: Context, django_assert_num_queries: Any
) -> None:
    # Queries: the context's predicates; their aliases.
    with django_assert_num_queries(2):
        index = registry_index_load(context=context)
    with django_assert_num_queries(0):
        for raw in ["worksAt", "employed_by", "wroks_at", "brand_new"]:
            predicate_canonicalize(context=context, name=raw, index=index)


def test_predicate_get_accepts_any_form(context: Context) -> None:
    for raw in ["works_at", "worksAt", "WORKS-AT", "employed_by"]:
        assert predicate_get(context=context, name=raw).name == "works_at"


def test_predicate_get_raises_not_found_for_an_unknown_name(context: Context) -> None:
    with pytest.raises(NotFound):
        predicate_get(context=context, name="likes_pizza")
    with pytest.raises(NotFound):
        predicate_get(context=context, name="wroks_at")  # no fuzzy guessing for lookups


def test_predicate_has_is_true_only_for_registered(context: Context) -> None:
    predicate_observe(context=context, name="likes_pizza")
    assert predicate_has(context=context, name="Works At")
    assert predicate_has(context=context, name="employee_of")
    assert not predicate_has(context=context, name="likes_pizza")
    assert not predicate_has(context=context, name="nothing_here")
    assert not predicate_has(context=context, name="KNOWS]->() DETACH DELETE n //")


def test_predicate_list_filters_and_prefetches_aliases(
    context: Context, django_assert_num_queries: Any
) -> None:
    # Queries: predicates; their aliases.
    with django_assert_num_queries(2):
        identity = list(predicate_list(context=context, category="identity"))
        aliases = {p.name: [a.alias for a in p.alias_set.all()] for p in identity}
    assert len(identity) == 7
    assert aliases["works_at"] == ["employed_by", "employee_of", "employs"]
    predicate_observe(context=context, name="likes_pizza")
    observed = predicate_list(context=context, status=PredicateStatus.OBSERVED)
    assert [p.name for p in observed] == ["likes_pizza"]


# --- writes: resolve, drift, strict mode ----------------------------------------------


def test_resolve_for_write_returns_the_registered_predicate(context: Context) -> None:
    resolved = predicate_resolve_for_write(context=context, raw="worksAt")
    assert (resolved.predicate.name, resolved.canonical, resolved.via, resolved.registered) == (
        "works_at",
        "works_at",
        "normalized",
        True,
    )


def test_a_write_reuses_its_registry_load_while_the_registry_is_unchanged(
    context: Context, django_assert_num_queries: Any
) -> None:
    first = registry_index_for_write(context=context)
    # Drift stamps (what every write of an observed predicate records) change nothing.
    predicate_resolve_for_write(context=context, raw="likesPizza")
    moved = registry_index_for_write(context=context)
    assert "likes_pizza" in moved.by_name and moved is not first
    predicate_resolve_for_write(context=context, raw="likesPizza")
    with django_assert_num_queries(1):  # the digest only
        assert registry_index_for_write(context=context) is moved


@pytest.mark.parametrize(
    "change",
    [
        # Plain UPDATEs, as curation's bulk paths write, leave updated_at where it was.
        lambda c: Predicate.objects.filter(context=c, name="works_at").update(
            status=PredicateStatus.REJECTED
        ),
        lambda c: Predicate.objects.filter(context=c, name="works_at").update(single_valued=True),
        lambda c: Predicate.objects.filter(context=c, name="works_at").update(example="x"),
        lambda c: PredicateAlias.objects.create(
            context=c, predicate=Predicate.objects.get(context=c, name="works_at"), alias="toils_at"
        ),
        lambda c: PredicateAlias.objects.filter(context=c, alias="employed_by").update(
            inverse=True
        ),
        lambda c: PredicateAlias.objects.filter(context=c, alias="employed_by").delete(),
        lambda c: Predicate.objects.filter(context=c, name="likes_pizza").delete(),
    ],
)
def test_a_write_sees_every_change_to_the_registry(
    context: Context, change: Callable[[Context], object]
) -> None:
    predicate_observe(context=context, name="likes_pizza")
    before = registry_index_for_write(context=context)
    change(context)
    after = registry_index_for_write(context=context)
    fresh = registry_index_load(context=context)
    assert after is not before
    assert after.alias_to_name == fresh.alias_to_name
    assert after.inverse_aliases == fresh.inverse_aliases
    assert {n: (p.status, p.single_valued, p.example) for n, p in after.by_name.items()} == {
        n: (p.status, p.single_valued, p.example) for n, p in fresh.by_name.items()
    }


def test_a_reused_load_answers_each_form_as_a_fresh_load_would(context: Context) -> None:
    index = registry_index_for_write(context=context)
    typo = predicate_canonicalize(context=context, name="wroks_at", index=index)
    assert (typo.canonical, typo.via) == ("works_at", "fuzzy")
    assert predicate_canonicalize(context=context, name="wroks_at", index=index) is typo
    # The context's mode is part of the answer: a strict context guesses no typos.
    context.predicate_mode = PredicateMode.STRICT
    strict = predicate_canonicalize(context=context, name="wroks_at", index=index)
    assert (strict.canonical, strict.via) == ("wroks_at", "none")
    assert strict == predicate_canonicalize(context=context, name="wroks_at")
    with pytest.raises(ValidationFailed):  # hostile text is refused before any answer
        predicate_canonicalize(context=context, name="a]->(b)", index=index)


def test_permissive_mode_creates_an_observed_predicate(context: Context) -> None:
    resolved = predicate_resolve_for_write(context=context, raw="likesPizza")
    assert (resolved.canonical, resolved.via, resolved.registered) == (
        "likes_pizza",
        "none",
        False,
    )
    stored = Predicate.objects.get(context=context, name="likes_pizza")
    assert stored.status == PredicateStatus.OBSERVED
    assert stored.first_seen_at is not None and stored.last_seen_at == stored.first_seen_at


def test_observing_again_reuses_the_row_and_moves_last_seen(context: Context) -> None:
    first = predicate_observe(context=context, name="likes_pizza")
    again = predicate_observe(context=context, name="Likes-Pizza")
    assert again.pk == first.pk
    assert first.last_seen_at is not None and again.last_seen_at is not None
    assert again.first_seen_at == first.first_seen_at
    assert again.last_seen_at >= first.last_seen_at
    assert Predicate.objects.filter(context=context, name="likes_pizza").count() == 1


def test_observing_an_alias_returns_its_predicate(context: Context) -> None:
    assert predicate_observe(context=context, name="employed_by").name == "works_at"
    assert not Predicate.objects.filter(context=context, name="employed_by").exists()


def test_strict_mode_refuses_unknown_predicates(make_context: MakeContext) -> None:
    strict = make_context("strict-ctx", predicate_mode="strict")
    with pytest.raises(UnknownPredicate) as raised:
        predicate_resolve_for_write(context=strict, raw="likesPizza")
    assert raised.value.code == "unknown_predicate"
    assert raised.value.status == 400
    assert raised.value.canonical == "likes_pizza"
    assert not Predicate.objects.filter(context=strict, name="likes_pizza").exists()


def test_strict_mode_refusal_is_still_recorded_as_drift(make_context: MakeContext) -> None:
    strict = make_context("strict-ctx", predicate_mode="strict")
    with pytest.raises(UnknownPredicate):
        predicate_resolve_for_write(context=strict, raw="wroks_at")
    predicate_record_refused(context=strict, raw="wroks_at")
    drift = Predicate.objects.get(context=strict, name="wroks_at")
    assert drift.status == PredicateStatus.OBSERVED
    # Recorded drift is still refused on the next strict write.
    with pytest.raises(UnknownPredicate):
        predicate_resolve_for_write(context=strict, raw="wroks_at")


def test_strict_mode_accepts_registered_names_and_aliases(make_context: MakeContext) -> None:
    strict = make_context("strict-ctx", predicate_mode="strict")
    assert predicate_resolve_for_write(context=strict, raw="Employed By").via == "alias"


def test_record_refused_ignores_hostile_text(context: Context) -> None:
    count = Predicate.objects.filter(context=context).count()
    predicate_record_refused(context=context, raw="KNOWS]->() DETACH DELETE n //")
    assert Predicate.objects.filter(context=context).count() == count


def test_rejected_predicate_is_refused_in_both_modes(make_context: MakeContext) -> None:
    for mode in ["permissive", "strict"]:
        ctx = make_context(f"rejected-{mode}", predicate_mode=mode)
        Predicate.objects.create(context=ctx, name="likes_pizza", status="rejected")
        with pytest.raises(ValidationFailed) as raised:
            predicate_resolve_for_write(context=ctx, raw="likesPizza")
        assert raised.value.code == "rejected_predicate"


def test_hostile_predicate_text_is_refused_on_write(context: Context) -> None:
    count = Predicate.objects.filter(context=context).count()
    for raw in ["KNOWS]->() DETACH DELETE n //", "x'); DROP TABLE memory_fact; --", ""]:
        with pytest.raises(ValidationFailed) as raised:
            predicate_resolve_for_write(context=context, raw=raw)
        assert raised.value.code == "invalid_predicate"
    assert Predicate.objects.filter(context=context).count() == count


def test_observed_typo_stays_drift_rather_than_snapping(context: Context) -> None:
    # Once a form is drift with its own facts, only a curator's resolution moves it.
    predicate_observe(context=context, name="wroks_at")
    result = predicate_canonicalize(context=context, name="wroks_at")
    assert (result.canonical, result.via, result.registered) == ("wroks_at", "none", False)


# --- registry edits -------------------------------------------------------------------


def test_register_canonicalizes_the_name_and_audits(access: ContextAccess) -> None:
    predicate = predicate_register(
        access=access,
        name="mentorsOf",
        description="the subject mentors the object",
        category="social",
        subject_types=["person"],
        object_types=["person"],
        default_importance=0.6,
        aliases=["coaches", "Mentors Of"],
    )
    assert predicate.name == "mentors_of"
    assert predicate.status == PredicateStatus.REGISTERED
    assert predicate_canonicalize(context=access.context, name="coaches").canonical == (
        "mentors_of"
    )
    event = AuditEvent.objects.get(context=access.context, action="predicate_register")
    assert event.target_id == "mentors_of"
    assert event.before is None
    assert event.after is not None
    assert event.after["aliases"] == ["coaches"]
    assert event.undo == {"op": "predicate_unregister", "name": "mentors_of"}
    assert event.actor_label == "system"


def test_register_refuses_an_existing_registered_name(access: ContextAccess) -> None:
    with pytest.raises(Conflict) as raised:
        predicate_register(access=access, name="Works At")
    assert raised.value.code == "predicate_collision"


def test_register_refuses_a_name_that_is_an_alias(access: ContextAccess) -> None:
    with pytest.raises(Conflict) as raised:
        predicate_register(access=access, name="employed_by")
    assert raised.value.code == "predicate_collision"
    assert "works_at" in raised.value.message


def test_register_refuses_an_alias_that_is_taken(access: ContextAccess) -> None:
    for taken in ["employed_by", "knows"]:
        with pytest.raises(Conflict) as raised:
            predicate_register(access=access, name="mentors", aliases=[taken])
        assert raised.value.code == "predicate_collision"
    assert not Predicate.objects.filter(context=access.context, name="mentors").exists()


def test_register_refuses_single_valued_with_aggregate(access: ContextAccess) -> None:
    with pytest.raises(ValidationFailed) as raised:
        predicate_register(access=access, name="score", single_valued=True, is_aggregate=True)
    assert raised.value.code == "invalid_flags"


def test_database_refuses_single_valued_with_aggregate(context: Context) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        Predicate.objects.create(
            context=context, name="score", single_valued=True, is_aggregate=True
        )


@pytest.mark.parametrize(
    "fields",
    [
        {"kind": "verb"},
        {"lifecycle": "forever"},
        {"default_importance": 1.5},
        {"ranking_weight": 0},
        {"subject_types": ["organization"]},
        {"default_validity_days": 0},
        {"single_valued": "yes"},
        {"category": "Not A Slug!"},
        {"inverse": "x]->()"},
        {"status": "registered"},
    ],
)
def test_register_refuses_bad_fields(access: ContextAccess, fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationFailed):
        predicate_register(access=access, name="mentors", **fields)


def test_register_refuses_hostile_names(access: ContextAccess) -> None:
    with pytest.raises(ValidationFailed) as raised:
        predicate_register(access=access, name="KNOWS]->() DETACH DELETE n //")
    assert raised.value.code == "invalid_predicate"


def test_register_promotes_an_observed_predicate_and_keeps_its_facts(
    access: ContextAccess,
) -> None:
    observed = predicate_observe(context=access.context, name="likes_pizza")
    fact = _fact_on(access.context, observed)
    promoted = predicate_register(access=access, name="likesPizza", category="social")
    assert promoted.pk == observed.pk
    assert promoted.status == PredicateStatus.REGISTERED
    fact.refresh_from_db()
    assert fact.predicate_id == promoted.pk
    event = AuditEvent.objects.get(context=access.context, action="predicate_register")
    assert event.before is not None and event.undo is not None
    assert event.before["status"] == "observed"
    assert event.undo["op"] == "predicate_restore"


def test_curator_may_promote_drift_but_not_register_new_names(context: Context) -> None:
    curator = _access_as(context, Role.CURATOR)
    predicate_observe(context=context, name="likes_pizza")
    assert predicate_register(access=curator, name="likes_pizza").status == "registered"
    with pytest.raises(PermissionDenied):
        predicate_register(access=curator, name="brand_new")


def test_viewer_cannot_edit_the_registry(context: Context) -> None:
    viewer = _access_as(context, Role.VIEWER)
    works_at = predicate_get(context=context, name="works_at")
    with pytest.raises(PermissionDenied):
        predicate_register(access=viewer, name="brand_new")
    with pytest.raises(PermissionDenied):
        predicate_update(access=viewer, predicate=works_at, description="x")
    with pytest.raises(PermissionDenied):
        predicate_unregister(access=viewer, predicate=works_at)
    with pytest.raises(PermissionDenied):
        predicate_alias_add(access=viewer, predicate=works_at, alias="staff_at")


def test_update_changes_fields_and_audits_before_and_after(access: ContextAccess) -> None:
    works_at = predicate_get(context=access.context, name="works_at")
    updated = predicate_update(
        access=access, predicate=works_at, description="employed by", default_importance=0.9
    )
    assert (updated.description, updated.default_importance) == ("employed by", 0.9)
    event = AuditEvent.objects.get(context=access.context, action="predicate_update")
    assert event.before == {
        "default_importance": 1.0,
        "description": works_at.description,
    }
    assert event.after == {"default_importance": 0.9, "description": "employed by"}
    assert event.undo is not None
    assert event.undo["fields"] == event.before


def test_update_refuses_single_valued_on_an_aggregate(access: ContextAccess) -> None:
    count = predicate_get(context=access.context, name="interaction_count")
    with pytest.raises(ValidationFailed) as raised:
        predicate_update(access=access, predicate=count, single_valued=True)
    assert raised.value.code == "invalid_flags"
    count.refresh_from_db()
    assert not count.single_valued


def test_update_refuses_renaming(access: ContextAccess) -> None:
    works_at = predicate_get(context=access.context, name="works_at")
    with pytest.raises(ValidationFailed) as raised:
        predicate_update(access=access, predicate=works_at, name="employed_at")
    assert raised.value.code == "unknown_field"


def test_unregister_deletes_an_unused_predicate(access: ContextAccess) -> None:
    works_at = predicate_get(context=access.context, name="works_at")
    predicate_unregister(access=access, predicate=works_at)
    assert not Predicate.objects.filter(context=access.context, name="works_at").exists()
    assert not PredicateAlias.objects.filter(context=access.context, alias="employed_by").exists()
    event = AuditEvent.objects.get(context=access.context, action="predicate_unregister")
    assert event.before is not None
    assert event.before["aliases"] == ["employed_by", "employee_of"]
    assert event.after is None


def test_unregister_keeps_a_used_predicate_as_drift(access: ContextAccess) -> None:
    title = predicate_get(context=access.context, name="current_title")
    fact = _fact_on(access.context, title)
    predicate_unregister(access=access, predicate=title)
    title.refresh_from_db()
    fact.refresh_from_db()
    assert title.status == PredicateStatus.OBSERVED
    assert fact.predicate_id == title.pk
    assert not predicate_has(context=access.context, name="current_title")


def test_alias_add_normalizes_and_audits(access: ContextAccess) -> None:
    works_at = predicate_get(context=access.context, name="works_at")
    alias = predicate_alias_add(access=access, predicate=works_at, alias="Staff At")
    assert alias.alias == "staff_at"
    result = predicate_canonicalize(context=access.context, name="staffAt")
    assert (result.canonical, result.via) == ("works_at", "alias")
    event = AuditEvent.objects.get(context=access.context, action="predicate_alias_add")
    assert event.undo == {"op": "predicate_alias_remove", "name": "works_at", "alias": "staff_at"}


def test_curator_may_add_aliases(context: Context) -> None:
    curator = _access_as(context, Role.CURATOR)
    works_at = predicate_get(context=context, name="works_at")
    assert predicate_alias_add(access=curator, predicate=works_at, alias="staff_at").pk


def test_alias_add_is_idempotent_for_the_same_predicate(access: ContextAccess) -> None:
    works_at = predicate_get(context=access.context, name="works_at")
    existing = PredicateAlias.objects.get(context=access.context, alias="employed_by")
    assert predicate_alias_add(access=access, predicate=works_at, alias="employedBy") == existing


@pytest.mark.parametrize(
    ("alias", "collides_with"),
    [("knows", "knows"), ("agreed_to", "decision_made"), ("works_at", "works_at")],
)
def test_alias_add_refuses_collisions_naming_what_collides(
    access: ContextAccess, alias: str, collides_with: str
) -> None:
    works_at = predicate_get(context=access.context, name="works_at")
    with pytest.raises(Conflict) as raised:
        predicate_alias_add(access=access, predicate=works_at, alias=alias)
    assert raised.value.code == "predicate_collision"
    assert collides_with in raised.value.message


def test_alias_add_refuses_an_observed_name_until_drift_is_resolved(
    access: ContextAccess,
) -> None:
    predicate_observe(context=access.context, name="staff_at")
    works_at = predicate_get(context=access.context, name="works_at")
    with pytest.raises(Conflict) as raised:
        predicate_alias_add(access=access, predicate=works_at, alias="staffAt")
    assert raised.value.code == "predicate_exists_as_observed"
    assert "drift" in raised.value.message


def test_alias_add_refuses_hostile_text(access: ContextAccess) -> None:
    works_at = predicate_get(context=access.context, name="works_at")
    with pytest.raises(ValidationFailed) as raised:
        predicate_alias_add(access=access, predicate=works_at, alias="a]->(b)")
    assert raised.value.code == "invalid_predicate"


def test_alias_add_refuses_a_predicate_of_another_context(
    access: ContextAccess, make_context: MakeContext
) -> None:
    other = make_context("other-ctx")
    foreign = predicate_get(context=other, name="works_at")
    with pytest.raises(NotFound):
        predicate_alias_add(access=access, predicate=foreign, alias="staff_at")


# --- the prompt block -----------------------------------------------------------------


def test_render_for_prompt_lists_categories_with_kind_description_and_aliases(
    context: Context,
) -> None:
    text = registry_render_for_prompt(context=context)
    blocks = text.split("\n\n")
    assert [b.splitlines()[0] for b in blocks] == [
        "identity:",
        "organizational:",
        "task:",
        "decision:",
        "communication:",
        "observation:",
        "event:",
        "priority:",
        "document:",
        "social:",
    ]
    identity = blocks[0].splitlines()[1:]
    # Most important first, then by name.
    assert [line.split(" ")[0] for line in identity] == [
        "current_role",
        "current_title",
        "founded",
        "works_at",
        "reports_to",
        "is_member_of",
        "located_in",
    ]
    assert (
        "works_at (relation): the subject is employed by or works for the organisation "
        "[aliases: employed_by, employee_of]"
    ) in identity


def test_render_for_prompt_leaves_out_excluded_predicates(context: Context) -> None:
    text = registry_render_for_prompt(context=context)
    for excluded in ["committed_to", "emailed", "cc_ed", "interaction_count", "has_document"]:
        assert f"\n{excluded} (" not in text
    assert "\nmet_with (relation)" in text


def test_render_for_prompt_leaves_out_drift(context: Context) -> None:
    predicate_observe(context=context, name="likes_pizza")
    assert "likes_pizza" not in registry_render_for_prompt(context=context)


def test_render_for_prompt_caps_each_category(context: Context) -> None:
    text = registry_render_for_prompt(context=context, max_per_category=2)
    for block in text.split("\n\n"):
        assert len(block.splitlines()) <= 3
    assert "works_at" not in text  # fourth in identity


def test_render_for_prompt_filters_by_category_and_subject_type(context: Context) -> None:
    text = registry_render_for_prompt(
        context=context, categories=["organizational", "document"], subject_type="organisation"
    )
    names = [line.split(" ")[0] for line in text.splitlines() if "(" in line]
    # Predicates with no subject hint, or whose hint includes organisations.
    assert names == [
        "acquired",
        "merged_with",
        "subsidiary_of",
        "owns",
        "part_of",
        "profile",
        "meeting_notes",
        "memo",
        "research_note",
    ]


def test_render_for_prompt_is_deterministic_and_cheap(
    context: Context, django_assert_num_queries: Any
) -> None:
    # Queries: registered predicates for the prompt; their aliases.
    with django_assert_num_queries(2):
        first = registry_render_for_prompt(context=context)
    assert registry_render_for_prompt(context=context) == first


def test_registry_is_per_context(access: ContextAccess, make_context: MakeContext) -> None:
    other = make_context("other-ctx")
    predicate_register(access=access, name="mentors")
    assert predicate_has(context=access.context, name="mentors")
    assert not predicate_has(context=other, name="mentors")


@pytest.mark.django_db(transaction=True)
def test_concurrent_observers_of_a_new_form_share_one_row(make_context: MakeContext) -> None:
    ctx = make_context("race-ctx")
    barrier = threading.Barrier(4)
    seen: list[int] = []

    def observe() -> None:
        try:
            barrier.wait()
            seen.append(predicate_observe(context=ctx, name="likes_pizza").pk)
        finally:
            connection.close()

    threads = [threading.Thread(target=observe) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 4 and len(set(seen)) == 1
    assert Predicate.objects.filter(context=ctx, name="likes_pizza").count() == 1
