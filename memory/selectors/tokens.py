"""API tokens of a context, for its admins."""

from __future__ import annotations

from django.db.models import F, QuerySet

from memory.domain.access import ContextAccess
from memory.models import ApiToken, ContextMembership, Role


def token_list(*, access: ContextAccess) -> QuerySet[ApiToken]:
    """Every token of the context, live ones first, newest first (admins only)."""
    access.require_role(Role.ADMIN)
    return (
        ApiToken.objects.filter(context=access.context)
        .select_related("user")
        .defer("digest")
        .order_by(F("revoked_at").asc(nulls_first=True), "-created_at", "-id")
    )


def token_members(*, access: ContextAccess) -> QuerySet[ContextMembership]:
    """The members a token may be issued to, by user name."""
    access.require_role(Role.ADMIN)
    return (
        ContextMembership.objects.filter(context=access.context)
        .select_related("user")
        .order_by("user__username")
    )
