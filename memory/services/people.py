"""People and their roles: dashboard logins, agent users for tokens, memberships.

Used by ``manage.py adduser`` and the staff page "Contexts and people"; every change to a
membership is audited in its context.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction

from memory.kernel.errors import Conflict, NotFound, ValidationFailed
from memory.models import Context, ContextMembership, Role
from memory.services.audit import audit_record

USERNAME = re.compile(r"^[\w.@+-]{1,150}$")
ALL_SCOPES = ["read,write:*"]


@dataclass(frozen=True)
class NewPerson:
    user: Any
    password: str  # the generated one, shown once; "" when given or for an agent


def person_create(
    *, username: str, password: str | None = None, agent: bool = False, staff: bool = False
) -> NewPerson:
    """A user who logs in with ``password`` (generated when None), or an agent: a user
    for API tokens that has no usable password and so cannot log in."""
    if not USERNAME.match(username):
        raise ValidationFailed(
            "a username is 1-150 letters, digits and @.+-_", code="invalid_username"
        )
    users = get_user_model()
    if users.objects.filter(username=username).exists():
        raise Conflict(f"user {username!r} already exists", code="user_exists")
    if agent:
        if password or staff:
            raise ValidationFailed(
                "an agent has no password and no staff rights", code="invalid_agent"
            )
        return NewPerson(users.objects.create_user(username=username, password=None), "")
    generated = "" if password else secrets.token_urlsafe(15)
    chosen = password or generated
    candidate = users(username=username)
    try:
        validate_password(chosen, candidate)
    except ValidationError as exc:
        raise ValidationFailed(
            "the password is too weak", code="weak_password", details=exc.messages
        ) from exc
    user = users.objects.create_user(username=username, password=chosen, is_staff=staff)
    return NewPerson(user, generated)


def can_log_in(user: Any) -> bool:
    return bool(user.is_active and user.has_usable_password())


@transaction.atomic
def membership_set(
    *, context: Context, user: Any, role: str, actor: Any = None
) -> ContextMembership:
    """Give ``user`` ``role`` in ``context`` (all scopes), or change the role they have."""
    if role not in Role.values:
        raise ValidationFailed(f"role must be one of {', '.join(Role.values)}", code="invalid_role")
    membership = (
        ContextMembership.objects.select_for_update().filter(context=context, user=user).first()
    )
    before = membership.role if membership else None
    if membership is None:
        membership = ContextMembership.objects.create(
            context=context, user=user, role=role, grants=ALL_SCOPES
        )
    elif membership.role != role:
        _keep_an_admin(context, leaving=membership, new_role=role)
        membership.role = role
        membership.save(update_fields=["role"])
    else:
        return membership
    audit_record(
        context=context,
        actor=actor,
        action="membership_set",
        target_type="user",
        target_id=user.get_username(),
        summary=f"{user.get_username()}: {before or 'not a member'} -> {role}",
        before={"role": before},
        after={"role": role},
    )
    return membership


@transaction.atomic
def membership_remove(*, context: Context, user: Any, actor: Any = None) -> None:
    membership = (
        ContextMembership.objects.select_for_update().filter(context=context, user=user).first()
    )
    if membership is None:
        raise NotFound(f"{user.get_username()} is not a member of {context.slug}")
    _keep_an_admin(context, leaving=membership, new_role=None)
    membership.delete()
    audit_record(
        context=context,
        actor=actor,
        action="membership_remove",
        target_type="user",
        target_id=user.get_username(),
        summary=f"{user.get_username()} removed (was {membership.role})",
        before={"role": membership.role},
    )


def _keep_an_admin(context: Context, *, leaving: ContextMembership, new_role: str | None) -> None:
    """A context keeps at least one admin who can log in: else nobody could manage it
    from the dashboard."""
    if leaving.role != Role.ADMIN or new_role == Role.ADMIN:
        return
    admins = ContextMembership.objects.select_for_update().filter(context=context, role=Role.ADMIN)
    others = [m for m in admins.exclude(pk=leaving.pk).select_related("user") if can_log_in(m.user)]
    if not others and can_log_in(leaving.user):
        raise Conflict(
            f"{leaving.user.get_username()} is the last admin of {context.slug} who can log in; "
            "make someone else admin first",
            code="last_admin",
        )
