"""Valid time decides which value of a single-valued predicate is current: an older value
becomes history with its own interval, an ended one is never served as current, and
``valid_at`` asks what held at a time whenever it was recorded (docs/decisions/0120)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone
from rest_framework.test import APIClient

from memory.models import Fact, FactStatus

PAT = {"name": "Pat Quinn", "type": "person"}


def _write(api: APIClient, base: str, **body: Any) -> dict[str, Any]:
    body = {"subject": PAT, "predicate": "current_title", "scope": "org/acme", **body}
    response = api.post(f"{base}/facts", body, format="json")
    assert response.status_code in (200, 201), response.content
    return response.json()  # type: ignore[no-any-return]


def _titles(api: APIClient, base: str, **query: str) -> list[str]:
    response = api.get(
        f"{base}/facts", {"subject": "Pat Quinn", "predicate": "current_title", **query}
    )
    assert response.status_code == 200, response.content
    return sorted(f["value"] for f in response.json()["results"])


def _no_inverted_interval() -> None:
    for fact in Fact.objects.all():
        if fact.valid_from and fact.valid_until:
            assert fact.valid_until >= fact.valid_from, (
                fact.value,
                fact.valid_from,
                fact.valid_until,
            )


def test_an_older_value_becomes_history_and_closes_nothing_current(
    api: APIClient, base: str
) -> None:
    director = _write(api, base, value="Director of Sales", valid_from="2025-06-01T00:00:00Z")
    assert director["outcome"] == "created"
    intern = _write(
        api, base, value="Sales Intern",
        valid_from="2019-06-01T00:00:00Z", valid_until="2020-08-31T00:00:00Z",
    )  # fmt: skip
    assert intern["outcome"] == "created" and intern["superseded"] is None
    assert intern["fact"]["status"] == "superseded"
    assert intern["fact"]["valid_until"].startswith("2020-08-31")
    assert Fact.objects.get(pk=director["fact"]["id"]).status == FactStatus.CURRENT
    assert Fact.objects.get(pk=director["fact"]["id"]).valid_until is None

    # A value valid from 2022 (no end given) began before the Director's: history too,
    # ending where the current value began.
    lead = _write(api, base, value="Sales Lead", valid_from="2022-01-01T00:00:00Z")
    assert lead["outcome"] == "created" and lead["fact"]["status"] == "superseded"
    assert lead["fact"]["valid_until"].startswith("2025-06-01")
    assert _titles(api, base) == ["Director of Sales"]
    _no_inverted_interval()

    context = api.post(
        f"{base}/context", {"query": "What is Pat Quinn's title now?"}, format="json"
    ).json()
    assert "Director of Sales" in context["text"]
    assert "Sales Intern" not in context["text"]

    assert _titles(api, base, valid_at="2019-09-01T00:00:00Z") == ["Sales Intern"]
    assert _titles(api, base, valid_at="2023-03-01T00:00:00Z") == ["Sales Lead"]
    assert _titles(api, base, valid_at="2026-01-01T00:00:00Z") == ["Director of Sales"]


def test_a_later_value_still_supersedes_and_the_interval_is_never_inverted(
    api: APIClient, base: str
) -> None:
    first = _write(api, base, value="Engineer", valid_from="2021-01-01T00:00:00Z")
    second = _write(api, base, value="CTO", valid_from="2024-01-01T00:00:00Z")
    assert second["outcome"] == "superseded" and second["superseded"] == first["fact"]["id"]
    prior = Fact.objects.get(pk=first["fact"]["id"])
    assert prior.valid_until is not None and prior.valid_until.year == 2024
    _no_inverted_interval()


def test_valid_at_answers_a_title_recorded_today_that_held_then(api: APIClient, base: str) -> None:
    """``as_of`` is what the store held then (recorded by then); ``valid_at`` is what held
    then, whenever recorded: "What was Pat's title in 2022?"."""
    _write(api, base, value="Account Executive",
           valid_from="2021-01-01T00:00:00Z", valid_until="2023-12-31T00:00:00Z")  # fmt: skip
    assert _titles(api, base, as_of="2022-06-01T00:00:00Z") == []
    assert _titles(api, base, valid_at="2022-06-01T00:00:00Z") == ["Account Executive"]
    assert _titles(api, base) == []  # its validity ended: not current
    response = api.get(f"{base}/facts", {"valid_at": "not-a-date"})
    assert response.status_code == 400


def test_an_ended_value_is_not_served_before_the_expiry_runs(api: APIClient, base: str) -> None:
    written = _write(api, base, value="Interim CFO")
    # Its validity ends, and the periodic expiry has not run yet.
    Fact.objects.filter(pk=written["fact"]["id"]).update(
        valid_until=timezone.now() - timedelta(minutes=1)
    )
    assert Fact.objects.get(pk=written["fact"]["id"]).status == FactStatus.CURRENT
    assert _titles(api, base) == []
    context = api.post(f"{base}/context", {"entity": "Pat Quinn"}, format="json").json()
    assert "Interim CFO" not in context["text"]
    search = api.post(f"{base}/search", {"query": "Interim CFO"}, format="json").json()
    assert all(r.get("fact_id") != written["fact"]["id"] for r in search["results"])
    assert "Interim CFO" not in str(search["results"])
