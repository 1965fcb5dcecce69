"""``manage.py seed_entities FILE --context SLUG``: seed canonical entities from CSV/JSONL."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memory.domain.access import system_access
from memory.kernel.errors import DomainError
from memory.models import Context
from memory.services.contexts import context_create
from memory.services.transfer.seeding import ImportReport, entities_import


class Command(BaseCommand):
    help = (
        "Seed canonical entities from a CSV (name,type,scope,aliases,identifiers,attributes) "
        "or JSONL file. Each row is upserted on its own; failed rows are listed and make "
        "the command exit non-zero."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="CSV or JSONL file ('-' for standard input)")
        parser.add_argument("--context", required=True, help="context slug")
        parser.add_argument("--scope", help="scope for rows that name none")
        parser.add_argument("--format", choices=["csv", "jsonl"], help="default: sniffed")
        parser.add_argument(
            "--create-context", action="store_true", help="create the context if it is missing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        context = _context(options["context"], create=options["create_context"])
        content = _read(options["file"])
        bars: list[tqdm] = []

        def progress(done: int, total: int) -> None:
            if not bars:  # created on the first row, when the total is known
                # The stream under Django's OutputWrapper: tqdm redraws with "\r", which
                # the wrapper would otherwise end with a newline on every update.
                bars.append(tqdm(total=total, desc="seeding", unit="row", file=self.stderr._out))
            bars[0].update(done - bars[0].n)

        try:
            report = entities_import(
                access=system_access(context),
                content=content,
                format=options["format"],
                scope_default=options["scope"],
                on_progress=progress,
            )
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        finally:
            for bar in bars:
                bar.close()
        self._print_report(report, context)
        if report.failed:
            raise CommandError(f"{report.failed} of {report.total} rows failed")

    def _print_report(self, report: ImportReport, context: Context) -> None:
        self.stdout.write(
            f"{report.total} rows into {context.slug}: {report.created} created, "
            f"{report.matched} matched, {report.failed} failed"
        )
        for note in report.notes:
            self.stdout.write(f"note: {note}")
        for row in report.errors:
            self.stderr.write(f"row {row.row} (line {row.line}): {row.message}")


def _context(slug: str, *, create: bool) -> Context:
    context = Context.objects.filter(slug=slug).first()
    if context is not None:
        return context
    if not create:
        raise CommandError(f"no context {slug!r}; pass --create-context to create it")
    try:
        return context_create(slug=slug)
    except ValidationError as exc:  # an invalid slug
        raise CommandError(f"cannot create context {slug!r}: {'; '.join(exc.messages)}") from exc


def _read(name: str) -> bytes:
    if name == "-":
        return sys.stdin.buffer.read()
    path = Path(name)
    if not path.is_file():
        raise CommandError(f"no such file: {name}")
    return path.read_bytes()
