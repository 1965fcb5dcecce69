from __future__ import annotations

import hashlib

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models


class Role(models.TextChoices):
    VIEWER = "viewer"
    CURATOR = "curator"
    ADMIN = "admin"


class TokenTrust(models.TextChoices):
    TRUSTED = "trusted"
    # What it writes waits for review (the context's ``fact_review``), and it never
    # acts as a curator whatever its user's role.
    UNTRUSTED = "untrusted"


ROLE_RANK = {Role.VIEWER: 1, Role.CURATOR: 2, Role.ADMIN: 3}


class ContextMembership(models.Model):
    """A user's role in one context, and the scopes it may read and write.

    Grants are strings ``read:PATTERN`` / ``write:PATTERN`` where PATTERN is ``P`` (exactly
    P), ``P/*`` (P and everything below) or ``*`` (every scope).
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    context = models.ForeignKey("memory.Context", on_delete=models.CASCADE, related_name="members")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.VIEWER)
    grants = ArrayField(models.CharField(max_length=300), default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["user", "context"], name="membership_unique_user_context"
            )
        ]

    def __str__(self) -> str:
        return f"{self.user_id}@{self.context_id}:{self.role}"


class TokenPurpose(models.TextChoices):
    API = "api"  # sent as ``Authorization: Token …``
    # A read-only key carried in the path of a reconciliation URL, for clients that
    # cannot send headers (OpenRefine); it never authenticates a header.
    RECONCILE = "reconcile"


class ApiToken(models.Model):
    """A bearer token for one user in one context, carrying its own scope grants.

    Only a SHA-256 digest of the token is stored; the token itself is shown once.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    context = models.ForeignKey("memory.Context", on_delete=models.CASCADE, related_name="tokens")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=12)
    digest = models.CharField(max_length=64, unique=True)
    grants = ArrayField(models.CharField(max_length=300), default=list)
    trust = models.CharField(
        max_length=10,
        choices=TokenTrust.choices,
        default=TokenTrust.TRUSTED,
        db_default=TokenTrust.TRUSTED,
    )
    purpose = models.CharField(
        max_length=10,
        choices=TokenPurpose.choices,
        default=TokenPurpose.API,
        db_default=TokenPurpose.API,
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user_id}@{self.context_id})"

    @staticmethod
    def digest_of(raw_token: str) -> str:
        return hashlib.sha256(raw_token.encode()).hexdigest()
