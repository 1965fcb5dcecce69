from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.indexes import OpClass
from django.db import models
from django.db.models.functions import MD5, Now


class FactKind(models.TextChoices):
    RELATION = "relation"  # subject → object entity
    ATTRIBUTE = "attribute"  # subject → value
    ACTION = "action"  # subject did verb (to object) at a time
    NARRATIVE = "narrative"  # subject → a block of text (profile, memo)


class FactStatus(models.TextChoices):
    CURRENT = "current"
    SUPERSEDED = "superseded"
    EXPIRED = "expired"
    RETRACTED = "retracted"
    # A single-valued write that could not supersede the current value (confidence
    # under 0.7 or under the prior's): kept, never current, waiting on its Conflict.
    CONTESTED = "contested"


def fact_live_q(prefix: str = "") -> models.Q:
    """Facts that hold now: current, and their validity not yet ended — whether or not the
    periodic expiry has marked them (docs/decisions/0120). ``prefix`` reaches the fact
    through a relation (``"fact__"``)."""
    return models.Q(**{f"{prefix}status": FactStatus.CURRENT}) & (
        models.Q(**{f"{prefix}valid_until__isnull": True})
        | models.Q(**{f"{prefix}valid_until__gt": Now()})
    )


class FactTrust(models.TextChoices):
    """Whether agents are told a fact (separate from its status in time)."""

    TRUSTED = "trusted"
    # Waiting on a curator (or on a trusted writer stating the same claim).
    PENDING = "pending"
    # Refused by a curator: kept so the same claim written again stays refused.
    REJECTED = "rejected"


class TrustReason(models.TextChoices):
    """Why a fact is pending: the review queue says so."""

    UNTRUSTED_WRITER = "untrusted_writer"
    SUSPICIOUS_TURN = "suspicious_turn"
    REVIEW_ALL = "review_all"  # the context reviews every claim the model extracts
    # Relayed by an agent from a tool, a document, an e-mail or the web (the memory's
    # ``source``): second-hand text, whoever relays it.
    RELAYED_SOURCE = "relayed_source"


class SourceKind(models.TextChoices):
    API = "api"
    RUN = "run"
    DOCUMENT = "document"
    SEED = "seed"
    CURATION = "curation"


