"""API tokens: issued once, stored as a digest, bound to a context and scope grants."""

from __future__ import annotations

import datetime as dt
import secrets
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from memory.domain.access import ContextAccess
from memory.infra.pg_rows import instance_select
from memory.kernel.errors import Conflict, NotFound, ValidationFailed
from memory.kernel.scopes import ScopeError, grants_parse
from memory.models import ApiToken, Context, ContextMembership, Role, TokenPurpose, TokenTrust
from memory.services.audit import audit_record


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    raw: str  # shown once; only its digest is stored


@transaction.atomic
def token_issue(
    *,
    user: Any,
    context: Context,
    grants: list[str],
    name: str = "",
    trust: str = TokenTrust.TRUSTED,
    purpose: TokenPurpose = TokenPurpose.API,
) -> IssuedToken:
    """Issue a token; ``grants`` like ``["read,write:org/acme/*"]`` (validated here).
    An ``untrusted`` token's facts wait for review (the context's ``fact_review``)."""
    parsed = grants_parse(grants)
    if trust not in TokenTrust.values:
        raise ValidationFailed(
            f"trust must be one of {', '.join(TokenTrust.values)}", code="invalid_trust"
        )
    raw = ("md_" if purpose == TokenPurpose.API else "mdr_") + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        context=context,
        name=name,
        prefix=raw[:10],
        digest=ApiToken.digest_of(raw),
        grants=[str(g) for g in parsed],
        trust=trust,
        purpose=purpose,
    )
    return IssuedToken(token=token, raw=raw)


MAX_TOKEN_GRANTS = 20


@transaction.atomic
def token_create(
    *,
    access: ContextAccess,
    user_id: int,
    grants: list[str],
    name: str = "",
    trust: str = TokenTrust.TRUSTED,
) -> IssuedToken:
    """An admin issues a token in this context to one of its members (audited; the raw
    token is returned once and never stored)."""
    access.require_role(Role.ADMIN)
    if not grants:
        raise ValidationFailed("give at least one grant, e.g. read:*", code="invalid_grants")
    if len(grants) > MAX_TOKEN_GRANTS:
        raise ValidationFailed(f"at most {MAX_TOKEN_GRANTS} grants", code="invalid_grants")
    try:
        grants_parse(grants)
    except ScopeError as exc:
        raise ValidationFailed(str(exc), code="invalid_grants") from None
    if len(name) > 100:
        raise ValidationFailed("name: at most 100 characters", code="invalid_name")
    membership = (
        ContextMembership.objects.select_related("user")
        .filter(context=access.context, user_id=user_id)
        .first()
    )
    if membership is None:
        raise ValidationFailed(
            f"user {user_id} is not a member of {access.context.slug}", code="not_a_member"
        )
    issued = token_issue(
        user=membership.user, context=access.context, grants=grants, name=name, trust=trust
    )
    token = issued.token
    audit_record(
        context=access.context,
        actor=access.user,
        action="token_issue",
        target_type="token",
        target_id=token.pk,
        summary=f"created token {token.prefix}… for {membership.user.get_username()} "
        f"({', '.join(token.grants)}; {token.trust})",
        after={
            "prefix": token.prefix,
            "user": membership.user.get_username(),
            "grants": token.grants,
            "trust": token.trust,
        },
    )
    return issued


@transaction.atomic
def token_revoke(*, access: ContextAccess, token_id: int) -> ApiToken:
    """An admin revokes a token of this context: it stops authenticating at once."""
    access.require_role(Role.ADMIN)
    token = (
        ApiToken.objects.select_for_update()
        .select_related("user")
        .filter(context=access.context, pk=token_id)
        .first()
    )
    if token is None:
        raise NotFound(f"token {token_id} not found", code="token_not_found")
    if token.revoked_at is not None:
        raise Conflict(f"token {token.prefix}… is already revoked", code="token_revoked")
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])
    audit_record(
        context=access.context,
        actor=access.user,
        action="token_revoke",
        target_type="token",
        target_id=token.pk,
        summary=f"revoked token {token.prefix}… of {token.user.get_username()}",
        before={"prefix": token.prefix, "user": token.user.get_username(), "grants": token.grants},
    )
    return token


@transaction.atomic
def reconcile_key_create(*, access: ContextAccess, scope: str = "*", name: str = "") -> IssuedToken:
    """An admin creates a read-only reconciliation key (for a URL with the key in its
    path), reading ``scope`` (a pattern: ``*``, ``P/*`` or ``P``) as the admin. Audited;
    the key is returned once. Revoked like any token (``token_revoke``)."""
    access.require_role(Role.ADMIN)
    if access.user is None:
        raise ValidationFailed("a reconciliation key acts as a user", code="invalid_user")
    try:
        grants = [str(g) for g in grants_parse([f"read:{scope.strip() or '*'}"])]
    except ScopeError as exc:
        raise ValidationFailed(str(exc), code="invalid_grants") from None
    if len(name) > 100:
        raise ValidationFailed("name: at most 100 characters", code="invalid_name")
    issued = token_issue(
        user=access.user,
        context=access.context,
        grants=grants,
        name=name,
        purpose=TokenPurpose.RECONCILE,
    )
    audit_record(
        context=access.context,
        actor=access.user,
        action="token_issue",
        target_type="token",
        target_id=issued.token.pk,
        summary=f"created reconciliation key {issued.token.prefix}… ({', '.join(grants)})",
        after={"prefix": issued.token.prefix, "purpose": "reconcile", "grants": grants},
    )
    return issued


# How fresh ``last_used_at`` is kept: the tokens page shows it to the minute ("3 minutes
# ago"), and stamping it on every request made every read of the API a write.
LAST_USED_RESOLUTION = dt.timedelta(minutes=1)


def token_authenticate(
    raw: str, *, purpose: str, context_slug: str | None = None
) -> ApiToken | None:
    """The live token of this purpose whose digest is ``raw``'s (and, when given, of that
    context), its use stamped; None for any other key, so a wrong key tells nothing.

    Every API request starts here, so this is one plain statement (``instance_select``,
    no ORM compilation) that reads the token with its user, its context and the user's
    role there (``member_role``, None when not a member): all that resolving the
    caller's access needs (``memory.domain.access.context_access_resolve``)."""
    select = instance_select(ApiToken, ("user", "context"))
    sql = (
        f"SELECT {select.columns}, m.role FROM memory_apitoken t0 {select.joins} "  # noqa: S608 - names from the models
        "LEFT JOIN memory_contextmembership m "
        "ON m.user_id = t0.user_id AND m.context_id = t0.context_id "
        "WHERE t0.digest = %s AND t0.purpose = %s AND t0.revoked_at IS NULL"
    )
    params = [ApiToken.digest_of(raw), purpose]
    if context_slug is not None:
        sql += " AND t2.slug = %s"
        params.append(context_slug)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    token = None if row is None else select.build(row[:-1])
    if not isinstance(token, ApiToken) or not token.user.is_active:
        return None
    token.member_role = row[-1]  # type: ignore[attr-defined]  # read by context_access_resolve
    _stamp_use(token)
    return token


def _stamp_use(token: ApiToken) -> None:
    """Record the token's use when the last record is older than the resolution. The
    update repeats the condition, so of concurrent requests that all found it stale one
    writes and the others match no row."""
    now = timezone.now()
    stale = now - LAST_USED_RESOLUTION
    if token.last_used_at is not None and token.last_used_at > stale:
        return
    ApiToken.objects.filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lte=stale), pk=token.pk
    ).update(last_used_at=now)
    token.last_used_at = now
