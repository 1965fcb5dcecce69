"""``manage.py import_documents PATH… --context SLUG --scope S``: bulk document import."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memory.domain.access import system_access
from memory.kernel.errors import DomainError
from memory.kernel.wording import counted
from memory.models import Context
from memory.services.ingest.documents import document_create
from memory.services.vectors import DrainReport, embedding_backlog, embeddings_drain

TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".rst")
POLL_SECONDS = 1.0


def _documents(path: Path) -> Iterator[dict[str, Any]]:
    """Documents in a file or folder: text files one each, JSONL one per line."""
    if path.is_dir():
        for child in sorted(p for p in path.rglob("*") if p.is_file()):
            if child.suffix.lower() in (*TEXT_SUFFIXES, ".jsonl"):
                yield from _documents(child)
        return
    if path.suffix.lower() == ".jsonl":
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    yield {"error": f"{path}:{number}: not JSON ({exc.msg})"}
                    continue
                if not isinstance(row, dict):
                    yield {"error": f"{path}:{number}: expected an object"}
                    continue
                ident = row.get("_id", row.get("id"))
                yield {
                    "title": str(row.get("title") or ""),
                    "text": str(row.get("text") or ""),
                    "scope": row.get("scope"),
                    "source": str(
                        row.get("source") or (f"{path.name}#{ident}" if ident else path.name)
                    ),
                    "metadata": {"id": str(ident)} if ident is not None else {},
                    "where": f"{path}:{number}",
                }
        return
    text = path.read_text(encoding="utf-8", errors="replace")
    yield {
        "title": _heading(text) or path.stem.replace("_", " ").replace("-", " "),
        "text": text,
        "source": str(path),
        "where": str(path),
    }


def _heading(text: str) -> str:
    """A Markdown file's title: its first level-one ``# heading``, if it has one."""
    for line in text.splitlines():
        if line.startswith("# ") and line[2:].strip():
            return line[2:].strip().strip("#").strip()[:300]
    return ""


class Command(BaseCommand):
    help = (
        "Import documents: text/markdown files (one document each, titled by its first "
        "'# heading', else by file name), "
        "folders of them, or JSONL files with {title, text, scope?, _id?} per line (the BEIR "
        "corpus layout). Each document is chunked, indexed for BM25 and given keywords in "
        "its own transaction; vectors are computed by the task worker, or here with --wait."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", help="files or folders")
        parser.add_argument("--context", required=True, help="context slug")
        parser.add_argument("--scope", required=True, help="scope for documents that name none")
        parser.add_argument(
            "--wait",
            action="store_true",
            help="embed the backlog now, with a progress bar until it is zero",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        context = Context.objects.filter(slug=options["context"]).first()
        if context is None:
            raise CommandError(f"no context {options['context']!r}")
        paths = [Path(p) for p in options["paths"]]
        for path in paths:
            if not path.exists():
                raise CommandError(f"no such file or folder: {path}")
        access = system_access(context)
        items = [item for path in paths for item in _documents(path)]
        created: list[int] = []
        failed: list[str] = []
        out = self.stderr._out  # tqdm redraws with "\r"; Django's wrapper would add newlines
        for item in tqdm(items, desc="importing", unit="doc", file=out):
            if "error" in item:
                failed.append(item["error"])
                continue
            try:
                document = document_create(
                    access=access,
                    title=item["title"],
                    text=item["text"],
                    scope=item.get("scope") or options["scope"],
                    source=item["source"][:300],
                    metadata=item.get("metadata") or {},
                    embed_later=options["wait"],
                )
            except DomainError as exc:
                failed.append(f"{item['where']}: {getattr(exc, 'message', str(exc))}")
                continue
            created.append(document.pk)
        if options["wait"] and created:
            try:
                _drain_with_progress(context, out)
            except DomainError as exc:  # the embedder is down; the documents are stored
                raise CommandError(
                    f"{counted(len(created), 'document')} imported into {context.slug}, but their "
                    f"vectors could not be computed ({exc.message}); once the embedder "
                    f"is back, run: manage.py reembed --context {context.slug}"
                ) from exc
        self.stdout.write(
            f"{counted(len(created), 'document')} imported into {context.slug}, "
            f"{len(failed)} failed"
        )
        for message in failed:
            self.stderr.write(message)
        if failed:
            raise CommandError(f"{len(failed)} of {len(items)} documents failed")


def _drain_with_progress(context: Context, out: Any) -> None:
    """Embed the context's backlog here, showing it fall to zero. When the task worker's
    drain is already at it (the lock is taken), follow the backlog until it is done."""
    total = sum(embedding_backlog(context=context).values())
    with tqdm(total=total, desc="embedding backlog", unit="row", file=out) as bar:

        def progress(report: DrainReport) -> None:
            bar.update(min(report.total, total) - bar.n)

        while True:
            report = embeddings_drain(context=context, on_progress=progress)
            left = sum(embedding_backlog(context=context).values())
            bar.total = max(total, bar.n + left)
            bar.update(max(bar.total - left - bar.n, 0))
            if not left:
                return
            if report.skipped:
                time.sleep(POLL_SECONDS)
