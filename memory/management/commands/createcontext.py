"""``manage.py createcontext SLUG [--name N] [--description D] [--admin USER]``: a new
memory context with the standard predicate registry; ``--admin`` makes an existing user
its first admin."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.kernel.errors import DomainError
from memory.services.contexts import context_create


class Command(BaseCommand):
    help = "Create a memory context (its predicate registry seeded from the standard library)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="the context's identifier in URLs, e.g. acme")
        parser.add_argument("--name", default="", help="a display name (default: the slug)")
        parser.add_argument("--description", default="")
        parser.add_argument("--admin", help="an existing user to make the context's first admin")

    def handle(self, *args: Any, **options: Any) -> None:
        owner = None
        if options["admin"]:
            owner = get_user_model().objects.filter(username=options["admin"]).first()
            if owner is None:
                raise CommandError(f"no user {options['admin']!r} (manage.py adduser creates one)")
        try:
            context = context_create(
                slug=options["slug"],
                name=options["name"],
                description=options["description"],
                owner=owner,
            )
        except DomainError as exc:
            raise CommandError(f"{exc.message} {exc.details or ''}".strip()) from exc
        self.stdout.write(f"created context {context.slug} ({context.name})")
