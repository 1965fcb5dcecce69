"""Who may do what in a context: role (viewer < curator < admin) and scope grants."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory.kernel.errors import NotFound, PermissionDenied
from memory.kernel.scopes import Grants
from memory.models import ApiToken, Context, ContextMembership, Role, TokenTrust
from memory.models.access import ROLE_RANK

DEFAULT_MEMBER_GRANTS = ["read,write:*"]


@dataclass(frozen=True)
class ContextAccess:
    context: Context
    user: Any  # settings.AUTH_USER_MODEL instance, or None for system work
    role: Role
    grants: Grants
    # False for an untrusted token: what it writes may wait for review
    # (services/facts/trust.py) and it never acts above a viewer.
    trusted: bool = True

    @property
    def actor_label(self) -> str:
        return getattr(self.user, "username", "") or "system"

    def has_role(self, minimum: Role) -> bool:
        if not self.trusted and ROLE_RANK[minimum] > ROLE_RANK[Role.VIEWER]:
            return False
        return ROLE_RANK[self.role] >= ROLE_RANK[minimum]

    def require_role(self, minimum: Role) -> None:
        if not self.trusted and not self.has_role(minimum):
            raise PermissionDenied(
                f"this needs the {minimum} role in context {self.context.slug!r}; an untrusted "
                "token never acts above viewer (use a trusted token or the dashboard)",
                code="role_required",
            )
        if not self.has_role(minimum):
            raise PermissionDenied(
                f"this needs the {minimum} role in context {self.context.slug!r}; "
                f"you have {self.role}",
                code="role_required",
            )

    def require_write(self, scope: str) -> None:
        if not self.grants.can_write(scope):
            raise PermissionDenied(
                f"no write grant on scope {scope!r} (grants: {self.grants})",
                code="scope_forbidden",
            )

    def require_read(self, scope: str) -> None:
        if not self.grants.can_read(scope):
            # Outside the grants a record does not exist for this caller.
            raise NotFound("not found")


def system_access(context: Context) -> ContextAccess:
    """Full access for commands and tasks that act for the system itself."""
    return ContextAccess(context=context, user=None, role=Role.ADMIN, grants=Grants.everything())


def context_access_resolve(*, user: Any, slug: str, token: ApiToken | None = None) -> ContextAccess:
    """The caller's access to context ``slug``; NotFound if it may not see the context."""
    context = _context_named(slug, token)
    if context is None or user is None or not user.is_authenticated:
        raise NotFound(f"context {slug[:100]!r} not found", code="context_not_found")
    if token is not None and token.context_id != context.pk:
        raise NotFound(f"context {slug[:100]!r} not found", code="context_not_found")
    membership = _membership(user, context, token)
    if user.is_superuser:
        role = Role.ADMIN
        member_grants = DEFAULT_MEMBER_GRANTS
    elif membership is None:
        raise NotFound(f"context {slug[:100]!r} not found", code="context_not_found")
    else:
        role = Role(membership.role)
        member_grants = membership.grants or DEFAULT_MEMBER_GRANTS
    grants = Grants.from_strings(token.grants if token is not None else member_grants)
    trusted = token is None or token.trust == TokenTrust.TRUSTED
    return ContextAccess(context=context, user=user, role=role, grants=grants, trusted=trusted)


def _context_named(slug: str, token: ApiToken | None) -> Context | None:
    # A token names its one context: read with it (``token_authenticate``), no second
    # look-up; any other slug is not found for this token either way.
    if token is not None:
        return token.context if token.context.slug == slug else None
    return Context.objects.filter(slug=slug).first()


_NOT_READ = object()


def _membership(user: Any, context: Context, token: ApiToken | None) -> ContextMembership | None:
    """The user's membership (only its role is read when a token brings the grants).
    ``token_authenticate`` reads the role with the token, as ``member_role``."""
    role = getattr(token, "member_role", _NOT_READ)
    if role is _NOT_READ:
        return ContextMembership.objects.filter(user=user, context=context).first()
    if role is None:
        return None
    return ContextMembership(user=user, context=context, role=str(role))
