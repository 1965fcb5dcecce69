"""A run's timings say where its time went: each stage counts its own time (a stage
nested in another is not counted twice), so together they never exceed the run's total."""

from __future__ import annotations

import time

import pytest

from memory.domain.access import ContextAccess
from memory.infra.stages import StageClock, stage
from memory.models import RunOutcome
from memory.services.ingest.run import run_create, run_execute

pytestmark = pytest.mark.django_db

TRIPLES = {
    "entities": [
        {"name": "Alex Rivera", "type": "person"},
        {"name": "Acme Corp", "type": "organisation"},
    ],
    "relations": [{"subject": "Alex Rivera", "predicate": "works_at", "object": "Acme Corp"}],
    "attributes": [{"subject": "Alex Rivera", "key": "current_title", "value": "CTO"}],
}


def test_a_triples_run_reports_its_write_stages(access: ContextAccess) -> None:
    run = run_create(access=access, text="", scope="org/acme", infer="triples", triples=TRIPLES)
    run = run_execute(run_id=run.pk)

    assert run.outcome == RunOutcome.SUCCEEDED, run.error
    stages = {k: v for k, v in run.timings.items() if k != "total_ms"}
    wanted = {"resolve_ms", "write_ms", "entities_ms", "duplicates_ms", "facts_ms", "postings_ms"}
    assert wanted <= set(stages)
    assert all(v >= 0 for v in stages.values())
    assert sum(stages.values()) <= run.timings["total_ms"] + 0.1 * len(stages)  # rounding


def test_a_nested_stage_is_counted_once() -> None:
    clock = StageClock()
    began = time.perf_counter()
    with clock.stage("outer"):
        time.sleep(0.02)
        with stage("inner"):  # marks the running clock from anywhere below it
            time.sleep(0.03)
    elapsed_ms = (time.perf_counter() - began) * 1000

    assert clock.stages["inner_ms"] >= 30
    assert clock.stages["outer_ms"] >= 20
    # Together they are the block's time: the inner 30 ms are not in the outer's too.
    assert abs(clock.stages["outer_ms"] + clock.stages["inner_ms"] - elapsed_ms) < 1.0


def test_a_stage_without_a_running_clock_does_nothing() -> None:
    with stage("alone"):
        pass  # no clock, no error, nothing recorded anywhere
    clock = StageClock()
    with clock.stage("after"):
        pass
    assert set(clock.stages) == {"after_ms"}
