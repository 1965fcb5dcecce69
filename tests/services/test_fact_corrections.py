"""fact_correct: a corrected value supersedes a current fact, audited and undoable."""

from __future__ import annotations

from dataclasses import replace

import pytest

from memory.domain.access import ContextAccess
from memory.kernel.errors import Conflict, PermissionDenied, ValidationFailed
from memory.kernel.scopes import Grants
from memory.models import AuditEvent, Fact, FactStatus
from memory.services.entities.writes import entity_upsert
from memory.services.facts.corrections import fact_correct
from memory.services.facts.write import fact_write
from memory.services.undo import audit_undo


@pytest.fixture
def alex_title(access: ContextAccess) -> Fact:
    alex = entity_upsert(access=access, name="Alex", type="person", scope="org/acme").entity
    return fact_write(access=access, subject=alex, predicate="current_title", value="Enginer").fact


def test_correction_supersedes_and_undo_restores(access: ContextAccess, alex_title: Fact) -> None:
    correction = fact_correct(access=access, fact=alex_title, value="Engineer", reason="typo")
    alex_title.refresh_from_db()
    assert alex_title.status == FactStatus.SUPERSEDED
    assert correction.new.supersedes_id == alex_title.pk
    assert correction.new.value == "Engineer"
    assert correction.new.scope == alex_title.scope
    event = AuditEvent.objects.get(pk=correction.audit_event_id)
    assert event.action == "fact_correct" and "typo" in event.summary

    audit_undo(access=access, event_id=event.pk)
    alex_title.refresh_from_db()
    correction.new.refresh_from_db()
    assert alex_title.status == FactStatus.CURRENT
    assert correction.new.status == FactStatus.RETRACTED


def test_a_relation_is_corrected_with_a_new_object(access: ContextAccess) -> None:
    alex = entity_upsert(access=access, name="Alex", type="person", scope="org/acme").entity
    acme = entity_upsert(access=access, name="Acme", type="organisation", scope="org/acme").entity
    globex = entity_upsert(access=access, name="Globex", type="organisation", scope="org/acme")
    works = fact_write(access=access, subject=alex, predicate="works_at", object=acme).fact
    correction = fact_correct(access=access, fact=works, object=globex.entity)
    assert correction.new.object_id == globex.entity.pk
    with pytest.raises(ValidationFailed, match="new object"):
        fact_correct(access=access, fact=correction.new, value="Initech")


def test_only_a_current_fact_can_be_corrected(access: ContextAccess, alex_title: Fact) -> None:
    fact_correct(access=access, fact=alex_title, value="Engineer")
    with pytest.raises(Conflict, match="not current"):
        fact_correct(access=access, fact=alex_title, value="Lead")


def test_correcting_needs_a_write_grant(access: ContextAccess, alex_title: Fact) -> None:
    reader = replace(access, grants=Grants.from_strings(["read:*"]))
    with pytest.raises(PermissionDenied, match="no write grant on scope 'org/acme'"):
        fact_correct(access=reader, fact=alex_title, value="CEO")
    alex_title.refresh_from_db()
    assert alex_title.status == FactStatus.CURRENT
    assert not AuditEvent.objects.filter(action="fact_correct").exists()


def test_a_correction_needs_exactly_one_new_value(access: ContextAccess, alex_title: Fact) -> None:
    with pytest.raises(ValidationFailed):
        fact_correct(access=access, fact=alex_title)
    alex_title.refresh_from_db()
    assert alex_title.status == FactStatus.CURRENT
