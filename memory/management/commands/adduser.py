"""``manage.py adduser NAME --context C --role curator|admin|viewer``: a person who logs
in to the dashboard, or with ``--agent`` a user for API tokens that cannot log in.

The password is asked for twice on a terminal, read from standard input with
``--password-stdin``, or generated and printed once (``--generate-password``, also the
default when standard input is not a terminal). An existing user is given the role in the
context (or has it changed) and keeps their password.
"""

from __future__ import annotations

import getpass
import sys
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from memory.kernel.errors import DomainError
from memory.models import Context, Role
from memory.services.people import can_log_in, membership_set, person_create


class Command(BaseCommand):
    help = "Add a dashboard user or an agent user (for tokens) to a context with a role."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--context", required=True, help="context slug")
        parser.add_argument("--role", choices=Role.values, default=Role.VIEWER)
        parser.add_argument(
            "--agent", action="store_true", help="a user for API tokens: no password, no login"
        )
        parser.add_argument(
            "--staff", action="store_true", help="may create contexts and manage people"
        )
        how = parser.add_mutually_exclusive_group()
        how.add_argument("--password-stdin", action="store_true", help="read the password")
        how.add_argument(
            "--generate-password", action="store_true", help="generate one and print it once"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        context = Context.objects.filter(slug=options["context"]).first()
        if context is None:
            raise CommandError(f"no context {options['context']!r} (manage.py createcontext)")
        existing = get_user_model().objects.filter(username=options["username"]).first()
        try:
            with transaction.atomic():
                if existing is None:
                    password = None if options["agent"] else self._password(options)
                    new = person_create(
                        username=options["username"],
                        password=password,
                        agent=options["agent"],
                        staff=options["staff"],
                    )
                    user, shown = new.user, new.password
                else:
                    user, shown = existing, ""
                    if options["staff"] and not user.is_staff:
                        user.is_staff = True
                        user.save(update_fields=["is_staff"])
                membership_set(context=context, user=user, role=options["role"])
        except DomainError as exc:
            raise CommandError(f"{exc.message} {exc.details or ''}".strip()) from exc
        kind = "dashboard user" if can_log_in(user) else "agent (cannot log in)"
        verb = "added" if existing is None else "updated"
        self.stderr.write(
            f"{verb} {kind} {user.get_username()}: {options['role']} in {context.slug}"
        )
        if shown:
            self.stderr.write("generated password (shown once):")
            self.stdout.write(shown)

    def _password(self, options: dict[str, Any]) -> str | None:
        """None: generate one."""
        if options["generate_password"]:
            return None
        if options["password_stdin"]:
            password = sys.stdin.readline().rstrip("\n")
            if not password:
                raise CommandError("no password on standard input")
            return password
        if not sys.stdin.isatty():
            return None
        first = getpass.getpass("Password: ")
        if first != getpass.getpass("Password (again): "):
            raise CommandError("the passwords differ")
        return first or None
