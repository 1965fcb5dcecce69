"""Turns through the API: every accepted memory is kept as a searchable turn with its
speaker, time, conversation and the caller's id; facts point back to their turn."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from memory.models import Context, Fact, Role, Run, Turn
from memory.search.models import SearchDoc
from memory.services.vectors import embedding_backlog, embeddings_drain
from tests.api.conftest import assert_error
from tests.fake_llm import FakeLLM
from tests.ingest.conftest import extraction

TRIPLES = extraction(
    entities=[{"name": "Caroline", "type": "person"}, {"name": "Acme", "type": "organisation"}],
    relations=[{"subject": "Caroline", "predicate": "works_at", "object": "Acme"}],
)


def _remember(client: APIClient, base: str, text: str, **fields: Any) -> Any:
    body = {"text": text, "scope": "org/acme", "infer": "none", "wait": True, **fields}
    return client.post(f"{base}/memories", body, format="json")


def _search(client: APIClient, base: str, query: str, **body: Any) -> Any:
    payload = {"query": query, "target": "turns", "mode": "bm25", **body}
    return client.post(f"{base}/search", payload, format="json")


def test_a_turn_is_kept_with_its_speaker_time_thread_and_ref(api: APIClient, base: str) -> None:
    response = _remember(
        api,
        base,
        "I went to the LGBTQ support group yesterday.",
        speaker="Caroline",
        said_at="2023-05-08T13:56:00+00:00",
        thread="conv-26",
        ref="D1:3",
    )
    assert response.status_code == 200, response.content
    result = response.json()["result"]
    turn = Turn.objects.get()
    assert result["turn"] == {"id": turn.pk, "thread": "conv-26", "ref": "D1:3"}
    assert (turn.speaker, turn.thread, turn.ref) == ("Caroline", "conv-26", "D1:3")
    assert turn.said_at is not None
    assert turn.said_at.isoformat() == "2023-05-08T13:56:00+00:00"

    found = _search(api, base, "support group", thread="conv-26")
    assert found.status_code == 200, found.content
    [hit] = found.json()["results"]
    assert (hit["type"], hit["id"], hit["text"]) == ("turn", turn.pk, turn.text)
    assert hit["meta"] == {
        "ref": "D1:3",
        "thread": "conv-26",
        "speaker": "Caroline",
        "said_at": "2023-05-08T13:56:00+00:00",
        "run": response.json()["run"]["id"],
    }


def test_search_by_thread_returns_only_that_conversations_turns(api: APIClient, base: str) -> None:
    for thread in ("conv-1", "conv-2"):
        for n in range(3):
            assert (
                _remember(api, base, f"adoption agency visit {n}", thread=thread).status_code == 200
            )
    for mode in ("bm25", "hybrid"):
        hits = _search(api, base, "adoption agency", thread="conv-2", mode=mode).json()["results"]
        assert len(hits) == 3 and {h["meta"]["thread"] for h in hits} == {"conv-2"}
    everywhere = _search(api, base, "adoption agency", k=10).json()["results"]
    assert len(everywhere) == 6


def test_every_infer_mode_but_preview_keeps_the_turn(api: APIClient, base: str) -> None:
    body = {"text": "Caroline works at Acme.", "scope": "org/acme", "wait": True}
    triples = api.post(
        f"{base}/memories", {**body, "infer": "triples", "triples": TRIPLES}, format="json"
    )
    preview = api.post(
        f"{base}/memories", {**body, "infer": "preview", "triples": TRIPLES}, format="json"
    )
    assert triples.status_code == preview.status_code == 200
    [turn] = Turn.objects.all()
    assert turn.run_id == triples.json()["run"]["id"]
    assert SearchDoc.objects.filter(target="turn", turn=turn).exists()


def test_a_fact_points_back_to_the_turn_it_was_extracted_from(
    api: APIClient, base: str, fake_llm: FakeLLM
) -> None:
    fake_llm.reply_json(TRIPLES)
    response = _remember(
        api, base, "Caroline told me she works at Acme now.", infer="llm", speaker="Mel", ref="x1"
    )
    assert response.status_code == 200, response.content
    fact = Fact.objects.get(predicate__name="works_at")
    turn = Turn.objects.get()
    assert fact.turn_id == turn.pk and fact.run_id == turn.run_id
    assert response.json()["result"]["turn"]["id"] == turn.pk


def test_a_fact_seen_again_keeps_the_turn_it_first_came_from(api: APIClient, base: str) -> None:
    triples = {"relations": [{"subject": "Caroline", "predicate": "works_at", "object": "Acme"}]}
    triples["entities"] = [{"name": "Caroline", "type": "person"}, {"name": "Acme", "type": "org"}]
    first = _remember(api, base, "Caroline works at Acme.", infer="triples", triples=triples)
    again = _remember(api, base, "Caroline still works at Acme.", infer="triples", triples=triples)
    assert first.status_code == again.status_code == 200, again.content
    assert again.json()["run"]["summary"]["facts_reobserved"] == 1
    fact = Fact.objects.get(predicate__name="works_at")
    assert fact.observed_count == 2
    assert (
        fact.turn_id == first.json()["result"]["turn"]["id"] != again.json()["result"]["turn"]["id"]
    )


def test_a_retried_run_keeps_its_turn_and_its_facts_point_to_it(
    api: APIClient, base: str, fake_llm: FakeLLM
) -> None:
    fake_llm.reply_text("no JSON here", times=2)
    failed = _remember(api, base, "Caroline works at Acme.", infer="llm", ref="t-9")
    assert failed.json()["run"]["outcome"] == "failed"
    turn = Turn.objects.get()  # accepted: searchable although the extraction failed
    assert _search(api, base, "Caroline Acme").json()["results"][0]["id"] == turn.pk

    fake_llm.reply_json(TRIPLES)
    run_id = failed.json()["run"]["id"]
    retry = api.post(f"{base}/runs/{run_id}/retry", {"wait": True}, format="json")
    assert retry.json()["run"]["outcome"] == "succeeded", retry.content
    turn.refresh_from_db()
    assert Turn.objects.count() == 1 and turn.run_id == retry.json()["run"]["id"]
    assert Fact.objects.get(predicate__name="works_at").turn_id == turn.pk


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"said_at": "yesterday"}, "invalid"),
        ({"said_at": "2023-13-45T00:00:00Z"}, "invalid"),
        ({"speaker": "x" * 201}, "invalid"),
        ({"thread": "t" * 201}, "invalid"),
        ({"ref": "r" * 201}, "invalid"),
        ({"speaker": {"name": "Caroline"}}, "invalid"),
        ({"thread": "nul\x00"}, "invalid"),
    ],
)
def test_bad_turn_fields_are_refused_and_write_nothing(
    api: APIClient, base: str, fields: dict[str, Any], code: str
) -> None:
    assert_error(_remember(api, base, "hello", **fields), 400, code)
    assert Run.objects.count() == 0 and Turn.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"target": "chunks", "thread": "conv-1"}, "thread_needs_turns"),
        ({"target": "facts", "thread": "conv-1"}, "thread_needs_turns"),
        ({"thread": "   "}, "invalid"),
        ({"thread": "t" * 201}, "invalid"),
        ({"thread": 7}, "invalid"),
    ],
)
def test_a_bad_thread_filter_is_a_clear_400(
    api: APIClient, base: str, body: dict[str, Any], code: str
) -> None:
    assert_error(_search(api, base, "anything", **body), 400, code)


def test_turns_respect_read_and_write_grants(
    context: Context, base: str, api_client_for: Callable[..., APIClient]
) -> None:
    writer = api_client_for(context, role=Role.ADMIN, grants=["read,write:org/acme/*"])
    assert _remember(writer, base, "budget review notes", thread="c").status_code == 200
    other = api_client_for(context, role=Role.ADMIN, grants=["read,write:org/globex/*"])
    assert _search(other, base, "budget review", thread="c").json()["results"] == []
    refused = other.post(
        f"{base}/memories",
        {"text": "x", "scope": "org/acme", "infer": "none", "thread": "c"},
        format="json",
    )
    assert_error(refused, 403)
    viewer = api_client_for(context, role=Role.VIEWER, grants=["read:org/acme/*"])
    assert len(_search(viewer, base, "budget review", thread="c").json()["results"]) == 1
    assert Turn.objects.count() == 1


def test_turn_vectors_come_from_the_drain_and_the_backlog_reaches_zero(
    api: APIClient, base: str, fake_llm: FakeLLM
) -> None:
    for n in range(5):
        assert _remember(api, base, f"turn number {n}", thread="v").status_code == 200
    turn = Turn.objects.first()
    assert turn is not None
    context = turn.context
    assert embedding_backlog(context=context)["turns"] == 5
    detail = api.get(base).json()
    assert detail["embedding_backlog"]["turns"] == 5

    report = embeddings_drain(context=context)

    assert report.written["turns"] == 5 and report.model_calls == 1
    assert api.get(base).json()["embedding_backlog"] == dict.fromkeys(
        ["chunks", "turns", "facts", "entities", "keywords"], 0
    )
    health = api.get("/api/v1/health").json()
    assert health["embedding_backlog"]["turns"] == 0
    hits = api.post(
        f"{base}/search",
        {"query": "turn number 3", "target": "turns", "mode": "vector", "k": 1, "thread": "v"},
        format="json",
    ).json()["results"]
    assert hits[0]["text"] == "turn number 3"  # the fake embedder: same text, same vector


def _conversation(client: APIClient, base: str, *, secret_reply: bool = False) -> list[int]:
    """Five turns of conversation "trip" with an unrelated turn of another conversation
    written between the question and its reply; the turns' ids in order."""
    lines = [
        ("Caroline", "Morning! How was your week?", "org/acme"),
        ("Melanie", "Where did you go camping last summer?", "org/acme"),
        ("Caroline", "Yosemite, with the kids.", "org/secret" if secret_reply else "org/acme"),
        ("Melanie", "Sounds lovely.", "org/acme"),
        ("Caroline", "Work was busy, though.", "org/acme"),
    ]
    ids = []
    for n, (speaker, text, scope) in enumerate(lines):
        if n == 2:
            assert _remember(client, base, "Camping gear on sale", thread="shop").status_code == 200
        body = {"speaker": speaker, "thread": "trip", "scope": scope}
        response = _remember(client, base, text, **body)
        assert response.status_code == 200, response.content
        ids.append(response.json()["result"]["turn"]["id"])
    return ids


