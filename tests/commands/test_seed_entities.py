from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from memory.models import Context, Entity

pytestmark = pytest.mark.django_db


def _seed(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("seed_entities", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_seeds_a_csv_file_with_progress_and_summary(context: Context, tmp_path: Path) -> None:
    path = tmp_path / "people.csv"
    path.write_text("name,type,email\nAlex Rivera,person,alex@acme.example\nAcme,company,\n")

    out, err = _seed(str(path), "--context", context.slug, "--scope", "org/acme")

    assert "2 rows into acme-test: 2 created, 0 matched, 0 failed" in out
    assert "2/2" in err  # the progress bar's last state
    seeded = Entity.objects.filter(context=context, seeded=True).order_by("name")
    assert [(e.name, e.type, e.scope) for e in seeded] == [
        ("Acme", "organisation", "org/acme"),
        ("Alex Rivera", "person", "org/acme"),
    ]


def test_seeds_a_jsonl_file(context: Context, tmp_path: Path) -> None:
    path = tmp_path / "entities.jsonl"
    rows = [
        {"name": "Berlin", "type": "city", "scope": "org/acme"},
        {"name": "Globex", "type": "organisation", "scope": "org/globex", "aliases": ["GX"]},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))

    out, _ = _seed(str(path), "--context", context.slug, "--format", "jsonl")

    assert "2 created" in out
    assert Entity.objects.get(context=context, name="Globex").aliases == ["GX"]


def test_failed_rows_are_listed_and_exit_nonzero(context: Context, tmp_path: Path) -> None:
    path = tmp_path / "mixed.csv"
    path.write_text("name,scope\nGood,org/acme\nBad,not a scope\n")
    err = StringIO()

    with pytest.raises(CommandError, match="1 of 2 rows failed"):
        call_command(
            "seed_entities", str(path), "--context", context.slug, stderr=err, stdout=StringIO()
        )

    assert "row 2 (line 3): invalid scope" in err.getvalue()
    assert Entity.objects.filter(context=context, name="Good").exists()


def test_unreadable_file_is_refused(context: Context, tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("title\nhello\n")

    with pytest.raises(CommandError, match="'name' column"):
        _seed(str(path), "--context", context.slug)


def test_missing_context_needs_create_context(db: None, tmp_path: Path) -> None:
    path = tmp_path / "one.csv"
    path.write_text("name,scope\nAcme,org/acme\n")

    with pytest.raises(CommandError, match="--create-context"):
        _seed(str(path), "--context", "fresh")
    out, _ = _seed(str(path), "--context", "fresh", "--create-context")

    assert "1 created" in out
    assert Context.objects.get(slug="fresh").predicates.exists()  # standard registry installed


def test_missing_file_is_an_error(context: Context) -> None:
    with pytest.raises(CommandError, match="no such file"):
        _seed("/nonexistent/file.csv", "--context", context.slug)
