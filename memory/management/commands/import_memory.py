"""``manage.py import_memory FILE --context SLUG [--create] [--format memory|mem0|graphiti]``:
read an export (or a mem0 / Graphiti export) into an empty context."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.domain.access import system_access
from memory.infra.process import process_settle
from memory.kernel.errors import DomainError
from memory.models import Context
from memory.services.contexts import context_create
from memory.services.transfer.importer import memory_import
from memory.services.transfer.peers import foreign_lines


def _file_lines(path: Path) -> Iterator[str]:
    with path.open(encoding="utf-8") as lines:
        yield from lines


class Command(BaseCommand):
    help = "Import a memory export into an empty context (ids are new; nothing else changes)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="the export file (JSON lines; '-' is not supported)")
        parser.add_argument("--context", required=True, help="the target context's slug")
        parser.add_argument(
            "--create", action="store_true", help="create the context if it does not exist"
        )
        parser.add_argument("--format", choices=["memory", "mem0", "graphiti"], default="memory")
        parser.add_argument(
            "--keep-settings",
            action="store_true",
            help="keep the target context's settings instead of the export's",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["path"])
        if not path.is_file():
            raise CommandError(f"no file {path}")
        slug = options["context"]
        context = Context.objects.filter(slug=slug).first()
        if context is None and options["create"]:
            context = context_create(slug=slug, name=slug)
        if context is None:
            raise CommandError(f"no context {slug!r} (use --create)")
        if options["format"] == "memory":
            lines: Iterator[str] = _file_lines(path)
        else:
            lines = foreign_lines(path.read_text(encoding="utf-8"), options["format"])

        def progress(done: int, total: int) -> None:
            self.stderr.write(f"\rread {done:,} lines", ending="")

        process_settle()  # the import's code is loaded: see memory/infra/process.py
        try:
            report = memory_import(
                access=system_access(context),
                lines=lines,
                on_progress=progress,
                apply_settings=not options["keep_settings"],
            )
        except DomainError as exc:
            raise CommandError(exc.message) from None
        self.stderr.write("")
        self.stdout.write(json.dumps({"counts": report.counts, "seconds": report.seconds}))