def test_hybrid_lifts_the_neighbours_of_a_matching_turn(api: APIClient, base: str) -> None:
    ids = _conversation(api, base)

    lexical = _search(api, base, "camping last summer", thread="trip").json()["results"]
    hits = _search(api, base, "camping last summer", thread="trip", mode="hybrid").json()["results"]

    assert [h["id"] for h in lexical] == [ids[1]]
    # The question, then its two neighbours (the reply has none of the query's words),
    # then the turn two away; the turn three away gains nothing.
    assert [h["id"] for h in hits] == [ids[1], ids[0], ids[2], ids[3]]
    by_id = {h["id"]: h["explain"] for h in hits}
    assert by_id[ids[2]]["bm25"] is None and by_id[ids[2]]["window_boost"] > 0
    # Neighbours are the conversation's own turns: the other thread's turn written in
    # between does not stand between the question and its reply.
    assert by_id[ids[2]]["window_boost"] == by_id[ids[0]]["window_boost"]
    assert by_id[ids[3]]["window_boost"] < by_id[ids[2]]["window_boost"]
    everywhere = _search(api, base, "camping", mode="hybrid", k=10).json()["results"]
    shop = [h for h in everywhere if h["meta"]["thread"] == "shop"]
    assert len(shop) == 1 and shop[0]["explain"]["window_boost"] is None


def test_a_window_never_reaches_a_turn_the_caller_cannot_read(
    context: Context, base: str, api_client_for: Callable[..., APIClient]
) -> None:
    writer = api_client_for(context, role=Role.ADMIN, grants=["read,write:*"])
    ids = _conversation(writer, base, secret_reply=True)
    reader = api_client_for(context, role=Role.VIEWER, grants=["read:org/acme/*"])

    hits = _search(reader, base, "camping last summer", thread="trip", mode="hybrid").json()[
        "results"
    ]

    assert ids[2] not in {h["id"] for h in hits}
    assert {h["scope"] for h in hits} == {"org/acme"}
    assert ids[2] in {
        h["id"]
        for h in _search(writer, base, "camping last summer", thread="trip", mode="hybrid").json()[
            "results"
        ]
    }
