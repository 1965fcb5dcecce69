from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from memory.domain.access import ContextAccess, system_access
from memory.kernel.errors import ValidationFailed
from memory.models import Conflict, Context, Entity, Fact, FactStatus, Predicate
from memory.selectors.facts import entity_facts_ranked, fact_history, fact_list, fact_rank_score
from memory.services.contexts import context_create
from memory.services.entities.writes import entity_upsert
from memory.services.facts.write import fact_write
from memory.services.registry.resolution import UnknownPredicate


@pytest.fixture
def alex(access: ContextAccess) -> Entity:
    return entity_upsert(access=access, name="Alex", type="person", scope="org/acme").entity


@pytest.fixture
def acme(access: ContextAccess) -> Entity:
    return entity_upsert(access=access, name="Acme", type="organisation", scope="org/acme").entity


def test_variant_predicates_are_stored_under_the_canonical_name(
    access: ContextAccess, alex: Entity, acme: Entity
) -> None:
    result = fact_write(access=access, subject=alex, predicate="worksAt", object=acme)
    assert result.fact.predicate.name == "works_at"
    assert result.fact.raw_predicate == "worksAt"
    assert result.fact.kind == "relation"
    assert result.resolved.via == "normalized"


def test_read_by_any_predicate_form(access: ContextAccess, alex: Entity, acme: Entity) -> None:
    fact_write(access=access, subject=alex, predicate="employed_by", object=acme)
    for form in ("works_at", "worksAt", "WORKS-AT", "employed_by"):
        assert fact_list(access=access, predicate=form).count() == 1


def test_importance_defaults_from_the_registry(
    access: ContextAccess, alex: Entity, acme: Entity
) -> None:
    fact = fact_write(access=access, subject=alex, predicate="works_at", object=acme).fact
    assert (
        fact.importance
        == Predicate.objects.get(context=access.context, name="works_at").default_importance
    )


def test_identical_current_fact_is_reobserved_not_duplicated(
    access: ContextAccess, alex: Entity, acme: Entity
) -> None:
    first = fact_write(
        access=access, subject=alex, predicate="works_at", object=acme, confidence=0.6
    )
    again = fact_write(
        access=access, subject=alex, predicate="worksAt", object=acme, confidence=0.9
    )
    assert again.outcome == "reobserved"
    assert again.fact.pk == first.fact.pk
    assert again.fact.observed_count == 2
    assert again.fact.confidence == 0.9
    assert Fact.objects.count() == 1


def test_single_valued_value_supersedes_the_prior(access: ContextAccess, alex: Entity) -> None:
    old = fact_write(
        access=access, subject=alex, predicate="current_title", value="Engineer", confidence=0.8
    ).fact
    new = fact_write(
        access=access, subject=alex, predicate="current_title", value="CTO", confidence=0.9
    )
    assert new.outcome == "superseded"
    old.refresh_from_db()
    assert old.status == FactStatus.SUPERSEDED
    assert new.fact.supersedes_id == old.pk
    assert [f.value for f in fact_list(access=access, subject=alex)] == ["CTO"]


@pytest.mark.parametrize(
    ("old_conf", "new_conf"),
    [(0.5, 0.69), (0.95, 0.8)],
    ids=["under-floor", "under-prior"],
)
def test_weak_single_value_is_a_conflict_not_a_supersession(
    access: ContextAccess, alex: Entity, old_conf: float, new_conf: float
) -> None:
    old = fact_write(
        access=access,
        subject=alex,
        predicate="current_title",
        value="Engineer",
        confidence=old_conf,
    ).fact
    result = fact_write(
        access=access, subject=alex, predicate="current_title", value="CTO", confidence=new_conf
    )
    assert result.outcome == "conflict"
    assert result.fact.status == FactStatus.CONTESTED
    old.refresh_from_db()
    assert old.status == FactStatus.CURRENT
    conflict = Conflict.objects.get()
    assert (conflict.current_fact_id, conflict.contested_fact_id) == (old.pk, result.fact.pk)


def test_supersession_never_crosses_scopes(access: ContextAccess, alex: Entity) -> None:
    fact_write(
        access=access, subject=alex, predicate="current_title", value="Engineer", scope="org/acme"
    )
    fact_write(
        access=access,
        subject=alex,
        predicate="current_title",
        value="Mentor",
        scope="org/acme/user/alex",
    )
    assert Fact.objects.filter(status=FactStatus.CURRENT).count() == 2


def test_auto_supersede_off_records_conflicts(make_context) -> None:  # type: ignore[no-untyped-def]
    context = make_context(auto_supersede=False)
    access = system_access(context)
    person = entity_upsert(access=access, name="Alex", type="person", scope="s").entity
    fact_write(access=access, subject=person, predicate="current_title", value="A")
    assert (
        fact_write(access=access, subject=person, predicate="current_title", value="B").outcome
        == "conflict"
    )


def test_aggregate_is_updated_in_place(access: ContextAccess, alex: Entity) -> None:
    first = fact_write(access=access, subject=alex, predicate="interaction_count", value=3).fact
    second = fact_write(access=access, subject=alex, predicate="interaction_count", value=4)
    assert second.outcome == "updated" and second.fact.pk == first.pk
    assert Fact.objects.get().value == 4


