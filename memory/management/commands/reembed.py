"""``manage.py reembed [--context SLUG] [--target T …] [--missing-only | --all] [--batch-size N]``:
embed the rows whose vector is missing (a worker died before writing it, the embedder was
down), or every row after a switch of ``MEMORY_EMBED_MODEL``."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memory.infra.embeddings import embedding_model_id
from memory.kernel.errors import DomainError
from memory.models import Context
from memory.services.vectors import (
    EMBED_BATCH,
    MAX_BATCH,
    VECTOR_TARGETS,
    vectors_refill,
    vectors_to_embed,
)


class Command(BaseCommand):
    help = (
        "Embed chunks, turns, facts, entities and keywords whose vector is missing (the default), "
        "or all of them with --all (after changing MEMORY_EMBED_MODEL), in batches through "
        "the embedding model, with a progress bar. Safe to run again: with --missing-only a "
        "second run finds nothing to do, and after a failure it carries on where it stopped."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--context", help="context slug (default: every context)")
        parser.add_argument(
            "--target",
            action="append",
            choices=VECTOR_TARGETS,
            help="what to embed; repeat for more (default: all five)",
        )
        which = parser.add_mutually_exclusive_group()
        which.add_argument(
            "--missing-only",
            dest="all",
            action="store_false",
            help="only rows without a vector (the default)",
        )
        which.add_argument(
            "--all", dest="all", action="store_true", help="every row, vectors or not"
        )
        parser.set_defaults(all=False)
        parser.add_argument(
            "--batch-size",
            type=int,
            default=EMBED_BATCH,
            help=f"rows per embedding call and commit (default {EMBED_BATCH})",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        context = _context(options["context"])
        if not 1 <= options["batch_size"] <= MAX_BATCH:
            raise CommandError(f"--batch-size must be between 1 and {MAX_BATCH}")
        only_missing = not options["all"]
        where = context.slug if context is not None else "every context"
        self.stdout.write(
            f"embedding {'missing' if only_missing else 'all'} vectors in {where} "
            f"with {embedding_model_id()}"
        )
        total = 0
        for target in dict.fromkeys(options["target"] or VECTOR_TARGETS):
            total += self._refill(target, context, only_missing, options["batch_size"])
        self.stdout.write(f"{total} vectors written")

    def _refill(
        self, target: Any, context: Context | None, only_missing: bool, batch_size: int
    ) -> int:
        rows = vectors_to_embed(target=target, context=context, only_missing=only_missing)
        pending = rows.count()
        if not pending:
            self.stdout.write(f"{target}: nothing to embed")
            return 0
        # The stream under Django's OutputWrapper: tqdm redraws its line with "\r".
        bar = tqdm(total=pending, desc=target, unit="row", file=self.stderr._out)
        written = 0

        def progress(done: int) -> None:
            nonlocal written
            bar.update(done - written)
            written = done

        try:
            vectors_refill(
                target=target,
                context=context,
                only_missing=only_missing,
                batch_size=batch_size,
                on_progress=progress,
            )
        except (DomainError, ValueError) as exc:  # the embedder down or misconfigured
            reason = exc.message if isinstance(exc, DomainError) else str(exc)
            again = "run the command again" + (
                " to carry on where it stopped" if only_missing else ""
            )
            raise CommandError(
                f"{target}: {written} of {pending} embedded, then: {reason}; {again}"
            ) from exc
        finally:
            bar.close()
        self.stdout.write(f"{target}: {written} embedded")
        return written


def _context(slug: str | None) -> Context | None:
    if slug is None:
        return None
    context = Context.objects.filter(slug=slug).first()
    if context is None:
        raise CommandError(f"no context {slug!r}")
    return context
