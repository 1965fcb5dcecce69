from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models


class DuplicateStatus(models.TextChoices):
    OPEN = "open"
    DISMISSED = "dismissed"  # "not duplicates": never suggested again
    MERGED = "merged"


class DuplicateCandidate(models.Model):
    """Two live entities that may be one, waiting for a curator.

    The pair is stored ordered (``entity_a_id < entity_b_id``) so each pair has one row
    per context, whichever finder met it first; a dismissed pair keeps its row, which is
    what stops it from being suggested again.
    """

    context = models.ForeignKey(
        "memory.Context", on_delete=models.CASCADE, related_name="duplicate_candidates"
    )
    entity_a = models.ForeignKey("memory.Entity", on_delete=models.CASCADE, related_name="+")
    entity_b = models.ForeignKey("memory.Entity", on_delete=models.CASCADE, related_name="+")
    score = models.FloatField()
    # How the pair was found: "embedding", "llm_judge", "key", "phonetic", ...
    methods = ArrayField(models.CharField(max_length=40), default=list, blank=True)
    status = models.CharField(
        max_length=10, choices=DuplicateStatus.choices, default=DuplicateStatus.OPEN
    )
    source = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["context", "entity_a", "entity_b"], name="duplicate_unique_pair"
            ),
            models.CheckConstraint(
                condition=models.Q(entity_a__lt=models.F("entity_b")),
                name="duplicate_ordered_pair",
            ),
        ]
        indexes = [
            # Duplicates page: a context's open candidates, best score first.
            models.Index(fields=["context", "status", "-score"], name="duplicate_open"),
        ]

    def __str__(self) -> str:
        return f"{self.entity_a_id} ~ {self.entity_b_id} ({self.score:.2f}, {self.status})"
