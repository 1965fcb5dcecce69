from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest

from memory.domain.access import ContextAccess
from memory.kernel.errors import PermissionDenied, ValidationFailed
from memory.kernel.scopes import Grants
from memory.models import (
    Context,
    Document,
    Entity,
    Fact,
    FactStatus,
    Predicate,
    PredicateStatus,
    Run,
    RunOutcome,
    Turn,
)
from memory.services.ingest.acceptance import TextTooLarge
from memory.services.ingest.run import run_create, run_execute

ALEX_AT_ACME = {
    "entities": [
        {
            "name": "Alex Rivera",
            "type": "person",
            "identifiers": [{"kind": "email", "value": "Alex@Acme.example"}],
        },
        {"name": "Acme Corp", "type": "company"},
    ],
    "relations": [{"subject": "Alex Rivera", "predicate": "worksAt", "object": "Acme Corp"}],
    "attributes": [{"subject": "Alex Rivera", "key": "current_title", "value": "Staff Engineer"}],
    "actions": [
        {
            "subject": "Alex Rivera",
            "verb": "attended",
            "object": "Q3 Offsite",
            "object_type": "event",
            "at": "2025-03-01",
        }
    ],
}


def _ingest(
    access: ContextAccess,
    triples: dict[str, Any],
    *,
    infer: str = "triples",
    scope: str = "org/acme",
) -> Run:
    run = run_create(access=access, text="", scope=scope, infer=infer, triples=triples)
    return run_execute(run_id=run.pk)


def test_triples_write_entities_and_facts_through_the_run(access: ContextAccess) -> None:
    run = _ingest(access, ALEX_AT_ACME)
    assert run.outcome == RunOutcome.SUCCEEDED, run.error
    result = run.result
    assert result is not None
    assert {e["name"] for e in result["entities_created"]} == {
        "Alex Rivera",
        "Acme Corp",
        "Q3 Offsite",
    }
    assert {(f["predicate"], f["kind"]) for f in result["facts_created"]} == {
        ("works_at", "relation"),
        ("current_title", "attribute"),
        ("attended", "action"),
    }
    acme = Entity.objects.get(name="Acme Corp")
    assert acme.type == "organisation"
    fact = Fact.objects.get(predicate__name="works_at")
    assert (fact.subject.name, fact.object_id, fact.raw_predicate) == (
        "Alex Rivera",
        acme.pk,
        "worksAt",
    )
    assert fact.run_id == run.pk and fact.source_kind == "run"
    action = Fact.objects.get(predicate__name="attended")
    assert action.valid_from is not None and action.valid_from.isoformat().startswith("2025-03-01")
    assert run.summary["facts_created"] == 3
    assert run.timings["total_ms"] > 0


def test_the_same_triples_again_match_entities_and_reobserve_facts(access: ContextAccess) -> None:
    first = _ingest(access, ALEX_AT_ACME)
    again = _ingest(access, ALEX_AT_ACME)
    assert again.outcome == RunOutcome.SUCCEEDED, again.error
    assert again.result is not None
    assert again.result["entities_created"] == []
    matched = {e["name"]: e["matched_by"] for e in again.result["entities_matched"]}
    assert matched == {"Alex Rivera": "identifier", "Acme Corp": "name", "Q3 Offsite": "name"}
    assert again.result["facts_created"] == []
    assert len(again.result["facts_reobserved"]) == 3
    assert Fact.objects.count() == 3
    assert Fact.objects.get(predicate__name="works_at").observed_count == 2
    assert first.result is not None
    assert first.result["entities_created"][0]["id"] is not None


def test_preview_returns_the_diff_and_writes_nothing(access: ContextAccess) -> None:
    before = _counts()
    run = _ingest(
        access,
        ALEX_AT_ACME
        | {"relations": [{"subject": "Alex Rivera", "predicate": "mentors", "object": "Dana"}]},
        infer="preview",
    )
    assert run.outcome == RunOutcome.SUCCEEDED, run.error
    assert _counts() == before
    result = run.result
    assert result is not None
    assert result["preview"] is True
    assert {e["name"] for e in result["entities_created"]} >= {"Alex Rivera", "Dana"}
    assert all(e["id"] is None for e in result["entities_created"])
    assert all(f["id"] is None for f in result["facts_created"])
    assert [p["name"] for p in result["new_predicates"]] == ["mentors"]
    assert not Predicate.objects.filter(name="mentors").exists()


