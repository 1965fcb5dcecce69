from __future__ import annotations

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models


class AuditEvent(models.Model):
    """A curator or admin change, with what it takes to undo it exactly (``undo``)."""

    context = models.ForeignKey(
        "memory.Context", on_delete=models.CASCADE, related_name="audit_events"
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    actor_label = models.CharField(max_length=150)
    action = models.CharField(max_length=50)
    target_type = models.CharField(max_length=30)
    target_id = models.CharField(max_length=100)
    summary = models.CharField(max_length=500)
    before = models.JSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    after = models.JSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    undo = models.JSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    undone_at = models.DateTimeField(null=True, blank=True)
    undone_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # Audit page: a context's events newest first, optionally by action.
            models.Index(fields=["context", "-created_at"], name="audit_recent"),
            models.Index(fields=["context", "target_type", "target_id"], name="audit_target"),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.target_type}:{self.target_id} by {self.actor_label}"
