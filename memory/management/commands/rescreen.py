"""``manage.py rescreen [--context SLUG] [--dry-run]``: screen every stored turn and chunk
again with the current rules (after the screening improved) and report what it redacted
and flagged; the rewritten rows lose their vector until the embedding worker embeds the
redacted text."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.models import Context
from memory.services.ingest.rescreen import stored_text_rescreen


class Command(BaseCommand):
    help = (
        "Screen stored turns and document chunks again with the current secret and "
        "instruction rules: redact the secrets found since (text, postings, the texts "
        "behind embeddings), record new flags, and report what changed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--context", help="context slug (default: every context)")
        parser.add_argument(
            "--dry-run", action="store_true", help="report what would change; write nothing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        context = None
        if options["context"]:
            context = Context.objects.filter(slug=options["context"]).first()
            if context is None:
                raise CommandError(f"no context {options['context']!r}")
        done = stored_text_rescreen(context=context, dry_run=options["dry_run"])
        verb = "would redact" if options["dry_run"] else "redacted"
        self.stdout.write(
            f"{verb} {done.secrets} secret(s): {len(done.turns_redacted)} turn(s) "
            f"{_ids(done.turns_redacted)}, {len(done.chunks_redacted)} chunk(s) "
            f"{_ids(done.chunks_redacted)}, {len(done.documents_redacted)} document(s) "
            f"{_ids(done.documents_redacted)}; newly flagged without a secret: "
            f"{len(done.turns_flagged)} turn(s) {_ids(done.turns_flagged)}"
        )


def _ids(ids: list[int]) -> str:
    shown = ", ".join(str(i) for i in ids[:20])
    return f"[{shown}{', …' if len(ids) > 20 else ''}]"
