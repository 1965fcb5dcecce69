"""Retracting a run through the services: what comes back, what stays, and the exact undo."""

from __future__ import annotations

from typing import Any

import pytest

from memory.domain.access import ContextAccess
from memory.kernel.errors import Conflict, PermissionDenied
from memory.kernel.scopes import Grants
from memory.models import (
    AuditEvent,
    Entity,
    EntityIdentifier,
    Fact,
    FactStatus,
    Role,
    Run,
    RunOutcome,
)
from memory.models import (
    Conflict as ConflictRecord,
)
from memory.services.ingest.retract import run_retract, run_retract_preview
from memory.services.ingest.run import run_create, run_execute
from memory.services.undo import audit_undo

SCOPE = "org/acme"


def _ingest(access: ContextAccess, triples: dict[str, Any], scope: str = SCOPE) -> Run:
    run = run_create(access=access, text="", scope=scope, infer="triples", triples=triples)
    return run_execute(run_id=run.pk)


def _curator(access: ContextAccess) -> ContextAccess:
    return ContextAccess(context=access.context, user=None, role=Role.CURATOR, grants=access.grants)


def _world(access: ContextAccess) -> dict[str, Any]:
    """Everything a retraction may touch, as comparable values."""
    return {
        "facts": sorted(
            Fact.objects.filter(context=access.context).values_list(
                "id", "status", "subject_id", "object_id", "value_text", "valid_until"
            )
        ),
        "entities": sorted(
            Entity.objects.filter(context=access.context).values_list(
                "id", "name", "type", "aliases", "alias_keys"
            )
        ),
        "identifiers": sorted(
            EntityIdentifier.objects.filter(context=access.context).values_list(
                "id", "entity_id", "kind", "value"
            )
        ),
        "conflicts": sorted(
            ConflictRecord.objects.filter(context=access.context).values_list(
                "id", "status", "current_fact_id", "contested_fact_id"
            )
        ),
    }


FIRST = {
    "entities": [
        {"name": "Alex Rivera", "type": "person"},
        {"name": "Acme Corp", "type": "organisation"},
    ],
    "relations": [{"subject": "Alex Rivera", "predicate": "works_at", "object": "Acme Corp"}],
    "attributes": [{"subject": "Alex Rivera", "key": "current_title", "value": "Engineer"}],
}
# The junk turn: a new title (supersedes), a new entity, a new spelling and an email on Alex.
JUNK = {
    "entities": [
        {
            "name": "Alex Rivera",
            "type": "person",
            "aliases": ["Lex the Hacker"],
            "identifiers": [{"kind": "email", "value": "lex@evil.example"}],
        },
        {"name": "Evil Corp", "type": "organisation"},
    ],
    "relations": [{"subject": "Alex Rivera", "predicate": "works_at", "object": "Evil Corp"}],
    "attributes": [{"subject": "Alex Rivera", "key": "current_title", "value": "Supreme Leader"}],
}


def _alex(access: ContextAccess) -> Entity:
    return Entity.objects.get(context=access.context, name="Alex Rivera")


def test_retracting_a_run_takes_back_its_facts_entities_spellings_and_identifiers(
    access: ContextAccess,
) -> None:
    _ingest(access, FIRST)
    junk = _ingest(access, JUNK)
    alex = _alex(access)
    assert "Lex the Hacker" in alex.aliases
    plan, event = run_retract(access=access, run=junk)

    assert {f.status for f in Fact.objects.filter(run=junk)} <= {FactStatus.RETRACTED}
    assert not Entity.objects.filter(name="Evil Corp").exists()
    titles = Fact.objects.filter(subject=alex, predicate__name="current_title")
    assert {(f.value_text, f.status) for f in titles} == {
        ("Engineer", FactStatus.CURRENT),
        ("Supreme Leader", FactStatus.RETRACTED),
    }
    alex.refresh_from_db()
    assert "Lex the Hacker" not in alex.aliases
    assert not EntityIdentifier.objects.filter(value="lex@evil.example").exists()
    assert Entity.objects.filter(name="Acme Corp").exists()  # the earlier run's entity
    works = Fact.objects.get(subject=alex, predicate__name="works_at", object__name="Acme Corp")
    assert works.status == FactStatus.CURRENT
    junk.refresh_from_db()
    assert junk.retracted_at is not None
    assert event.action == "run_retract" and event.target_id == str(junk.pk)
    assert [e["name"] for e in plan.as_dict()["entities_deleted"]] == ["Evil Corp"]


def test_the_preview_says_what_would_change_and_writes_nothing(access: ContextAccess) -> None:
    _ingest(access, FIRST)
    junk = _ingest(access, JUNK)
    before = _world(access)
    shown = run_retract_preview(access=access, run=junk).as_dict()
    assert _world(access) == before
    assert not AuditEvent.objects.filter(action="run_retract").exists()
    assert shown["facts_retracted"] + shown["facts_deleted"] == 2
    assert {f["object"] for f in shown["facts"]} == {"Evil Corp", "Supreme Leader"}
    assert len(shown["superseded_restored"]) == 1
    assert shown["aliases_removed"][0]["aliases"] == ["Lex the Hacker"]
    assert shown["identifiers_removed"] == 1
    assert shown["dependencies"] == []


def test_the_undo_from_the_audit_log_restores_exactly_what_was_there(
    access: ContextAccess,
) -> None:
    _ingest(access, FIRST)
    junk = _ingest(access, JUNK)
    before = _world(access)
    _, event = run_retract(access=access, run=junk)
    assert _world(access) != before
    audit_undo(access=_curator(access), event_id=event.pk)
    assert _world(access) == before  # same ids, statuses, spellings, identifiers
    junk.refresh_from_db()
    assert junk.retracted_at is None
    event.refresh_from_db()
    assert event.undone_at is not None
    # ... and the run can be retracted again.
    run_retract(access=access, run=junk)
    assert not Entity.objects.filter(name="Evil Corp").exists()


