"""Items: exact JSON documents under a namespace and a key (the store agents' frameworks
such as LangGraph read and write)."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from pgvector.django import HnswIndex, VectorField

from memory.models.entity import EMBEDDING_DIMENSIONS


class Item(models.Model):
    """One JSON value under ``(namespace, key)``, kept exactly as written.

    ``namespace`` is the tuple of labels; ``scope`` is the same path spelled as a scope
    (``memory.domain.namespaces``), so scope grants decide who reads and writes it.
    ``text`` is what the item's ``index`` paths selected, the text BM25 and the vector
    rank; empty when the item is not indexed. An item past ``expires_at`` is never
    returned and the task worker deletes it.
    """

    # No index of its own: the indexes below lead with it (each is one more to write a put).
    context = models.ForeignKey(
        "memory.Context", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    namespace = ArrayField(models.TextField())
    scope = models.CharField(max_length=300)
    key = models.TextField()
    value = models.JSONField()
    # The index paths the item was written with; None: not indexed.
    index = models.JSONField(null=True, blank=True)
    text = models.TextField(blank=True)
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=100, blank=True)
    ttl_minutes = models.FloatField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    # The run that extracted facts from the item (``extract: true``), if any.
    run = models.ForeignKey(
        "memory.Run",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,  # item_run below: only the few items that have one
    )
    # The turn that run read: its facts point back to it (``Fact.turn``), retries of the
    # run included, and it travels in a memory export where runs do not.
    turn = models.ForeignKey(
        "memory.Turn",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,  # partial: see Meta.indexes
    )
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            # A get reads one item by (context, namespace, key); a put upserts on it.
            models.UniqueConstraint(fields=["context", "namespace", "key"], name="item_unique"),
        ]
        indexes = [
            # Search and list under a namespace prefix: scope = P OR scope LIKE 'P/%'.
            # With the expiry beside it, the namespace tree's count of live items per
            # scope is an index-only scan (the heap rows carry values and vectors).
            models.Index(
                fields=["context", "scope"],
                opclasses=["int8_ops", "varchar_pattern_ops"],
                include=["expires_at"],
                name="item_scope_live",
            ),
            # A search without a query: newest first.
            models.Index(fields=["context", "-updated_at"], name="item_recent"),
            # A fact's page: the item its turn came from.
            models.Index(fields=["turn"], condition=models.Q(turn__isnull=False), name="item_turn"),
            # A run's items, when the run is deleted (SET_NULL); most items have none.
            models.Index(fields=["run"], condition=models.Q(run__isnull=False), name="item_run"),
            # The sweep: the items whose time is up.
            models.Index(
                fields=["expires_at"],
                condition=models.Q(expires_at__isnull=False),
                name="item_expiring",
            ),
            HnswIndex(
                name="item_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]

    def __str__(self) -> str:
        return f"item {'/'.join(self.namespace)}:{self.key}"
