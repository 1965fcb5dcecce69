from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models


class Merge(models.Model):
    """Entities folded into a survivor, with everything needed to undo it exactly.

    ``snapshot`` holds the prior state of every entity involved and of every fact,
    identifier, conflict and duplicate candidate the merge touched.
    """

    context = models.ForeignKey("memory.Context", on_delete=models.CASCADE, related_name="merges")
    survivor = models.ForeignKey("memory.Entity", on_delete=models.PROTECT, related_name="+")
    merged_ids = ArrayField(models.BigIntegerField())
    final_name = models.CharField(max_length=300)
    summary = models.JSONField(default=dict, encoder=DjangoJSONEncoder)
    snapshot = models.JSONField(encoder=DjangoJSONEncoder)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    undone_at = models.DateTimeField(null=True, blank=True)
    undone_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        indexes = [
            # Merge history of a context, newest first (audit page, entity detail).
            models.Index(fields=["context", "-created_at"], name="merge_recent"),
        ]

    def __str__(self) -> str:
        return f"merge {self.pk}: {self.merged_ids} → {self.survivor_id}"
