"""One collision rule everywhere (services/facts/rules.py, docs/decisions/0022): a single write, a
batch, a drift alias and a merge that bring a new value into a single-valued slot all end
the same way — the newcomer supersedes only with confidence >= 0.7 and >= the prior's
(and automatic supersession on), otherwise the prior stays current, the newcomer is kept
contested and a Conflict records why."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from memory.domain.access import ContextAccess, system_access
from memory.models import AuditEvent, Conflict, Context, Entity, Fact, FactStatus
from memory.services.drift.alias import drift_alias
from memory.services.entities.writes import entity_upsert
from memory.services.facts.batch import FactInput, facts_write_batch
from memory.services.facts.rules import collision_decide
from memory.services.facts.write import fact_write
from memory.services.merges.merge import entity_merge, merge_undo
from memory.services.undo import audit_undo

SCOPE = "org/acme"


def _person(access: ContextAccess, name: str) -> Entity:
    return entity_upsert(access=access, name=name, type="person", scope=SCOPE).entity


def _write(access: ContextAccess, alex: Entity, confidence: float) -> None:
    fact_write(
        access=access,
        subject=alex,
        predicate="current_title",
        value="VP",
        confidence=confidence,
    )


def _batch(access: ContextAccess, alex: Entity, confidence: float) -> None:
    result = facts_write_batch(
        access=access,
        scope=SCOPE,
        facts=[
            FactInput(
                subject=alex,
                predicate="current_title",
                kind="attribute",
                value="VP",
                confidence=confidence,
            )
        ],
    )
    assert result.items[0].error is None


def _alias(access: ContextAccess, alex: Entity, confidence: float) -> None:
    fact_write(
        access=access, subject=alex, predicate="job_title_now", value="VP", confidence=confidence
    )
    drift_alias(access=access, name="job_title_now", target="current_title", force=True)


def _merge(access: ContextAccess, alex: Entity, confidence: float) -> None:
    twin = _person(access, "Alex Twin")
    fact_write(
        access=access, subject=twin, predicate="current_title", value="VP", confidence=confidence
    )
    entity_merge(access=access, survivor_id=alex.pk, merged_ids=[twin.pk])


PATHS: dict[str, Callable[[ContextAccess, Entity, float], None]] = {
    "write": _write,
    "batch": _batch,
    "alias": _alias,
    "merge": _merge,
}


@dataclass(frozen=True)
class Case:
    prior: float
    newcomer: float
    auto_supersede: bool
    newcomer_wins: bool
    reason: str  # a fragment of the Conflict's reason when the newcomer loses


CASES = {
    "higher_confidence_wins": Case(0.8, 0.9, True, True, ""),
    "equal_confidence_wins": Case(0.9, 0.9, True, True, ""),
    "under_the_floor_is_contested": Case(0.5, 0.6, True, False, "under the 0.7"),
    "under_the_prior_is_contested": Case(0.95, 0.8, True, False, "current value's 0.95"),
    "auto_supersede_off_is_contested": Case(0.5, 0.9, False, False, "auto_supersede is off"),
}


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("case_name", list(CASES))
def test_every_path_meeting_a_single_value_follows_the_one_rule(
    make_context: Callable[..., Context], path: str, case_name: str
) -> None:
    case = CASES[case_name]
    access = system_access(make_context(auto_supersede=case.auto_supersede))
    alex = _person(access, "Alex")
    fact_write(
        access=access, subject=alex, predicate="current_title", value="CTO", confidence=case.prior
    )

    PATHS[path](access, alex, case.newcomer)

    facts = Fact.objects.filter(subject=alex, predicate__name="current_title")
    prior = facts.get(value_text="CTO")
    newcomer = facts.get(value_text="VP")
    conflicts = Conflict.objects.filter(subject=alex)
    if case.newcomer_wins:
        assert (newcomer.status, prior.status) == (FactStatus.CURRENT, FactStatus.SUPERSEDED)
        assert newcomer.supersedes_id == prior.pk
        assert prior.valid_until is not None
        assert not conflicts.exists()
    else:
        assert (newcomer.status, prior.status) == (FactStatus.CONTESTED, FactStatus.CURRENT)
        conflict = conflicts.get()
        assert (conflict.current_fact_id, conflict.contested_fact_id) == (prior.pk, newcomer.pk)
        assert case.reason in conflict.reason


def test_the_rule_itself_reads_only_confidences_and_the_setting() -> None:
    assert collision_decide(
        newcomer_confidence=0.7, prior_confidence=0.7, auto_supersede=True
    ).newcomer_wins
    lost = collision_decide(newcomer_confidence=0.69, prior_confidence=0.1, auto_supersede=True)
    assert not lost.newcomer_wins and "0.69" in lost.reason


def test_undoing_an_alias_whose_value_superseded_restores_both(access: ContextAccess) -> None:
    alex = _person(access, "Alex")
    fact_write(access=access, subject=alex, predicate="current_title", value="CTO", confidence=0.8)
    _alias(access, alex, 0.9)
    assert Fact.objects.get(value_text="CTO").status == FactStatus.SUPERSEDED

    audit_undo(access=access, event_id=AuditEvent.objects.get(action="drift_alias").pk)
    prior = Fact.objects.get(value_text="CTO")
    moved = Fact.objects.get(value_text="VP")
    assert (prior.status, prior.valid_until) == (FactStatus.CURRENT, None)
    assert moved.status == FactStatus.CURRENT and moved.supersedes_id is None
    assert moved.predicate.name == "job_title_now"


def test_undoing_an_alias_removes_the_conflicts_it_recorded(access: ContextAccess) -> None:
    alex = _person(access, "Alex")
    fact_write(access=access, subject=alex, predicate="current_title", value="CTO", confidence=0.9)
    _alias(access, alex, 0.5)
    assert Conflict.objects.filter(subject=alex).count() == 1

    audit_undo(access=access, event_id=AuditEvent.objects.get(action="drift_alias").pk)
    assert not Conflict.objects.filter(subject=alex).exists()
    assert Fact.objects.get(value_text="VP").status == FactStatus.CURRENT


def test_undoing_a_merge_whose_value_superseded_restores_both(access: ContextAccess) -> None:
    alex = _person(access, "Alex")
    twin = _person(access, "Alex Twin")
    fact_write(access=access, subject=alex, predicate="current_title", value="CTO", confidence=0.8)
    fact_write(access=access, subject=twin, predicate="current_title", value="VP", confidence=0.9)
    record = entity_merge(access=access, survivor_id=alex.pk, merged_ids=[twin.pk])
    assert record.summary["superseded"] == 1

    merge_undo(access=access, merge_id=record.pk)
    prior = Fact.objects.get(value_text="CTO")
    moved = Fact.objects.get(value_text="VP")
    assert (prior.subject_id, prior.status, prior.valid_until) == (
        alex.pk,
        FactStatus.CURRENT,
        None,
    )
    assert (moved.subject_id, moved.status, moved.supersedes_id) == (
        twin.pk,
        FactStatus.CURRENT,
        None,
    )
