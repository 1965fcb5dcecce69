from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models

# The fields a registry edit may change (services/registry/fields.py validates them) and
# the registry export writes.
EDITABLE_FIELDS = (
    "description",
    "example",
    "category",
    "kind",
    "subject_types",
    "object_types",
    "inverse",
    "default_importance",
    "ranking_weight",
    "single_valued",
    "is_aggregate",
    "lifecycle",
    "default_validity_days",
    "exclude_from_prompt",
    "constraints",
)


class PredicateKind(models.TextChoices):
    RELATION = "relation"
    ATTRIBUTE = "attribute"
    ACTION = "action"
    NARRATIVE = "narrative"


class PredicateStatus(models.TextChoices):
    REGISTERED = "registered"
    OBSERVED = "observed"  # seen in writes but not registered: vocabulary drift
    REJECTED = "rejected"


class Lifecycle(models.TextChoices):
    STABLE = "stable"
    STATEFUL = "stateful"
    EPHEMERAL = "ephemeral"
    EPISODIC = "episodic"


class Predicate(models.Model):
    """A registry entry of one context. ``name`` is the canonical snake_case form."""

    context = models.ForeignKey(
        "memory.Context", on_delete=models.CASCADE, related_name="predicates"
    )
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    example = models.TextField(blank=True)
    category = models.CharField(max_length=50, default="general")
    kind = models.CharField(
        max_length=12, choices=PredicateKind.choices, default=PredicateKind.RELATION
    )
    subject_types = ArrayField(models.CharField(max_length=20), default=list, blank=True)
    object_types = ArrayField(models.CharField(max_length=20), default=list, blank=True)
    inverse = models.CharField(max_length=100, blank=True)
    default_importance = models.FloatField(default=0.5)
    ranking_weight = models.FloatField(default=1.0)
    single_valued = models.BooleanField(default=False)
    is_aggregate = models.BooleanField(default=False)
    lifecycle = models.CharField(max_length=12, choices=Lifecycle.choices, default=Lifecycle.STABLE)
    default_validity_days = models.PositiveIntegerField(null=True, blank=True)
    exclude_from_prompt = models.BooleanField(default=False)
    # Property constraints (memory/domain/constraints.py): rules its facts should keep,
    # reported by selectors/constraints.py, never enforced on writes.
    constraints = models.JSONField(default=list, blank=True, db_default=[])
    status = models.CharField(
        max_length=12, choices=PredicateStatus.choices, default=PredicateStatus.REGISTERED
    )
    first_seen_at = models.DateTimeField(null=True, blank=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["category", "name"]
        constraints = [
            models.UniqueConstraint(fields=["context", "name"], name="predicate_unique_name"),
            models.CheckConstraint(
                condition=~models.Q(single_valued=True, is_aggregate=True),
                name="predicate_not_single_valued_and_aggregate",
            ),
            models.CheckConstraint(
                condition=models.Q(name__regex=r"^[a-z0-9]+(_[a-z0-9]+)*$"),
                name="predicate_name_snake_case",
            ),
        ]
        indexes = [
            # Drift report and registry page: predicates of a context by status.
            models.Index(fields=["context", "status"], name="predicate_status"),
        ]

    def __str__(self) -> str:
        return self.name


class PredicateAlias(models.Model):
    """Another form that canonicalizes onto ``predicate`` (``employed_by`` → ``works_at``).

    ``alias`` holds the normalized form; names and aliases share one namespace per
    context, which the registry service checks under a context row lock.
    """

    context = models.ForeignKey("memory.Context", on_delete=models.CASCADE)
    predicate = models.ForeignKey(Predicate, on_delete=models.CASCADE, related_name="alias_set")
    alias = models.CharField(max_length=100)
    # An inverse alias names ``predicate`` read backwards (``employs`` of ``works_at``):
    # writes through it swap subject and object, reads through it swap back.
    inverse = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["alias"]
        constraints = [
            models.UniqueConstraint(fields=["context", "alias"], name="predicate_alias_unique")
        ]

    def __str__(self) -> str:
        return f"{self.alias} → {self.predicate_id}"
