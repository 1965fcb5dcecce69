"""The overview: counts, vocabulary health, open work, recent runs, drift over time."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from memory.domain.access import ContextAccess
from memory.models import Predicate, Run
from memory.selectors.overview import drift_series
from tests.curation.conftest import Memory, page

pytestmark = pytest.mark.django_db


def test_counts_and_vocabulary_health(viewer: Client, base: str, memory: Memory) -> None:
    response = viewer.get(f"{base}/")

    counts, health = response.context["counts"], response.context["health"]
    assert (counts.entities, counts.facts, counts.open_drift, counts.open_conflicts) == (3, 4, 1, 1)
    # 4 current facts: 2 on works_for (drift), knows and current_title on registered ones
    assert (health.facts_on_registered, health.facts) == (2, 4)
    assert health.registered_share == pytest.approx(0.5)
    assert health.variants_per_concept == pytest.approx(1 / 44)  # the open drift form
    html = page(response)
    assert "50%" in html and "Vocabulary health" in html


def test_most_varied_concepts(
    access: ContextAccess, curator: Client, base: str, memory: Memory
) -> None:
    curator.post(f"{base}/drift/works_for/resolve", {"action": "alias", "target": "works_at"})

    health = curator.get(f"{base}/").context["health"]

    assert [(v.name, v.forms, v.facts) for v in health.most_varied] == [("works_at", 2, 2)]


def test_drift_over_time_counts_sightings_and_resolutions(
    access: ContextAccess, curator: Client, base: str, memory: Memory
) -> None:
    Predicate.objects.filter(name="works_for").update(
        first_seen_at=timezone.now() - timedelta(days=2)
    )
    curator.post(
        f"{base}/drift/works_for/promote",
        {
            "category": "work",
            "kind": "relation",
            "default_importance": "0.5",
            "ranking_weight": "1",
            "lifecycle": "stable",
        },
    )

    series = drift_series(access=access, days=7)

    assert len(series) == 7 and series[-1].day == timezone.localdate()
    assert series[-3].new == 1 and series[-1].resolved == 1
    assert sum(d.new for d in series) == 1


def test_chart_range_switch_answers_the_chart_partial(
    viewer: Client, base: str, memory: Memory
) -> None:
    html = page(viewer.get(f"{base}/?days=7", HTTP_HX_REQUEST="true"))

    assert html.lstrip().startswith('<section class="card" id="drift-chart">')
    assert html.count('<rect class="new"') == 7
    assert "Vocabulary health" not in html


def test_recent_runs(viewer: Client, base: str, memory: Memory) -> None:
    Run.objects.create(
        context=memory.alex.context,
        scope="org/acme",
        mode="triples",
        outcome="failed",
        error="model timed out",
    )

    html = page(viewer.get(f"{base}/"))

    assert "model timed out" in html and "status-failed" in html


def test_overview_query_count_does_not_grow(
    viewer: Client, base: str, memory: Memory, django_assert_num_queries: Any
) -> None:
    for _ in range(2):
        # session, user, context, membership; drift sightings; drift resolutions;
        # entities; predicate usage; predicate statuses; registered names; rejected
        # claims of observed predicates (not open drift); aliases; raw forms (most
        # varied); documents; conflicts; duplicates; recent runs; embedding backlog (one
        # statement for every target); contexts; facts waiting for review (navigation
        # and the overview share one count)
        with django_assert_num_queries(20):
            viewer.get(f"{base}/")
        Run.objects.create(context=memory.alex.context, scope="org/acme", mode="triples")


def test_overview_shows_the_embedding_backlog_until_it_is_drained(
    viewer: Client, base: str, memory: Memory
) -> None:
    from memory.services.vectors import embedding_backlog, embeddings_drain

    waiting = embedding_backlog(context=memory.alex.context)
    assert sum(waiting.values()) > 0  # the fixture's rows were written without vectors
    html = page(viewer.get(f"{base}/"))
    assert "Embedding backlog" in html
    assert f'id="embedding-backlog">{sum(waiting.values())}<' in html

    embeddings_drain(context=memory.alex.context)

    html = page(viewer.get(f"{base}/"))
    assert 'id="embedding-backlog">0<' in html


def test_resolving_drift_lowers_the_unresolved_variants(
    curator: Client, base: str, memory: Memory
) -> None:
    before = curator.get(f"{base}/").context["health"].variants_per_concept

    curator.post(f"{base}/drift/works_for/resolve", {"action": "alias", "target": "works_at"})

    after = curator.get(f"{base}/").context["health"]
    assert before > 0 and after.variants_per_concept == 0
    assert "Unresolved variants per concept" in page(curator.get(f"{base}/"))
