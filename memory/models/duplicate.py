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
    # Why: the match probability's fields, each {field, level, agrees, weight (log2 m/u)}.
    explain = models.JSONField(default=list, blank=True)
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


class DuplicateKey(models.Model):
    """A blocking key of a live entity: the incremental check finds an entity's
    possible duplicates as the entities of its type sharing one of these (its words in
    order-free form, bigrams, sounds, each word's sound, dates and codes among its
    attributes). Kept by every entity write; the full scan rebuilds them."""

    # The key's context is its entity's: the entity's foreign key already ties the row
    # to a live record of that context (and takes it along when it goes), so this one
    # is neither checked nor indexed on its own (duplicate_key_lookup leads with it;
    # docs/decisions/0110).
    context = models.ForeignKey(
        "memory.Context",
        on_delete=models.CASCADE,
        related_name="+",
        db_constraint=False,
        db_index=False,
    )
    entity = models.ForeignKey(
        "memory.Entity", on_delete=models.CASCADE, related_name="duplicate_keys"
    )
    type = models.CharField(max_length=40)
    key = models.CharField(max_length=200)

    class Meta:
        indexes = [
            models.Index(fields=["context", "type", "key"], name="duplicate_key_lookup"),
        ]

    def __str__(self) -> str:
        return f"{self.entity_id}: {self.key}"


class DuplicateModel(models.Model):
    """A context's learnt Fellegi–Sunter weights (``duplicate_scoring.Model.to_json``):
    estimated by EM from the context's own entities, re-estimated by every full scan and
    when the context has doubled since the last estimate."""

    context = models.OneToOneField(
        "memory.Context", on_delete=models.CASCADE, related_name="duplicate_model"
    )
    params = models.JSONField(default=dict)
    entities = models.IntegerField(default=0)  # live entities when it was estimated
    fitted_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"duplicate model of context {self.context_id} ({self.entities} entities)"
