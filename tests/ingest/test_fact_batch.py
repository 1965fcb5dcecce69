"""The batched fact writer keeps fact_write's rules (services/facts/write.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from memory.domain.access import ContextAccess, system_access
from memory.kernel.errors import PermissionDenied
from memory.kernel.scopes import Grants
from memory.models import Conflict, Context, Entity, Fact, FactStatus, Predicate
from memory.services.facts.batch import FactInput, fact_batch_record_refused, facts_write_batch
from memory.services.facts.write import fact_write
from memory.services.registry.predicates import predicate_register

SCOPE = "org/acme"


@pytest.fixture
def alex(make_entity: Callable[..., Entity]) -> Entity:
    return make_entity("Alex", "person", SCOPE)


@pytest.fixture
def acme(make_entity: Callable[..., Entity]) -> Entity:
    return make_entity("Acme", "organisation", SCOPE)


def _title(alex: Entity, value: str, confidence: float = 0.9) -> FactInput:
    return FactInput(alex, "current_title", "attribute", value=value, confidence=confidence)


def test_identical_facts_are_reobserved_within_and_across_batches(
    access: ContextAccess, alex: Entity, acme: Entity
) -> None:
    works = FactInput(alex, "worksAt", "relation", object=acme, confidence=0.6)
    first = facts_write_batch(access=access, scope=SCOPE, facts=[works, works])
    assert [i.outcome for i in first.items] == ["created", "reobserved"]
    again = facts_write_batch(
        access=access,
        scope=SCOPE,
        facts=[FactInput(alex, "works_at", "relation", object=acme, confidence=0.8)],
    )
    assert again.items[0].outcome == "reobserved"
    fact = Fact.objects.get()
    assert (fact.observed_count, fact.confidence, fact.raw_predicate) == (3, 0.8, "worksAt")
    # The single-fact path agrees: the same fact again is a re-observation.
    assert (
        fact_write(access=access, subject=alex, predicate="works_at", object=acme).outcome
        == "reobserved"
    )


def test_single_values_supersede_or_conflict_like_fact_write(
    access: ContextAccess, alex: Entity
) -> None:
    result = facts_write_batch(
        access=access,
        scope=SCOPE,
        facts=[
            _title(alex, "Engineer"),
            _title(alex, "Senior Engineer", 0.95),
            _title(alex, "CTO", 0.5),
        ],
    )
    assert [i.outcome for i in result.items] == ["created", "superseded", "conflict"]
    engineer, senior, cto = (
        Fact.objects.get(value_text=v) for v in ("Engineer", "Senior Engineer", "CTO")
    )
    assert (engineer.status, senior.status, cto.status) == ("superseded", "current", "contested")
    assert senior.supersedes_id == engineer.pk  # linked within the batch
    conflict = Conflict.objects.get()
    assert (conflict.current_fact_id, conflict.contested_fact_id) == (senior.pk, cto.pk)
    assert "under the 0.7" in conflict.reason
    later = facts_write_batch(
        access=access, scope=SCOPE, facts=[_title(alex, "Staff Engineer", 0.95)]
    )
    staff = later.items[0].fact
    assert staff is not None and staff.supersedes_id == senior.pk
    senior.refresh_from_db()
    assert senior.status == FactStatus.SUPERSEDED and senior.valid_until is not None


def test_aggregates_are_updated_in_place(access: ContextAccess, alex: Entity) -> None:
    facts_write_batch(
        access=access,
        scope=SCOPE,
        facts=[FactInput(alex, "interaction_count", "attribute", value=1)],
    )
    result = facts_write_batch(
        access=access,
        scope=SCOPE,
        facts=[FactInput(alex, "interaction_count", "attribute", value=2)],
    )
    assert result.items[0].outcome == "updated"
    fact = Fact.objects.get()
    assert (fact.value, fact.observed_count) == (2, 2)


def test_registry_defaults_apply(access: ContextAccess, alex: Entity, acme: Entity) -> None:
    now = timezone.now()
    result = facts_write_batch(
        access=access,
        scope=SCOPE,
        facts=[FactInput(alex, "met_with", "relation", object=acme, valid_from=now)],
    )
    fact = result.items[0].fact
    assert fact is not None and fact.valid_until == now + timedelta(days=90)
    assert (
        fact.importance
        == Predicate.objects.get(context=access.context, name="met_with").default_importance
    )


def test_refused_items_do_not_stop_the_others(make_context: Callable[..., Context]) -> None:
    access = system_access(make_context("strict", predicate_mode="strict"))
    alex = Entity.objects.create(
        context=access.context, scope=SCOPE, name="Alex", type="person", normalized_key="alex"
    )
    predicate_register(access=access, name="blocked_thing")
    Predicate.objects.filter(context=access.context, name="blocked_thing").update(status="rejected")
    result = facts_write_batch(
        access=access,
        scope=SCOPE,
        facts=[
            FactInput(alex, "adores", "attribute", value="cats"),
            FactInput(alex, "blocked_thing", "attribute", value="x"),
            FactInput(alex, "bad]pred", "attribute", value="x"),
            FactInput(alex, "works_at", "relation"),  # a relation without an object
            _title(alex, "Engineer"),
        ],
    )
    codes = [i.error.code if i.error else i.outcome for i in result.items]
    assert codes == [
        "unknown_predicate",
        "rejected_predicate",
        "invalid_predicate",
        "missing_object",
        "created",
    ]
    assert result.refused_predicates == ["adores"]
    assert not Predicate.objects.filter(context=access.context, name="adores").exists()
    fact_batch_record_refused(access=access, raws=result.refused_predicates)
    assert Predicate.objects.get(context=access.context, name="adores").status == "observed"


def test_a_batch_needs_a_write_grant(access: ContextAccess, alex: Entity) -> None:
    reader = ContextAccess(
        context=access.context, user=None, role=access.role, grants=Grants.from_strings(["read:*"])
    )
    with pytest.raises(PermissionDenied):
        facts_write_batch(access=reader, scope=SCOPE, facts=[_title(alex, "Engineer")])
    assert Fact.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_concurrent_batches_leave_one_current_value(make_context: Callable[..., Context]) -> None:
    access = system_access(make_context("race"))
    alex = Entity.objects.create(
        context=access.context, scope=SCOPE, name="Alex", type="person", normalized_key="alex"
    )
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def write(value: str) -> None:
        try:
            barrier.wait()
            with transaction.atomic():
                facts_write_batch(access=access, scope=SCOPE, facts=[_title(alex, value)])
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(v,)) for v in ("Engineer", "Manager")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    statuses = sorted(Fact.objects.values_list("status", flat=True))
    assert statuses == ["current", "superseded"]
    current = Fact.objects.get(status="current")
    assert current.supersedes is not None and current.supersedes.status == "superseded"
