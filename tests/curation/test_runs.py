"""The runs screen: a filtered list, a detail with prompt and outputs, retry of failed runs."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from memory.models import Context, Role, Run, RunOutcome, Turn
from tests.curation.conftest import page

pytestmark = pytest.mark.django_db


def make_run(context: Context, outcome: str = RunOutcome.SUCCEEDED, **fields: Any) -> Run:
    now = timezone.now()
    defaults: dict[str, Any] = {
        "scope": "org/acme",
        "mode": "none",
        "input_text": "Alex joined Acme in 2021.",
        "started_at": now,
        "finished_at": now,
    }
    return Run.objects.create(context=context, outcome=outcome, **{**defaults, **fields})


@pytest.fixture
def failed(context: Context) -> Run:
    return make_run(
        context,
        RunOutcome.FAILED,
        prompt="SYSTEM: extract facts\nUSER: Alex joined Acme in 2021.",
        raw_output='{"facts": [oops',
        error="the model answered invalid JSON",
        timings={"extract_ms": 1250.0},
        prompt_tokens=120,
        completion_tokens=7,
    )


def test_runs_are_listed_newest_first(viewer: Client, base: str, context: Context) -> None:
    first = make_run(context, source="first-source")
    second = make_run(context, RunOutcome.FAILED, source="second-source")

    html = page(viewer.get(f"{base}/runs/"))

    assert html.index(f"#{second.pk}<") < html.index(f"#{first.pk}<")
    assert 'aria-current="page">Runs' in html


def test_outcome_filter(viewer: Client, base: str, context: Context) -> None:
    make_run(context, source="worked-fine")
    make_run(context, RunOutcome.FAILED, source="went-wrong")

    html = page(viewer.get(f"{base}/runs/?outcome=failed"))

    assert "went-wrong" in html and "worked-fine" not in html
    assert "worked-fine" in page(viewer.get(f"{base}/runs/?outcome=nonsense"))  # → all


def test_htmx_filter_answers_the_rows_partial(viewer: Client, base: str, context: Context) -> None:
    make_run(context)

    response = viewer.get(f"{base}/runs/?outcome=succeeded", HTTP_HX_REQUEST="true")

    assert page(response).lstrip().startswith('<div id="run-rows">')


def test_detail_shows_input_prompt_outputs_and_error(
    viewer: Client, base: str, failed: Run
) -> None:
    html = page(viewer.get(f"{base}/runs/{failed.pk}/"))

    assert "Alex joined Acme in 2021." in html
    assert "SYSTEM: extract facts" in html
    assert "{&quot;facts&quot;: [oops" in html
    assert "the model answered invalid JSON" in html
    assert "Extract</dt><dd>1.2 s" in html and "120" in html
    assert "/retry" not in html  # a viewer cannot retry


def test_curator_retries_a_failed_run(curator: Client, base: str, failed: Run) -> None:
    assert "Retry this run" in page(curator.get(f"{base}/runs/{failed.pk}/"))

    response = curator.post(f"{base}/runs/{failed.pk}/retry")

    retry = Run.objects.get(retry_of=failed)
    assert response.status_code == 302
    assert response["Location"] == f"{base}/runs/{retry.pk}/"
    assert retry.outcome == RunOutcome.PENDING and retry.input_text == failed.input_text
    assert f"retried as run {retry.pk}" in page(curator.get(response["Location"]))


def test_retrying_an_llm_run_without_a_chat_model_says_so(
    curator: Client, base: str, context: Context
) -> None:
    run = make_run(context, RunOutcome.FAILED, mode="llm")

    response = curator.post(f"{base}/runs/{run.pk}/retry")

    assert response.status_code == 503
    assert "no chat model is configured" in page(response)
    assert Run.objects.count() == 1


def test_only_failed_runs_can_be_retried(curator: Client, base: str, context: Context) -> None:
    done = make_run(context)

    response = curator.post(f"{base}/runs/{done.pk}/retry")

    assert response.status_code == 409
    assert "only failed runs can be retried" in page(response)
    assert Run.objects.count() == 1


def test_viewer_cannot_retry(client_for: Callable[..., Client], base: str, failed: Run) -> None:
    response = client_for(Role.VIEWER).post(f"{base}/runs/{failed.pk}/retry")

    assert response.status_code == 403
    assert Run.objects.count() == 1


def test_runs_outside_my_grants_are_404(
    client_for: Callable[..., Client], base: str, failed: Run
) -> None:
    client = client_for(Role.CURATOR, grants=["read,write:team/*"])

    assert client.get(f"{base}/runs/{failed.pk}/").status_code == 404
    assert client.post(f"{base}/runs/{failed.pk}/retry").status_code == 404
    assert "#" + str(failed.pk) not in page(client.get(f"{base}/runs/"))


def test_unknown_run_is_404(viewer: Client, base: str) -> None:
    assert viewer.get(f"{base}/runs/999999/").status_code == 404


def test_runs_page_query_count_does_not_grow(
    context: Context, viewer: Client, base: str, django_assert_num_queries: Any
) -> None:
    for round_ in range(2):
        if round_:
            for i in range(5):
                make_run(context, RunOutcome.FAILED if i % 2 else RunOutcome.SUCCEEDED)
        # session, user, context, membership, contexts (switcher); count of runs; one
        # page of runs with their creators joined (none when the count is 0); facts
        # waiting for review (navigation)
        with django_assert_num_queries(8 if round_ else 7):
            response = viewer.get(f"{base}/runs/")
        assert len(response.context["page"].object_list) == 5 * round_


def test_a_run_page_reads_as_a_report_not_a_json_dump(
    viewer: Client, base: str, context: Context
) -> None:
    result = {
        "entities_created": [
            {"id": 7, "name": "Maria Chen", "type": "person", "scope": "org/acme"}
        ],
        "entities_matched": [
            {"id": 8, "name": "Globex", "type": "organisation", "scope": "org/acme"}
        ],
        "facts_created": [
            {"id": 1, "subject": {"id": 7, "name": "Maria Chen"}, "predicate": "works_at",
             "raw_predicate": "joined", "kind": "relation", "outcome": "created",
             "status": "current", "object": {"id": 8, "name": "Globex"}},
        ],
        "facts_reobserved": [], "facts_superseded": [], "new_predicates": [],
        "unresolved": [{"section": "relations", "position": 1, "item": {},
                        "reason": "no predicate given", "code": "invalid_item"}],
        "conflicts": [], "merges": [], "warnings": [], "document": None, "preview": False,
    }  # fmt: skip
    run = make_run(
        context,
        result=result,
        timings={"extract_ms": 2350.0, "resolve_ms": 12.4, "total_ms": 112.0},
        input_payload={"triples": None, "grants": ["read:*"], "role": "admin"},
    )

    html = page(viewer.get(f"{base}/runs/{run.pk}/"))

    assert ">succeeded with 1 item not written</span>" in html
    assert "1 entity created, 1 matched; 1 fact written; 1 item not written." in html
    assert f'<a href="{base}/entities/7/">Maria Chen</a>' in html
    assert "written “joined”" in html
    assert "relations #2</strong>: no predicate given" in html
    assert "<dt>Resolve</dt><dd>12 ms</dd>" in html and "<dt>Extract</dt><dd>2.4 s</dd>" in html
    assert "<dt>Total</dt><dd>112 ms</dd>" in html and "resolve_ms" not in html
    assert "&quot;role&quot;" not in html and '"role"' not in html
    assert "(as admin)" in html
    assert '<summary class="small">The result as JSON</summary>' in html


def test_took_and_ago_read_as_a_person_says_them(
    viewer: Client, base: str, context: Context
) -> None:
    started = timezone.now()
    make_run(context, started_at=started, finished_at=started + timedelta(milliseconds=112))

    runs = page(viewer.get(f"{base}/runs/"))
    overview = page(viewer.get(f"{base}/"))

    assert "112 ms" in runs and "0 minutes" not in runs
    assert "just now" in overview and "0 minutes ago" not in overview


def test_a_run_whose_result_holds_counts_not_lists_still_reads(
    viewer: Client, base: str, context: Context
) -> None:
    run = make_run(context, result={"entities_created": 3, "facts_created": 1, "unresolved": 0})

    response = viewer.get(f"{base}/runs/{run.pk}/")

    assert response.status_code == 200
    assert "3 entities created, 0 matched; 1 fact written." in page(response)


def _written_run(context: Context) -> Run:
    from memory.domain.access import system_access
    from memory.services.ingest.run import run_create, run_execute

    triples = {
        "entities": [{"name": "Mallory", "type": "person"}, {"name": "Shady", "type": "topic"}],
        "relations": [{"subject": "Mallory", "predicate": "works_on", "object": "Shady"}],
    }
    run = run_create(
        access=system_access(context), text="", scope="org/acme", infer="triples", triples=triples
    )
    return run_execute(run_id=run.pk)


def test_the_run_page_previews_a_retraction_then_retracts_with_an_undo(
    curator: Client, base: str, context: Context
) -> None:
    from memory.models import Entity, Fact

    run = _written_run(context)
    html = page(curator.get(f"{base}/runs/{run.pk}/"))
    assert "Retract this run" in html
    preview = curator.post(
        f"{base}/runs/{run.pk}/retract", {"preview": "1"}, HTTP_HX_REQUEST="true"
    )
    text = page(preview)
    assert "Retracting run #" in text and "Mallory" in text and "<html" not in text
    assert Fact.objects.get(run=run).status == "current"  # the preview wrote nothing
    done = curator.post(f"{base}/runs/{run.pk}/retract", follow=True)
    text = page(done)
    assert "Retracted run" in text and "Undo" in text
    assert 'id="run-retracted"' in text and "Retract this run" not in text
    assert not Entity.objects.filter(name="Mallory").exists()


def test_a_viewer_cannot_retract_a_run(viewer: Client, base: str, context: Context) -> None:
    from memory.models import Fact

    run = _written_run(context)
    assert "Retract this run" not in page(viewer.get(f"{base}/runs/{run.pk}/"))
    refused = viewer.post(f"{base}/runs/{run.pk}/retract")
    assert refused.status_code == 403
    assert Fact.objects.get(run=run).status == "current"


def test_the_runs_list_counts_what_a_run_refused(
    viewer: Client, base: str, context: Context
) -> None:
    make_run(context, RunOutcome.SUCCEEDED_WITH_WARNINGS, summary={"unresolved": 2, "warnings": 1})
    html = page(viewer.get(f"{base}/runs/"))
    assert "succeeded · 2 not written · 1 warning" in html
    assert "With warnings" in html


def test_the_list_shows_each_run_s_text_and_thread_as_its_turn_keeps_them(
    viewer: Client, base: str, context: Context
) -> None:
    said = make_run(context, input_text="Alex joined Acme in 2021. The code is hunter2.")
    Turn.objects.create(
        context=context,
        scope="org/acme",
        run=said,
        thread="weekly sync",
        text="Alex joined Acme in 2021. The code is [redacted].",
    )
    make_run(context, mode="triples", input_text="")

    html = page(viewer.get(f"{base}/runs/"))

    assert "Alex joined Acme in 2021. The code is [redacted]." in html
    assert "hunter2" not in html  # the run's raw input is not what a list shows
    assert f'thread <a href="{base}/conversations/weekly%20sync/">weekly sync</a>' in html
    assert "triples only" in html
