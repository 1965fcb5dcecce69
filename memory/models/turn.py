from __future__ import annotations

from django.contrib.postgres.indexes import OpClass
from django.db import models
from pgvector.django import HnswIndex, VectorField

from memory.models.entity import EMBEDDING_DIMENSIONS

MAX_SPEAKER_CHARS = 200
MAX_THREAD_CHARS = 200
MAX_REF_CHARS = 200


class Turn(models.Model):
    """The text of one accepted memory, kept searchable (BM25 and vector) whatever the
    infer mode, with who said it, when, in which conversation and the caller's own id.

    Facts extracted from it point back to it (``Fact.turn``). ``run`` is the run that
    executes it: the one that accepted it, or the latest retry of that run.
    """

    context = models.ForeignKey("memory.Context", on_delete=models.CASCADE, related_name="turns")
    scope = models.CharField(max_length=300)
    run = models.ForeignKey(
        "memory.Run", on_delete=models.SET_NULL, null=True, blank=True, related_name="turns"
    )
    text = models.TextField()
    speaker = models.CharField(max_length=MAX_SPEAKER_CHARS, blank=True)
    said_at = models.DateTimeField(null=True, blank=True)
    thread = models.CharField(max_length=MAX_THREAD_CHARS, blank=True)
    ref = models.CharField(max_length=MAX_REF_CHARS, blank=True)
    # What made the turn suspicious, if anything: [{"kind", "label", "start", "end"}]
    # over ``text`` (memory/domain/screening.py). Its facts wait for review.
    flags = models.JSONField(
        default=list, blank=True, db_default=models.Value([], output_field=models.JSONField())
    )
    created_at = models.DateTimeField(auto_now_add=True)
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=100, blank=True)

    class Meta:
        indexes = [
            # A conversation's turns in order (search's thread filter, listings).
            models.Index(fields=["context", "thread", "said_at"], name="turn_thread"),
            models.Index(OpClass("scope", name="varchar_pattern_ops"), name="turn_scope_prefix"),
            # The embedding backlog: the few rows still waiting for a vector.
            models.Index(
                fields=["id"], condition=models.Q(embedding__isnull=True), name="turn_unembedded"
            ),
            HnswIndex(
                name="turn_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]

    def __str__(self) -> str:
        return f"turn {self.pk}" + (f" of {self.thread}" if self.thread else "")
