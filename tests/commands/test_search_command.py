from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from memory.domain.access import ContextAccess
from memory.services.ingest.documents import document_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def documents(access: ContextAccess) -> None:
    document_create(access=access, title="Refunds", text="Full refund in 30 days.", scope="a")
    document_create(access=access, title="Shipping", text="Ships in two days.", scope="b")


def _search(*args: str) -> str:
    out = StringIO()
    call_command("search", *args, stdout=out)
    return out.getvalue()


def test_prints_ranked_results_with_explanations(access: ContextAccess, documents: None) -> None:
    out = _search("refund", "--context", access.context.slug, "--mode", "bm25")
    lines = out.splitlines()
    assert (
        lines[0].startswith("  1. ") and "[a]" in lines[0] and "Full refund in 30 days." in lines[0]
    )
    assert lines[1].strip().startswith("bm25 #1 ") and "vector —" in lines[1]
    assert lines[-1].startswith("1 results in ")


def test_json_output_is_the_api_shape(access: ContextAccess, documents: None) -> None:
    out = _search(
        "days", "--context", access.context.slug, "--mode", "bm25", "--scope", "b", "--json"
    )
    body = json.loads(out)
    assert set(body) == {"results", "took_ms"}
    assert [r["scope"] for r in body["results"]] == ["b"]


def test_bad_arguments_are_command_errors(access: ContextAccess) -> None:
    with pytest.raises(CommandError, match="no context"):
        _search("x", "--context", "nope")
    with pytest.raises(CommandError, match="k must be between"):
        _search("x", "--context", access.context.slug, "--k", "0")


def test_searches_one_conversations_turns(access: ContextAccess) -> None:
    from memory.services.ingest.run import run_create
    from memory.services.ingest.turns import turn_fields_clean

    for thread, speaker in (("c1", "Mel"), ("c2", "Caroline")):
        run_create(
            access=access,
            text="We painted a sunrise together.",
            scope="a",
            infer="none",
            turn=turn_fields_clean(speaker=speaker, thread=thread, ref=f"{thread}:1"),
        )
    out = _search(
        "sunrise", "--context", access.context.slug, "--mode", "bm25", "--target", "turns",
        "--thread", "c2",
    )  # fmt: skip
    lines = out.splitlines()
    assert "turn" in lines[0] and "We painted a sunrise together." in lines[0]
    assert lines[1].strip().startswith("Caroline · c2 · c2:1, bm25 #1 ")
    assert lines[-1].startswith("1 results in ")
    with pytest.raises(CommandError, match="thread filter applies to target turns only"):
        _search("sunrise", "--context", access.context.slug, "--thread", "c2")
