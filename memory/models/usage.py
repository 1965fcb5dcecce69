from __future__ import annotations

from django.db import models


class PredicateUsage(models.Model):
    """How many facts use a predicate, per (context, scope, fact kind), as a log of deltas.

    Written only by statement-level triggers on ``memory_fact`` (migration 0003), so every
    writer — services, bulk paths, curation rewrites, raw SQL — keeps it right. Rows are
    deltas rather than one counter per key so that concurrent writers never wait on (or
    deadlock over) a shared counter row; ``vocabulary_usage_compact`` folds them. The
    vocabulary gatherer sums them instead of counting millions of facts per prompt.
    """

    # No database foreign keys: the triggers insert rows while contexts and predicates
    # are being deleted in the same transaction; reads join and drop orphans.
    context = models.ForeignKey(
        "memory.Context", on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    scope = models.CharField(max_length=300)
    kind = models.CharField(max_length=12)
    predicate = models.ForeignKey(
        "memory.Predicate", on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    # Observations (a re-observed fact counts each time it was seen):
    used = models.IntegerField()  # ... of facts not retracted
    live = models.IntegerField()  # ... of current facts
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # Vocabulary gathering and compaction: a context's rows for a few scopes.
            models.Index(fields=["context", "scope"], name="predicate_usage_scope"),
        ]

    def __str__(self) -> str:
        return f"{self.predicate_id}@{self.scope} ({self.kind}): {self.used}/{self.live}"
