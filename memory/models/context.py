from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

CONTEXT_SLUG_RE = r"^[a-z0-9][a-z0-9_-]{0,62}$"
# A context's settings: what an admin changes (PATCH contexts/{ctx}) and the API shows
# beside its slug and name.
SETTING_FIELDS = (
    "description",
    "predicate_mode",
    "auto_supersede",
    "auto_merge_threshold",
    "review_threshold",
    "llm_judge_enabled",
    "fact_review",
    "item_extract",
)


class PredicateMode(models.TextChoices):
    PERMISSIVE = "permissive"
    STRICT = "strict"


class FactReview(models.TextChoices):
    """Which new facts wait for a curator before agents are told them."""

    OFF = "off"  # every fact is trusted
    UNTRUSTED = "untrusted"  # facts written through an untrusted token
    ALL = "all"  # those, and every fact the chat model extracts


class Context(models.Model):
    """An isolated memory (``acme-prod``) with its own registry and resolution settings."""

    slug = models.CharField(
        max_length=63,
        unique=True,
        validators=[RegexValidator(CONTEXT_SLUG_RE, "lowercase letters, digits, - and _")],
    )
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    predicate_mode = models.CharField(
        max_length=12, choices=PredicateMode.choices, default=PredicateMode.PERMISSIVE
    )
    auto_supersede = models.BooleanField(default=True)
    # Entity resolution: cosine similarity above auto_merge attaches a mention to an
    # existing entity; between review and auto_merge it becomes a duplicate candidate.
    auto_merge_threshold = models.FloatField(
        default=0.92, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)]
    )
    review_threshold = models.FloatField(
        default=0.80, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)]
    )
    llm_judge_enabled = models.BooleanField(default=False)
    fact_review = models.CharField(
        max_length=10,
        choices=FactReview.choices,
        default=FactReview.UNTRUSTED,
        db_default=FactReview.UNTRUSTED,
    )
    # Every item put extracts facts unless the put says ``extract: false``
    # (memory/services/items/extract.py).
    item_extract = models.BooleanField(default=False, db_default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(review_threshold__lte=models.F("auto_merge_threshold")),
                name="context_review_below_auto_merge",
            )
        ]

    def __str__(self) -> str:
        return self.slug