def test_as_of_returns_what_was_current_then(access: ContextAccess, alex: Entity) -> None:
    fact_write(access=access, subject=alex, predicate="current_title", value="Engineer")
    between = timezone.now()
    fact_write(access=access, subject=alex, predicate="current_title", value="CTO")
    assert [f.value for f in fact_list(access=access, subject=alex, as_of=between)] == ["Engineer"]
    assert [f.value for f in fact_list(access=access, subject=alex)] == ["CTO"]
    before_all = between - timedelta(days=1)
    assert fact_list(access=access, subject=alex, as_of=before_all).count() == 0


def test_history_lists_the_supersession_chain(access: ContextAccess, alex: Entity) -> None:
    for title in ("Engineer", "Lead", "CTO"):
        fact_write(access=access, subject=alex, predicate="current_title", value=title)
    history = fact_history(access=access, subject=alex)
    assert [f.value for f in history] == ["Engineer", "Lead", "CTO"]
    assert [f.status for f in history] == ["superseded", "superseded", "current"]
    assert history[2].supersedes_id == history[1].pk and history[1].supersedes_id == history[0].pk


def test_ranking_formula(access: ContextAccess, alex: Entity, acme: Entity) -> None:
    fact = fact_write(
        access=access,
        subject=alex,
        predicate="works_at",
        object=acme,
        confidence=0.8,
        importance=0.5,
    ).fact
    later = fact.last_seen_at + timedelta(days=90)
    # 0.8 × 0.5^(90/90) × 1.5 (works_at weight) × (0.3 + 1.4 × 0.5)
    assert fact_rank_score(fact, now=later) == pytest.approx(0.8 * 0.5 * 1.5 * 1.0)


def test_ranked_facts_drop_low_confidence_and_order_by_score(
    access: ContextAccess, alex: Entity, acme: Entity
) -> None:
    fact_write(access=access, subject=alex, predicate="works_at", object=acme, confidence=0.9)
    fact_write(access=access, subject=alex, predicate="mentioned", object=acme, confidence=0.9)
    fact_write(access=access, subject=alex, predicate="knows", object=acme, confidence=0.1)
    ranked = entity_facts_ranked(access=access, entity=alex)
    assert [r.fact.predicate.name for r in ranked] == ["works_at", "mentioned"]


def test_strict_mode_refuses_unknown_predicates_and_records_drift(make_context) -> None:  # type: ignore[no-untyped-def]
    context = make_context(predicate_mode="strict")
    access = system_access(context)
    alex = entity_upsert(access=access, name="Alex", type="person", scope="s").entity
    with pytest.raises(UnknownPredicate):
        fact_write(access=access, subject=alex, predicate="likes_pizza", value="yes")
    assert Fact.objects.count() == 0
    assert Predicate.objects.get(context=context, name="likes_pizza").status == "observed"


def test_permissive_mode_records_new_predicates_as_observed(
    access: ContextAccess, alex: Entity
) -> None:
    result = fact_write(access=access, subject=alex, predicate="favouriteColour", value="green")
    assert result.resolved.registered is False
    assert result.fact.predicate.name == "favourite_colour"
    assert result.fact.predicate.status == "observed"


def test_hostile_predicate_is_refused_and_nothing_written(
    access: ContextAccess, alex: Entity, acme: Entity
) -> None:
    with pytest.raises(ValidationFailed):
        fact_write(
            access=access, subject=alex, predicate="KNOWS]->() DETACH DELETE n //", object=acme
        )
    assert Fact.objects.count() == 0
    assert not Predicate.objects.filter(name__contains="detach").exists()


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"predicate": "works_at"}, "missing_object"),
        ({"predicate": "current_title"}, "missing_value"),
        ({"predicate": "current_title", "value": "x", "confidence": 1.5}, "invalid_confidence"),
        ({"predicate": "current_title", "value": "x" * 70_000}, "value_too_long"),
    ],
)
def test_malformed_facts_are_refused(
    access: ContextAccess, alex: Entity, kwargs: dict, code: str
) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValidationFailed) as err:
        fact_write(access=access, subject=alex, **kwargs)
    assert err.value.code == code
    assert Fact.objects.count() == 0


def test_writes_to_a_merged_entity_land_on_the_survivor(
    access: ContextAccess, alex: Entity
) -> None:
    dup = entity_upsert(access=access, name="Alexander", type="person", scope="org/acme").entity
    Entity.objects.filter(pk=dup.pk).update(merged_into=alex)
    dup.refresh_from_db()
    fact = fact_write(access=access, subject=dup, predicate="current_title", value="CTO").fact
    assert fact.subject_id == alex.pk


@pytest.mark.django_db(transaction=True)
def test_concurrent_single_valued_writers_leave_exactly_one_current_fact() -> None:
    context = context_create(slug="race", name="Race")
    access = system_access(context)
    subject = entity_upsert(access=access, name="Alex", type="person", scope="org/acme").entity
    writers = 16
    barrier = threading.Barrier(writers)
    errors: list[BaseException] = []

    def write(i: int) -> None:
        try:
            barrier.wait()
            fact_write(
                access=system_access(Context.objects.get(pk=context.pk)),
                subject=subject,
                predicate="current_title",
                value=f"Title {i}",
                confidence=0.5 + (i % 6) / 10,
            )
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert errors == []
    facts = Fact.objects.filter(subject=subject)
    assert facts.count() == writers
    assert facts.filter(status=FactStatus.CURRENT).count() == 1
    others = facts.exclude(status=FactStatus.CURRENT)
    assert set(others.values_list("status", flat=True)) <= {"superseded", "contested"}
    assert (
        Conflict.objects.filter(contested_fact__in=others).count()
        == others.filter(status=FactStatus.CONTESTED).count()
    )
