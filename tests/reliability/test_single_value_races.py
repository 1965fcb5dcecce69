"""Single-valued writes racing across scopes and through both write paths at once — the
facts API (``fact_write``) and ingest runs (``facts_write_batch``) — leave exactly one
current value per (subject, predicate, scope), never supersede across scopes, lose no
write, and record a conflict for every value that could not win."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connections
from rest_framework.test import APIClient

from memory.models import Conflict, Context, Entity, Fact, FactStatus, Role
from memory.services.tokens import token_issue

pytestmark = pytest.mark.django_db(transaction=True)

SCOPES = ["org/acme", "org/acme/team-a", "org/acme/team-b"]
ROUNDS = 3
# Per scope and round: two API writers (one too unsure to replace a value) and one run.
API_CONFIDENCES = [0.9, 0.5]
RUN_CONFIDENCE = 0.8


def test_concurrent_single_valued_writes_by_api_and_ingest_keep_one_value_per_scope(
    context: Context, make_user: Callable[..., Any]
) -> None:
    base = f"/api/v1/contexts/{context.slug}"
    user = make_user(context=context, role=Role.ADMIN)
    token = token_issue(user=user, context=context, grants=["read,write:*"]).raw
    writers = len(SCOPES) * (len(API_CONFIDENCES) + 1)
    clients = [APIClient() for _ in range(writers)]  # one per thread
    for client in clients:
        client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    alex_id = (
        clients[0]
        .post(
            f"{base}/entities",
            {"name": "Alex", "type": "person", "scope": "org/acme"},
            format="json",
        )
        .json()["id"]
    )

    def post(path: str, body: dict[str, Any]) -> Callable[[APIClient], Any]:
        return lambda client: client.post(f"{base}/{path}", body, format="json")

    for round_ in range(ROUNDS):
        jobs: list[Callable[[APIClient], Any]] = []
        for scope in SCOPES:
            for n, confidence in enumerate(API_CONFIDENCES):
                value = f"api {n} r{round_} {scope}"
                body = {"subject": alex_id, "predicate": "currentTitle", "scope": scope,
                        "value": value, "confidence": confidence}  # fmt: skip
                jobs.append(post("facts", body))
            triples = {"attributes": [
                {"subject": "Alex", "subject_type": "person", "key": "current_title",
                 "value": f"run r{round_} {scope}", "confidence": RUN_CONFIDENCE},
            ]}  # fmt: skip
            memory = {"scope": scope, "infer": "triples", "triples": triples, "wait": True}
            jobs.append(post("memories", memory))
        responses = _race(jobs, clients)

        for response in responses:
            assert response.status_code in (200, 201), response.content
            if "run" in response.json():
                # Nothing refused; one current value per scope breaks the registry's
                # single_value rule for Alex across scopes: a constraint warning at most.
                run = response.json()["run"]
                assert run["outcome"] in ("succeeded", "succeeded_with_warnings"), run
                assert run["summary"]["unresolved"] == 0, response.json()
        _assert_one_value_per_scope(alex_id, writes_so_far=(round_ + 1) * writers)


def _race(jobs: list[Callable[[APIClient], Any]], clients: list[APIClient]) -> list[Any]:
    barrier = threading.Barrier(len(jobs))
    responses: list[Any] = [None] * len(jobs)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait()
            responses[i] = jobs[i](clients[i])
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    return responses


def _assert_one_value_per_scope(alex_id: int, *, writes_so_far: int) -> None:
    assert Entity.objects.filter(name="Alex").count() == 1  # runs matched, never duplicated
    facts = Fact.objects.filter(subject_id=alex_id, predicate__name="current_title")
    assert facts.count() == writes_so_far  # every write kept: none lost, none merged away
    for scope in SCOPES:
        in_scope = facts.filter(scope=scope)
        assert in_scope.filter(status=FactStatus.CURRENT).count() == 1, scope
        assert set(in_scope.values_list("status", flat=True)) <= {
            FactStatus.CURRENT, FactStatus.SUPERSEDED, FactStatus.CONTESTED,
        }  # fmt: skip
        # Supersession stays inside the scope, and every superseded value has a successor.
        for fact in in_scope.exclude(supersedes=None).select_related("supersedes"):
            assert fact.supersedes is not None and fact.supersedes.scope == scope
        superseded = in_scope.filter(status=FactStatus.SUPERSEDED)
        assert set(superseded.values_list("pk", flat=True)) == set(
            in_scope.exclude(supersedes=None).values_list("supersedes", flat=True)
        )
        contested = in_scope.filter(status=FactStatus.CONTESTED)
        assert Conflict.objects.filter(contested_fact__in=contested, scope=scope).count() == (
            contested.count()
        )
