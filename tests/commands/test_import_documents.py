from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from memory.models import Chunk, Context, Document, Keyword

pytestmark = pytest.mark.django_db


def _import(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("import_documents", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_imports_text_files_folders_and_jsonl(context: Context, tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "refund_policy.md").write_text("Refunds within 30 days.\n")
    (tmp_path / "notes" / "skip.bin").write_bytes(b"\x00\x01")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        json.dumps({"_id": "7", "title": "Shipping", "text": "Ships in two days."})
        + "\n\n"
        + json.dumps({"title": "HR", "text": "Leave policy.", "scope": "org/acme/hr"})
        + "\n"
    )

    out, err = _import(
        str(tmp_path / "notes"), str(corpus), "--context", context.slug, "--scope", "org/acme"
    )

    assert "3 documents imported into acme-test, 0 failed" in out
    assert "3/3" in err  # the progress bar's last state
    documents = Document.objects.order_by("id")
    assert [(d.title, d.scope, d.source, d.metadata) for d in documents] == [
        ("refund policy", "org/acme", str(tmp_path / "notes" / "refund_policy.md"), {}),
        ("Shipping", "org/acme", "corpus.jsonl#7", {"id": "7"}),
        ("HR", "org/acme/hr", "corpus.jsonl", {}),
    ]
    assert Chunk.objects.count() == 3
    assert not Chunk.objects.filter(embedding__isnull=False).exists()  # the worker's job


def test_wait_computes_chunk_and_keyword_vectors(context: Context, tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("Refunds are fast. Shipping is free.")

    _, err = _import(str(path), "--context", context.slug, "--scope", "s", "--wait")

    assert "embedding" in err
    assert not Chunk.objects.filter(embedding__isnull=True).exists()
    assert Keyword.objects.exists()
    assert not Keyword.objects.filter(embedding__isnull=True).exists()


def test_wait_with_the_embedder_down_keeps_the_documents_and_says_how_to_embed_them(
    context: Context, tmp_path: Path, settings: Any
) -> None:
    path = tmp_path / "a.txt"
    path.write_text("Refunds are fast. Shipping is free.")
    settings.MEMORY_EMBED_MODEL = "openai:unreachable-import-model"
    settings.OPENAI_BASE_URL = "http://127.0.0.1:9/v1"  # discard port: nothing listens
    settings.MEMORY_LLM_MAX_RETRIES = 0

    with pytest.raises(CommandError, match=r"run: manage\.py reembed --context acme-test"):
        _import(str(path), "--context", context.slug, "--scope", "s", "--wait")
    assert Chunk.objects.filter(embedding__isnull=True).count() == 1  # stored, not embedded


def test_bad_rows_are_reported_and_fail_the_command(context: Context, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"text": "fine"}\nnot json\n{"text": ""}\n[1]\n')

    with pytest.raises(CommandError, match="3 of 4 documents failed"):
        _import(str(corpus), "--context", context.slug, "--scope", "s")
    assert Document.objects.count() == 1


def test_unknown_context_and_missing_path(context: Context, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="no context"):
        _import(str(tmp_path), "--context", "nope", "--scope", "s")
    with pytest.raises(CommandError, match="no such file"):
        _import(str(tmp_path / "missing.txt"), "--context", context.slug, "--scope", "s")


def test_a_markdown_file_is_titled_by_its_heading_and_one_document_is_one(
    context: Context, tmp_path: Path
) -> None:
    (tmp_path / "onboarding_v2.md").write_text(
        "Intro line.\n\n# Onboarding handbook\n\nExpenses are filed monthly.\n## Later\n"
    )

    out, _ = _import(
        str(tmp_path / "onboarding_v2.md"), "--context", context.slug, "--scope", "org/acme"
    )

    assert "1 document imported into acme-test, 0 failed" in out
    assert Document.objects.get().title == "Onboarding handbook"