def _counts() -> dict[str, int]:
    from memory.models import DuplicateCandidate, PredicateUsage

    return {
        "entities": Entity.objects.count(),
        "facts": Fact.objects.count(),
        "predicates": Predicate.objects.count(),
        "usage": PredicateUsage.objects.count(),
        "duplicates": DuplicateCandidate.objects.count(),
        "documents": Document.objects.count(),
    }


def test_infer_none_keeps_the_text_as_a_turn_only(access: ContextAccess) -> None:
    run = run_create(
        access=access,
        text="Notes from the offsite\nWe agreed on Q3 goals.",
        scope="org/acme",
        infer="none",
        source="meeting",
    )
    run = run_execute(run_id=run.pk)
    assert run.outcome == RunOutcome.SUCCEEDED, run.error
    turn = Turn.objects.get()
    assert (turn.text, turn.scope, turn.run_id) == (
        "Notes from the offsite\nWe agreed on Q3 goals.",
        "org/acme",
        run.pk,
    )
    assert run.result is not None
    assert run.result["turn"] == {"id": turn.pk, "thread": None, "ref": None}
    assert Document.objects.count() == 0 and Fact.objects.count() == 0


def test_new_predicates_are_deduplicated_by_canonical_form_and_kept_as_drift(
    access: ContextAccess,
) -> None:
    triples = {
        "entities": [
            {"name": "Alex", "type": "person"},
            {"name": "Dana", "type": "person"},
            {"name": "Sam", "type": "person"},
        ],
        "relations": [
            {"subject": "Alex", "predicate": "mentorOf", "object": "Dana"},
            {"subject": "Alex", "predicate": "mentor_of", "object": "Sam"},
            {"subject": "Dana", "predicate": "mentor-of", "object": "Sam"},
        ],
    }
    run = _ingest(access, triples)
    assert run.result is not None
    assert run.result["new_predicates"] == [
        {
            "name": "mentor_of",
            "forms": ["mentorOf", "mentor_of", "mentor-of"],
            "status": "observed",
            "examples": ["Alex mentorOf Dana", "Alex mentor_of Sam", "Dana mentor-of Sam"],
        }
    ]
    predicate = Predicate.objects.get(context=access.context, name="mentor_of")
    assert predicate.status == PredicateStatus.OBSERVED
    assert predicate.example == "Alex mentorOf Dana"
    assert Fact.objects.filter(predicate=predicate).count() == 3


def test_drift_examples_are_read_only_while_one_may_be_missing(access: ContextAccess) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def mentors(subject: str) -> dict[str, Any]:
        return {
            "entities": [{"name": subject, "type": "person"}, {"name": "Dana", "type": "person"}],
            "relations": [{"subject": subject, "predicate": "mentorOf", "object": "Dana"}],
        }

    def example_reads(captured: CaptureQueriesContext) -> list[str]:
        return [
            q["sql"]
            for q in captured.captured_queries
            if q["sql"].startswith(
                'SELECT "memory_predicate"."id" AS "pk", "memory_predicate"."name"'
            )
        ]

    with CaptureQueriesContext(connection) as first:
        _ingest(access, mentors("Alex"))
    drift = Predicate.objects.get(context=access.context, name="mentor_of")
    assert drift.example == "Alex mentorOf Dana"
    assert len(example_reads(first)) == 1

    with CaptureQueriesContext(connection) as known:
        run = _ingest(access, mentors("Sam"))
    assert run.result is not None
    assert run.result["new_predicates"][0]["examples"] == ["Sam mentorOf Dana"]
    assert example_reads(known) == []

    Predicate.objects.filter(pk=drift.pk).update(example="")
    with CaptureQueriesContext(connection) as cleared:
        _ingest(access, mentors("Kim"))
    drift.refresh_from_db()
    assert drift.example == "Kim mentorOf Dana"
    assert len(example_reads(cleared)) == 1


