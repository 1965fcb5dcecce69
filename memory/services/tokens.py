"""API tokens: issued once, stored as a digest, bound to a context and scope grants."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from memory.models import ApiToken, Context
from memory.scopes import grants_parse


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    raw: str  # shown once; only its digest is stored


@transaction.atomic
def token_issue(*, user: Any, context: Context, grants: list[str], name: str = "") -> IssuedToken:
    """Issue a token; ``grants`` like ``["read,write:org/acme/*"]`` (validated here)."""
    parsed = grants_parse(grants)
    raw = "md_" + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        context=context,
        name=name,
        prefix=raw[:10],
        digest=ApiToken.digest_of(raw),
        grants=[str(g) for g in parsed],
    )
    return IssuedToken(token=token, raw=raw)