class Fact(models.Model):
    # No single-column indexes on context, subject and object: the composite indexes in
    # Meta lead with them, and every index is paid for on each of the millions of writes.
    context = models.ForeignKey(
        "memory.Context", on_delete=models.CASCADE, related_name="facts", db_index=False
    )
    scope = models.CharField(max_length=300)
    subject = models.ForeignKey(
        "memory.Entity", on_delete=models.PROTECT, related_name="facts_as_subject", db_index=False
    )
    predicate = models.ForeignKey(
        "memory.Predicate", on_delete=models.PROTECT, related_name="facts"
    )
    raw_predicate = models.CharField(max_length=200)
    kind = models.CharField(max_length=12, choices=FactKind.choices)
    object = models.ForeignKey(
        "memory.Entity",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="facts_as_object",
        db_index=False,
    )
    value = models.JSONField(null=True, blank=True)
    # ``value`` as text: the identity of attribute facts and what search and the
    # dashboard show. Empty for relations.
    value_text = models.TextField(blank=True)
    confidence = models.FloatField(default=1.0)
    importance = models.FloatField(default=0.5)
    valid_from = models.DateTimeField(null=True, blank=True)
    valid_until = models.DateTimeField(null=True, blank=True)
    recorded_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(auto_now_add=True)
    observed_count = models.PositiveIntegerField(default=1)
    status = models.CharField(max_length=12, choices=FactStatus.choices, default=FactStatus.CURRENT)
    status_changed_at = models.DateTimeField(null=True, blank=True)
    supersedes = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="superseded_by",
        db_index=False,  # partial: see Meta.indexes
    )
    # Copied from the registry at write time so the database itself can refuse a second
    # current value (see the partial unique constraint below).
    single_valued = models.BooleanField(default=False)
    source_kind = models.CharField(
        max_length=12, choices=SourceKind.choices, default=SourceKind.API
    )
    source_ref = models.CharField(max_length=300, blank=True)
    run = models.ForeignKey(
        "memory.Run", on_delete=models.SET_NULL, null=True, blank=True, db_index=False
    )
    document = models.ForeignKey(
        "memory.Document", on_delete=models.SET_NULL, null=True, blank=True, db_index=False
    )
    # The turn this fact was extracted from (provenance), when it came from one.
    turn = models.ForeignKey(
        "memory.Turn",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="facts",
        db_index=False,  # the partial index fact_turn: most facts come from no turn
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, db_index=False
    )
    # Database defaults too: rows written by bulk SQL (COPY, INSERT … SELECT) are trusted.
    trust = models.CharField(
        max_length=10,
        choices=FactTrust.choices,
        default=FactTrust.TRUSTED,
        db_default=FactTrust.TRUSTED,
    )
    trust_reason = models.CharField(
        max_length=20, choices=TrustReason.choices, blank=True, default="", db_default=""
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,
    )
    review_note = models.CharField(max_length=500, blank=True, default="", db_default="")

    class Meta:
        constraints = [
            # One current *trusted* value per slot: pending values of the slot are
            # proposals beside it until a curator accepts one.
            models.UniqueConstraint(
                fields=["subject", "predicate", "scope"],
                condition=models.Q(status="current", single_valued=True, trust="trusted"),
                name="fact_one_current_single_value",
            ),
            models.CheckConstraint(
                condition=models.Q(confidence__gte=0.0, confidence__lte=1.0),
                name="fact_confidence_unit_interval",
            ),
            models.CheckConstraint(
                condition=models.Q(importance__gte=0.0, importance__lte=1.0),
                name="fact_importance_unit_interval",
            ),
            models.CheckConstraint(
                condition=~models.Q(kind="relation") | models.Q(object__isnull=False),
                name="fact_relation_has_object",
            ),
        ]
        indexes = [
            # Provenance (a turn's facts) and graph expansion from turns.
            models.Index(fields=["turn"], condition=models.Q(turn__isnull=False), name="fact_turn"),
            # The other optional references, partial like fact_turn: a lookup by one of
            # them (``= x`` or ``IN``: the foreign keys' checks and SET NULL on delete,
            # a run's or a document's facts, a fact's successor) implies NOT NULL and
            # uses the index, and the many rows without one (an imported or API-written
            # fact has no run, document or reviewer; few supersede another) write no
            # entry for it.
            *(
                models.Index(
                    fields=[name],
                    condition=models.Q(**{f"{name}__isnull": False}),
                    name=f"fact_{name}",
                )
                for name in ("supersedes", "run", "document", "created_by", "reviewed_by")
            ),
            # An entity's facts (detail page, ranking, supersession, re-observation).
            models.Index(fields=["subject", "predicate", "status"], name="fact_subject_predicate"),
            # An entity's newest facts by status (entity page: out-edges, timeline).
            models.Index(fields=["subject", "status", "-recorded_at"], name="fact_subject_recent"),
            # Incoming edges for graph expansion and merges; the entity page's newest
            # current in-edges.
            models.Index(fields=["object", "status", "-recorded_at"], name="fact_object_recent"),
            # Facts by predicate (alias rewrites, vocabulary); with raw_predicate last, the
            # distinct forms a predicate was written in are a skip scan of this index
            # (overview: concepts written the most ways) instead of 1M rows counted.
            models.Index(
                fields=["context", "predicate", "status", "raw_predicate"], name="fact_predicate"
            ),
            # A predicate's newest facts: drift examples, the predicate page.
            models.Index(
                fields=["context", "predicate", "-recorded_at"], name="fact_predicate_recent"
            ),
            # Fact lists newest first.
            models.Index(fields=["context", "-recorded_at"], name="fact_recent"),
            models.Index(OpClass("scope", name="varchar_pattern_ops"), name="fact_scope_prefix"),
            # A value's other holders (the distinct_values constraint, checked on each
            # write: selectors/constraints.py): by hash, since a value may be long.
            models.Index(
                "predicate",
                MD5("value_text"),
                condition=models.Q(status="current") & ~models.Q(value_text=""),
                name="fact_value_hash",
            ),
            # The review queue and the pending counts: the few facts waiting on a curator.
            models.Index(
                fields=["context", "-recorded_at"],
                condition=models.Q(trust="pending"),
                name="fact_pending",
            ),
            # The extraction prompt leaves out what curators rejected (selectors/vocabulary.py).
            models.Index(
                fields=["context", "scope"],
                condition=models.Q(trust="rejected"),
                name="fact_rejected",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.subject_id} {self.predicate_id} {self.object_id or self.value_text}"


class ConflictStatus(models.TextChoices):
    OPEN = "open"
    RESOLVED = "resolved"


class Conflict(models.Model):
    """Two values of a single-valued predicate that the store would not choose between."""

    context = models.ForeignKey(
        "memory.Context", on_delete=models.CASCADE, related_name="conflicts"
    )
    scope = models.CharField(max_length=300)
    subject = models.ForeignKey("memory.Entity", on_delete=models.CASCADE, related_name="+")
    predicate = models.ForeignKey("memory.Predicate", on_delete=models.CASCADE, related_name="+")
    current_fact = models.ForeignKey(Fact, on_delete=models.CASCADE, related_name="+")
    contested_fact = models.ForeignKey(Fact, on_delete=models.CASCADE, related_name="+")
    reason = models.CharField(max_length=300)
    status = models.CharField(
        max_length=10, choices=ConflictStatus.choices, default=ConflictStatus.OPEN
    )
    resolution = models.CharField(max_length=40, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )

    class Meta:
        indexes = [
            # Conflicts page: open conflicts of a context, newest first.
            models.Index(fields=["context", "status", "-created_at"], name="conflict_open"),
        ]

    def __str__(self) -> str:
        return f"conflict {self.pk}: {self.current_fact_id} vs {self.contested_fact_id}"