def test_strict_mode_lists_unknown_predicates_as_unresolved_and_writes_the_rest(
    make_context: Callable[..., Context],
) -> None:
    from memory.domain.access import system_access

    access = system_access(make_context("strict-ctx", predicate_mode="strict"))
    triples = {
        "entities": [{"name": "Alex", "type": "person"}, {"name": "Acme", "type": "organisation"}],
        "relations": [
            {"subject": "Alex", "predicate": "employed_by", "object": "Acme"},
            {"subject": "Alex", "predicate": "adores", "object": "Acme"},
        ],
    }
    run = _ingest(access, triples)
    assert run.outcome == RunOutcome.SUCCEEDED_WITH_WARNINGS, run.error
    assert run.result is not None
    assert [f["predicate"] for f in run.result["facts_created"]] == ["works_at"]
    [unresolved] = run.result["unresolved"]
    assert unresolved["code"] == "unknown_predicate"
    assert unresolved["item"]["predicate"] == "adores"
    assert "accepts only registered predicates" in unresolved["reason"]
    assert run.result["new_predicates"][0] | {"examples": None} == {
        "name": "adores",
        "forms": ["adores"],
        "status": "refused",
        "examples": None,
    }
    drift = Predicate.objects.get(context=access.context, name="adores")
    assert drift.status == PredicateStatus.OBSERVED
    assert drift.example == "Alex adores Acme"
    assert not Fact.objects.filter(predicate=drift).exists()


def test_hostile_predicates_are_refused_item_by_item(access: ContextAccess) -> None:
    triples = {
        "entities": [{"name": "Alex", "type": "person"}, {"name": "Acme", "type": "organisation"}],
        "relations": [
            {"subject": "Alex", "predicate": "KNOWS]->() DETACH DELETE n //", "object": "Acme"},
            {"subject": "Alex", "predicate": "x'); DROP TABLE memory_fact; --", "object": "Acme"},
            {"subject": "Alex", "predicate": "works at", "object": "Acme"},
        ],
    }
    run = _ingest(access, triples)
    assert run.outcome == RunOutcome.SUCCEEDED_WITH_WARNINGS, run.error
    assert run.result is not None
    assert [u["code"] for u in run.result["unresolved"]] == [
        "invalid_predicate",
        "invalid_predicate",
    ]
    assert [f["predicate"] for f in run.result["facts_created"]] == ["works_at"]
    assert set(Predicate.objects.filter(context=access.context).values_list("name", flat=True)) >= {
        "works_at"
    }
    assert not Predicate.objects.filter(name__contains="drop").exists()


def test_a_single_value_supersedes_the_previous_one(access: ContextAccess) -> None:
    def title(value: str, confidence: float) -> dict[str, Any]:
        return {
            "entities": [{"name": "Alex", "type": "person"}],
            "attributes": [
                {
                    "subject": "Alex",
                    "key": "current_title",
                    "value": value,
                    "confidence": confidence,
                }
            ],
        }

    _ingest(access, title("Engineer", 0.9))
    run = _ingest(access, title("Staff Engineer", 0.95))
    old = Fact.objects.get(value_text="Engineer")
    new = Fact.objects.get(value_text="Staff Engineer")
    assert (old.status, new.status, new.supersedes_id) == (
        FactStatus.SUPERSEDED,
        FactStatus.CURRENT,
        old.pk,
    )
    assert run.result is not None
    assert run.result["facts_superseded"] == [
        {"id": old.pk, "predicate": "current_title", "superseded_by": new.pk}
    ]
    rumour = _ingest(access, title("CTO", 0.4))
    assert rumour.result is not None
    [conflict] = rumour.result["conflicts"]
    assert conflict["current_fact"] == new.pk
    assert "under the 0.7" in conflict["reason"]
    assert Fact.objects.get(value_text="CTO").status == FactStatus.CONTESTED


