"""``manage.py export_memory --context SLUG [--output FILE]``: a whole memory as JSON lines."""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Any, TextIO

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.domain.access import system_access
from memory.models import Context
from memory.services.transfer.export import memory_export_lines


class Command(BaseCommand):
    help = "Export one context (registry, entities, facts, turns, documents, conflicts) as JSONL."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--context", required=True, help="the context's slug")
        parser.add_argument("--output", "-o", help="file to write (default: standard output)")

    def handle(self, *args: Any, **options: Any) -> None:
        context = Context.objects.filter(slug=options["context"]).first()
        if context is None:
            raise CommandError(f"no context {options['context']!r}")
        started = time.perf_counter()
        lines = 0
        with contextlib.ExitStack() as stack:
            out: TextIO = sys.stdout
            if options["output"]:
                out = stack.enter_context(open(options["output"], "w", encoding="utf-8"))
            for line in memory_export_lines(access=system_access(context)):
                out.write(line)
                lines += 1
        if options["output"]:
            seconds = time.perf_counter() - started
            self.stderr.write(f"exported {lines:,} lines in {seconds:.1f} s to {options['output']}")
