from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from memory.models import ApiToken, Context


def context_list(*, user: Any, token: ApiToken | None = None) -> QuerySet[Context]:
    """Contexts the caller can see: the token's one, or the user's memberships."""
    if token is not None:
        return Context.objects.filter(pk=token.context_id)
    if user.is_superuser:
        return Context.objects.order_by("slug")
    return Context.objects.filter(members__user=user).order_by("slug")


def context_by_id(*, context_id: int) -> Context:
    """A context by id, for background work that was handed the id (no access check:
    the work was authorized when it was queued)."""
    return Context.objects.get(pk=context_id)