def test_a_write_that_fails_midway_leaves_nothing_and_the_run_keeps_its_input(
    access: ContextAccess,
) -> None:
    from django.db import connection

    # Fault injection at the database: the fact insert fails after the entities of the
    # same run were inserted.
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION test_refuse_fact() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF NEW.raw_predicate = 'explode' THEN RAISE EXCEPTION 'injected failure'; END IF; "
            "RETURN NEW; END $$; CREATE TRIGGER test_refuse_fact BEFORE INSERT ON memory_fact "
            "FOR EACH ROW EXECUTE FUNCTION test_refuse_fact();"
        )
    triples = {
        "entities": [{"name": "Alex", "type": "person"}, {"name": "Acme", "type": "organisation"}],
        "relations": [
            {"subject": "Alex", "predicate": "works_at", "object": "Acme"},
            {"subject": "Alex", "predicate": "explode", "object": "Acme"},
        ],
    }
    run = _ingest(access, triples)
    assert run.outcome == RunOutcome.FAILED
    assert "injected failure" in run.error
    assert Entity.objects.count() == 0 and Fact.objects.count() == 0
    assert not Predicate.objects.filter(name="explode").exists()
    assert run.input_payload["triples"] == triples
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER test_refuse_fact ON memory_fact")
    from memory.services.ingest.run import run_retry

    retry = run_execute(run_id=run_retry(access=access, run=run).pk)
    assert retry.outcome == RunOutcome.SUCCEEDED and retry.retry_of_id == run.pk
    assert Fact.objects.count() == 2


def test_each_run_logs_one_json_line(
    access: ContextAccess, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="memory.ingest"):
        run = _ingest(access, ALEX_AT_ACME)
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "memory.ingest"]
    assert len(lines) == 1
    line = lines[0]
    assert line["operation"] == "ingest" and line["run_id"] == run.pk
    assert (line["context"], line["scope"], line["outcome"]) == (
        "acme-test",
        "org/acme",
        "succeeded",
    )
    assert (
        line["entities_created"],
        line["entities_matched"],
        line["rejected"],
        line["merges"],
    ) == (3, 0, 0, 0)
    assert line["predicates_used"] == ["attended", "current_title", "works_at"]
    assert line["new_predicates"] == []
    assert line["duration_ms"] > 0


def test_accepting_a_memory_needs_a_write_grant_and_a_sane_size(
    access: ContextAccess, settings: Any
) -> None:
    reader = ContextAccess(
        context=access.context,
        user=None,
        role=access.role,
        grants=Grants.from_strings(["read:*", "write:org/acme/user/alex/*"]),
    )
    with pytest.raises(PermissionDenied):
        run_create(access=reader, text="", scope="org/acme", infer="triples", triples=ALEX_AT_ACME)
    settings.MEMORY_MAX_TEXT_BYTES = 1000
    with pytest.raises(TextTooLarge) as refused:
        run_create(access=access, text="é" * 501, scope="org/acme", infer="none")
    assert refused.value.status == 413 and refused.value.details == {"bytes": 1002, "limit": 1000}
    with pytest.raises(ValidationFailed) as malformed:
        run_create(
            access=access, text="", scope="org/acme", infer="triples", triples={"relation": []}
        )
    assert malformed.value.code == "invalid_triples"
    assert Run.objects.count() == 0


def test_keys_match_in_the_write_scope_and_its_ancestors_only(
    access: ContextAccess, make_entity: Callable[..., Entity]
) -> None:
    org_acme = make_entity("Acme Corp", "organisation", "org/acme")
    # Dana-Lee shares Dana Lee's key, not its name: a sibling's entity is no key match
    # (one bearing exactly the name, in a scope the writer reads, would be: see
    # tests/api/test_entity_names.py).
    sibling = make_entity("Dana Lee", "person", "org/acme/user/sam")
    triples = {
        "entities": [
            {"name": "ACME Inc.", "type": "organisation"},
            {"name": "Dana-Lee", "type": "person"},
        ],
        "relations": [{"subject": "Dana-Lee", "predicate": "works_at", "object": "ACME Inc."}],
    }
    run = _ingest(access, triples, scope="org/acme/user/alex")
    assert run.result is not None
    matched = {e["name"]: (e["id"], e["matched_by"]) for e in run.result["entities_matched"]}
    assert matched == {"Acme Corp": (org_acme.pk, "key")}
    [created] = run.result["entities_created"]
    assert created["name"] == "Dana-Lee" and created["id"] != sibling.pk
    assert created["scope"] == "org/acme/user/alex"
    org_acme.refresh_from_db()
    assert "ACME Inc." in org_acme.aliases
    assert Fact.objects.get().scope == "org/acme/user/alex"
