"""Claiming a run: the advisory lock and the pending → running move, in one statement."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from django.db import connection

from memory.domain.access import ContextAccess
from memory.infra.locks import RUN_LOCK
from memory.models import Run, RunOutcome
from memory.services.executor import Claim, executor_claim
from memory.services.ingest.run import RUN_LIFECYCLE, run_create, run_execute

pytestmark = pytest.mark.django_db(transaction=True)

TRIPLES = {
    "relations": [
        {
            "subject": "Alex",
            "subject_type": "person",
            "predicate": "works_at",
            "object": "Acme",
            "object_type": "organisation",
        }
    ]
}


@pytest.fixture
def other_session() -> Iterator[psycopg.Connection]:
    """A second database session, as another worker process would hold."""
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params, autocommit=True) as other:
        yield other


def _lock_free(other: psycopg.Connection, run_id: int) -> bool:
    row = other.execute("SELECT pg_try_advisory_lock(%s, %s)", [RUN_LOCK, run_id]).fetchone()
    assert row is not None
    if row[0]:
        other.execute("SELECT pg_advisory_unlock(%s, %s)", [RUN_LOCK, run_id])
    return bool(row[0])


def test_a_run_another_executor_holds_is_left_alone(
    access: ContextAccess, other_session: psycopg.Connection
) -> None:
    run = run_create(access=access, text="", scope="s", infer="triples", triples=TRIPLES)
    other_session.execute("SELECT pg_advisory_lock(%s, %s)", [RUN_LOCK, run.pk])
    returned = run_execute(run_id=run.pk)
    assert returned.outcome == RunOutcome.PENDING
    stored = Run.objects.get(pk=run.pk)
    assert (stored.outcome, stored.attempts, stored.started_at) == (RunOutcome.PENDING, 0, None)
    other_session.execute("SELECT pg_advisory_unlock(%s, %s)", [RUN_LOCK, run.pk])

    done = run_execute(run_id=run.pk)  # free again: this process claims and runs it
    assert done.outcome == RunOutcome.SUCCEEDED and done.attempts == 1
    assert _lock_free(other_session, run.pk)  # and let the lock go when it finished


def test_a_run_that_is_not_pending_is_returned_as_it_is_and_its_lock_let_go(
    access: ContextAccess, other_session: psycopg.Connection
) -> None:
    run = run_create(access=access, text="", scope="s", infer="triples", triples=TRIPLES)
    first = run_execute(run_id=run.pk)
    again = run_execute(run_id=run.pk)  # a second delivery of its task
    assert first.outcome == again.outcome == RunOutcome.SUCCEEDED
    assert Run.objects.get(pk=run.pk).attempts == 1
    assert _lock_free(other_session, run.pk)


def test_the_claim_returns_the_run_as_it_left_it(
    access: ContextAccess, other_session: psycopg.Connection
) -> None:
    """The executor works from the row the claim returned: it must be the run as the
    claim left it, with its context and creator, as a fresh read would give them."""
    run = run_create(access=access, text="", scope="s", infer="triples", triples=TRIPLES)
    with executor_claim(RUN_LIFECYCLE, run.pk, related=("context", "created_by")) as claim:
        assert claim.claimed
        read = Run.objects.select_related("context", "created_by").get(pk=run.pk)
        fields = [f.attname for f in Run._meta.concrete_fields]
        assert [getattr(claim.record, f) for f in fields] == [getattr(read, f) for f in fields]
        assert claim.record.outcome == RunOutcome.RUNNING and claim.record.attempts == 1
        assert claim.record.context.slug == access.context.slug
        assert claim.record.created_by is None
        # A second delivery meanwhile finds it running: no claim, no record.
        with executor_claim(RUN_LIFECYCLE, run.pk) as second:
            assert second == Claim(False)
    assert _lock_free(other_session, run.pk)
