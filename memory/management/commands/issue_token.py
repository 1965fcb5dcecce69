"""``manage.py issue_token USER --context C --grant 'read,write:org/acme/*'``.

Prints only the raw token on standard output (so ``TOKEN=$(manage.py issue_token …)``
works); everything else goes to standard error. The token is shown this once: only its
digest is stored.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from memory.kernel.scopes import ScopeError
from memory.models import Context, ContextMembership, Role
from memory.services.tokens import token_issue


class Command(BaseCommand):
    help = "Issue an API token for USER in a context, with scope grants; prints the token."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("user", help="username")
        parser.add_argument("--context", required=True, help="context slug")
        parser.add_argument(
            "--grant",
            action="append",
            required=True,
            help="scope grant like 'read:*' or 'read,write:org/acme/*' (repeatable)",
        )
        parser.add_argument(
            "--role",
            choices=Role.values,
            help="the user's role in the context when it has no membership yet (default viewer);"
            " changes an existing membership's role when given",
        )
        parser.add_argument("--name", default="", help="a label for the token")
        parser.add_argument(
            "--trust",
            choices=["trusted", "untrusted"],
            default="trusted",
            help="untrusted: the facts it writes wait for a curator's review (the context's "
            "fact_review) and it never acts above viewer (default trusted)",
        )
        parser.add_argument(
            "--create-user", action="store_true", help="create the user (no password) if missing"
        )

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        context = Context.objects.filter(slug=options["context"]).first()
        if context is None:
            raise CommandError(f"no context {options['context']!r}")
        user = _user(options["user"], create=options["create_user"])
        self._ensure_membership(user, context, options["role"])
        try:
            issued = token_issue(
                user=user,
                context=context,
                grants=options["grant"],
                name=options["name"],
                trust=options["trust"],
            )
        except ScopeError as exc:
            raise CommandError(str(exc)) from exc
        self.stderr.write(
            f"{issued.token.trust} token {issued.token.prefix}… for {user.get_username()} in "
            f"{context.slug} with grants {', '.join(issued.token.grants)} (shown once)"
        )
        self.stdout.write(issued.raw)

    def _ensure_membership(self, user: Any, context: Context, role: str | None) -> None:
        membership, created = ContextMembership.objects.get_or_create(
            user=user, context=context, defaults={"role": role or Role.VIEWER}
        )
        if created:
            self.stderr.write(f"added {user.get_username()} to {context.slug} as {membership.role}")
        elif role and membership.role != role:
            self.stderr.write(f"role of {user.get_username()}: {membership.role} -> {role}")
            membership.role = role
            membership.save(update_fields=["role"])


def _user(username: str, *, create: bool) -> Any:
    users = get_user_model()
    user = users.objects.filter(username=username).first()
    if user is not None:
        return user
    if not create:
        raise CommandError(f"no user {username!r}; pass --create-user to create it")
    # A token-only principal (an agent): it cannot log in to the dashboard.
    return users.objects.create_user(username=username, password=None)
