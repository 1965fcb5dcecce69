from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from memory.models import Context, Fact, Run, RunOutcome
from tests.fake_llm import FakeLLM
from tests.ingest.conftest import extraction

TRIPLES = extraction(
    entities=[{"name": "Alex", "type": "person"}, {"name": "Acme", "type": "organisation"}],
    relations=[{"subject": "Alex", "predicate": "works_at", "object": "Acme"}],
)


def _ingest(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("ingest", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_ingests_jsonl_turns_with_a_progress_bar(
    context: Context, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.reply_json(extraction(entities=[{"name": "Dana", "type": "person"}]))
    path = tmp_path / "turns.jsonl"
    lines = [
        {"triples": TRIPLES, "source": "crm"},
        {},
        {"text": "Dana joined today.", "scope": "org/acme/user/dana"},
        {"text": "Quarterly notes", "infer": "none"},
    ]
    path.write_text("\n".join(json.dumps(line) if line else "" for line in lines) + "\n")
    out, err = _ingest(str(path), "--context", context.slug, "--scope", "org/acme")
    assert "3 turns into acme-test: 3 succeeded" in out
    assert "3/3" in err
    runs = list(Run.objects.order_by("pk").values_list("mode", "scope", "source", "outcome"))
    assert runs == [
        ("triples", "org/acme", "crm", RunOutcome.SUCCEEDED),
        ("llm", "org/acme/user/dana", "line 3", RunOutcome.SUCCEEDED),
        ("none", "org/acme", "line 4", RunOutcome.SUCCEEDED),
    ]
    assert Fact.objects.count() == 1


def test_bad_lines_and_failed_runs_are_listed_and_fail_the_command(
    context: Context, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.reply_text("no JSON here", times=2)
    path = tmp_path / "turns.jsonl"
    path.write_text(
        "{not json\n"
        + json.dumps({"text": "x"})
        + "\n"
        + json.dumps({"text": "Alex met Dana.", "scope": "s"})
        + "\n"
        + json.dumps({"triples": TRIPLES, "scope": "s"})
        + "\n"
    )
    with pytest.raises(CommandError, match="2 lines refused, 1 runs failed"):
        _ingest(str(path), "--context", context.slug)
    assert Run.objects.filter(outcome=RunOutcome.SUCCEEDED).count() == 1
    failed = Run.objects.get(outcome=RunOutcome.FAILED)
    assert failed.input_text == "Alex met Dana."


def test_problems_are_reported_per_line(context: Context, tmp_path: Path) -> None:
    path = tmp_path / "turns.jsonl"
    path.write_text(
        "[1, 2]\n" + json.dumps({"text": "y" * 300_000, "scope": "s", "infer": "none"}) + "\n"
    )
    err = StringIO()
    with pytest.raises(CommandError):
        call_command("ingest", str(path), "--context", context.slug, stdout=StringIO(), stderr=err)
    report = err.getvalue()
    assert "line 1: not a JSON object" in report
    assert "line 2: the text is 300000 bytes; at most 262144 bytes are accepted" in report
    assert Run.objects.count() == 0


def test_unknown_context_is_an_error(db: None, tmp_path: Path) -> None:
    path = tmp_path / "turns.jsonl"
    path.write_text("{}\n")
    with pytest.raises(CommandError, match="no context 'nope'"):
        _ingest(str(path), "--context", "nope")
