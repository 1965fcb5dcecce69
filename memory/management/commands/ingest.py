"""``manage.py ingest FILE --context SLUG``: ingest conversation turns from a JSONL file.

One JSON object per line: ``{"text": "...", "scope": "org/acme", "infer": "llm",
"triples": {...}, "source": "..."}`` (``scope``, ``infer`` and ``source`` fall back to the
options; ``infer`` defaults to ``triples`` for a line with triples, else ``llm``). Each
line becomes a run, executed here one after the other (or queued for ``db_worker`` with
``--enqueue``), through the same services as ``POST memories``.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memory.domain.access import system_access
from memory.kernel.errors import DomainError
from memory.models import Context, RunOutcome
from memory.services.contexts import context_create
from memory.services.ingest.acceptance import INFER_MODES
from memory.services.ingest.run import (
    run_create,
    run_enqueue,
    run_execute,
    runs_recover_stale,
)


class Command(BaseCommand):
    help = (
        "Ingest conversation turns from a JSONL file (one {text, scope, infer, triples, "
        "source} object per line), one run per line, with a progress bar. Exits non-zero "
        "if a line was refused or a run failed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="JSONL file ('-' for standard input)")
        parser.add_argument("--context", required=True, help="context slug")
        parser.add_argument("--scope", help="scope for lines that name none")
        parser.add_argument("--infer", choices=INFER_MODES, help="mode for lines that name none")
        parser.add_argument("--source", default="", help="source for lines that name none")
        parser.add_argument(
            "--enqueue", action="store_true", help="queue the runs for db_worker instead"
        )
        parser.add_argument(
            "--create-context", action="store_true", help="create the context if it is missing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        context = _context(options["context"], create=options["create_context"])
        access = system_access(context)
        runs_recover_stale(context=context)
        lines = _read(options["file"])
        outcomes: Counter[str] = Counter()
        problems: list[str] = []
        total = sum(1 for line in lines if line.strip())
        # The stream under Django's OutputWrapper, so tqdm's "\r" redraws stay on one line.
        bar = tqdm(total=total, desc="ingesting", unit="turn", file=self.stderr._out)
        try:
            for number, turn in _turns(lines):
                outcome = self._one(access, number, turn, options, problems)
                outcomes[outcome] += 1
                bar.update(1)
        finally:
            bar.close()
        self.stdout.write(
            f"{total} turns into {context.slug}: "
            + ", ".join(f"{n} {k}" for k, n in sorted(outcomes.items()))
        )
        for problem in problems:
            self.stderr.write(problem)
        if outcomes["refused"] or outcomes[RunOutcome.FAILED]:
            raise CommandError(
                f"{outcomes['refused']} lines refused, {outcomes[RunOutcome.FAILED]} runs failed"
            )

    def _one(
        self,
        access: Any,
        number: int,
        turn: dict[str, Any] | str,
        options: dict[str, Any],
        problems: list[str],
    ) -> str:
        if isinstance(turn, str):
            problems.append(f"line {number}: {turn}")
            return "refused"
        scope = turn.get("scope") or options["scope"]
        if not isinstance(scope, str) or not scope:
            problems.append(f"line {number}: no scope (give one on the line or --scope)")
            return "refused"
        triples = turn.get("triples")
        infer = turn.get("infer") or options["infer"] or ("triples" if triples else "llm")
        try:
            run = run_create(
                access=access,
                text=str(turn.get("text") or ""),
                scope=scope,
                infer=str(infer),
                triples=triples,
                source=str(turn.get("source") or options["source"] or f"line {number}"),
            )
        except DomainError as exc:
            problems.append(f"line {number}: {getattr(exc, 'message', str(exc))}")
            return "refused"
        if options["enqueue"]:
            run_enqueue(run=run)
            return "queued"
        run = run_execute(run_id=run.pk)
        if run.outcome == RunOutcome.FAILED:
            problems.append(f"line {number}: run {run.pk} failed: {run.error}")
        return str(run.outcome)


def _turns(lines: list[str]) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """(line number, the turn or why it cannot be read), blank lines skipped."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            turn = json.loads(line)
        except ValueError as exc:
            yield number, f"not JSON ({exc})"
            continue
        if not isinstance(turn, dict):
            yield number, "not a JSON object"
            continue
        yield number, turn


def _context(slug: str, *, create: bool) -> Context:
    context = Context.objects.filter(slug=slug).first()
    if context is not None:
        return context
    if not create:
        raise CommandError(f"no context {slug!r}; pass --create-context to create it")
    try:
        return context_create(slug=slug)
    except DomainError as exc:
        raise CommandError(f"cannot create context {slug!r}: {exc.message}") from exc


def _read(name: str) -> list[str]:
    if name == "-":
        return sys.stdin.read().splitlines()
    path = Path(name)
    if not path.is_file():
        raise CommandError(f"no such file: {name}")
    return path.read_text(encoding="utf-8", errors="replace").splitlines()
