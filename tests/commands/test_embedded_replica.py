"""``manage.py embedded_replica``: its refusals and its listing. Starting and stopping real
standbys is what tests/replicas does (through the same functions) for every session."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command


def _run(*args: str) -> str:
    out = StringIO()
    call_command("embedded_replica", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_names_are_checked_before_anything_runs() -> None:
    with pytest.raises(CommandError, match="lower-case letters"):
        _run("start", "../escape")


def test_refused_when_the_primary_is_not_the_embedded_server(monkeypatch: Any) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://app@db.example/memorydesk")
    with pytest.raises(CommandError, match="DATABASE_URL is set"):
        _run("start", "replica-1")


def test_status_and_stop_with_no_replicas(settings: Any, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    settings.VAR_DIR = tmp_path
    assert "no replicas" in _run("status")
    assert _run("stop") == ""
    (tmp_path / "replicas" / "old").mkdir(parents=True)  # a folder without a cluster
    assert _run("status").strip() == "old: stopped"
    assert _run("stop", "old").strip() == "old: was not running"