def test_a_later_write_on_an_entity_the_run_created_keeps_that_entity(
    access: ContextAccess,
) -> None:
    first = _ingest(access, FIRST)
    later = _ingest(
        access,
        {
            "entities": [{"name": "Acme Corp", "type": "organisation"}],
            "attributes": [{"subject": "Acme Corp", "key": "industry", "value": "rockets"}],
        },
    )
    preview = run_retract_preview(access=access, run=first).as_dict()
    assert [e["name"] for e in preview["entities_kept"]] == ["Acme Corp"]
    assert any("Acme Corp" in words for words in preview["dependencies"])
    assert [e["name"] for e in preview["entities_deleted"]] == ["Alex Rivera"]
    run_retract(access=access, run=first)
    acme = Entity.objects.get(name="Acme Corp")
    industry = Fact.objects.get(run=later)
    assert (industry.subject_id, industry.status) == (acme.pk, FactStatus.CURRENT)
    assert not Entity.objects.filter(name="Alex Rivera").exists()


def test_a_value_a_later_write_replaced_stays_replaced(access: ContextAccess) -> None:
    _ingest(access, FIRST)
    junk = _ingest(access, JUNK)
    _ingest(
        access,
        {
            "entities": [{"name": "Alex Rivera", "type": "person"}],
            "attributes": [{"subject": "Alex Rivera", "key": "current_title", "value": "CTO"}],
        },
    )
    plan, _ = run_retract(access=access, run=junk)
    assert plan.priors_restored == []
    assert any("later write" in words for words in plan.dependencies)
    current = Fact.objects.get(
        subject=_alex(access), predicate__name="current_title", status=FactStatus.CURRENT
    )
    assert current.value_text == "CTO"


def test_a_contested_value_of_the_run_closes_its_conflict(access: ContextAccess) -> None:
    _ingest(access, FIRST)
    doubtful = {
        "entities": [{"name": "Alex Rivera", "type": "person"}],
        "attributes": [
            {"subject": "Alex Rivera", "key": "current_title", "value": "Intern", "confidence": 0.3}
        ],
    }
    run = _ingest(access, doubtful)
    conflict = ConflictRecord.objects.get(contested_fact__run=run)
    run_retract(access=access, run=run)
    conflict.refresh_from_db()
    assert (conflict.status, conflict.resolution) == ("resolved", "run_retracted")
    audit_undo(access=_curator(access), event_id=AuditEvent.objects.get(action="run_retract").pk)
    conflict.refresh_from_db()
    assert conflict.status == "open"


def test_a_retracted_run_cannot_be_retracted_twice(access: ContextAccess) -> None:
    run = _ingest(access, FIRST)
    run_retract(access=access, run=run)
    run.refresh_from_db()
    with pytest.raises(Conflict) as refused:
        run_retract(access=access, run=run)
    assert refused.value.code == "already_retracted"


@pytest.mark.parametrize(
    ("outcome", "code"),
    [
        (RunOutcome.RUNNING, "run_not_finished"),
        (RunOutcome.PENDING, "run_not_finished"),
        (RunOutcome.FAILED, "nothing_to_retract"),
    ],
)
def test_a_run_that_has_not_written_is_refused(
    access: ContextAccess, outcome: str, code: str
) -> None:
    run = run_create(access=access, text="", scope=SCOPE, infer="triples", triples=FIRST)
    Run.objects.filter(pk=run.pk).update(outcome=outcome)
    run.refresh_from_db()
    before = _world(access)
    with pytest.raises(Conflict) as refused:
        run_retract(access=access, run=run)
    assert refused.value.code == code
    assert _world(access) == before


def test_retracting_needs_a_write_grant_on_the_run_scope(access: ContextAccess) -> None:
    run = _ingest(access, FIRST)
    reader = ContextAccess(
        context=access.context,
        user=None,
        role=Role.CURATOR,
        grants=Grants.from_strings(["read:*", "write:org/other/*"]),
    )
    before = _world(access)
    with pytest.raises(PermissionDenied):
        run_retract_preview(access=reader, run=run)
    with pytest.raises(PermissionDenied):
        run_retract(access=reader, run=run)
    assert _world(access) == before


def test_a_run_with_a_refused_item_ends_with_warnings(access: ContextAccess) -> None:
    triples = {
        "entities": [{"name": "Alex Rivera", "type": "wizard"}],
        "relations": [
            {"subject": "Alex Rivera", "predicate": "mentors", "object": "Acme"},
            {"subject": "Alex Rivera", "predicate": "<script>x</script>", "object": "Acme"},
        ],
    }
    run = _ingest(access, triples)
    assert run.outcome == RunOutcome.SUCCEEDED_WITH_WARNINGS
    assert run.summary["unresolved"] == 1
    assert run.summary["warnings"] == 2  # the unknown type and the refused predicate
    assert run.result is not None
    assert any("'wizard'" in w and "other" in w for w in run.result["warnings"])
    clean = _ingest(access, FIRST)
    assert clean.outcome == RunOutcome.SUCCEEDED


def test_a_run_that_kept_only_its_turn_has_nothing_to_retract(access: ContextAccess) -> None:
    run = run_create(access=access, text="Alex said hello.", scope=SCOPE, infer="none")
    run = run_execute(run_id=run.pk)
    with pytest.raises(Conflict) as refused:
        run_retract_preview(access=access, run=run)
    assert refused.value.code == "nothing_to_retract"
    with pytest.raises(Conflict):
        run_retract(access=access, run=run)
    assert not AuditEvent.objects.filter(action="run_retract").exists()
