from __future__ import annotations

from django.contrib.postgres.indexes import OpClass
from django.db import models
from pgvector.django import HnswIndex, VectorField

from memory.models.entity import EMBEDDING_DIMENSIONS


class Document(models.Model):
    context = models.ForeignKey(
        "memory.Context", on_delete=models.CASCADE, related_name="documents"
    )
    scope = models.CharField(max_length=300)
    title = models.CharField(max_length=500, blank=True)
    text = models.TextField()
    source = models.CharField(max_length=300, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            models.Index(fields=["context", "-created_at"], name="document_recent"),
            models.Index(
                OpClass("scope", name="varchar_pattern_ops"), name="document_scope_prefix"
            ),
        ]

    def __str__(self) -> str:
        return self.title or f"document {self.pk}"


class Chunk(models.Model):
    context = models.ForeignKey("memory.Context", on_delete=models.CASCADE)
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="chunks")
    scope = models.CharField(max_length=300)
    ordinal = models.PositiveIntegerField()
    text = models.TextField()
    token_count = models.PositiveIntegerField(default=0)
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=100, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["document", "ordinal"], name="chunk_unique_ordinal")
        ]
        indexes = [
            models.Index(OpClass("scope", name="varchar_pattern_ops"), name="chunk_scope_prefix"),
            # The embedding backlog and the worker's drain read the rows without a vector.
            models.Index(
                fields=["id"], condition=models.Q(embedding__isnull=True), name="chunk_unembedded"
            ),
            HnswIndex(
                name="chunk_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]

    def __str__(self) -> str:
        return f"chunk {self.ordinal} of document {self.document_id}"


class Keyword(models.Model):
    """A RAKE keyphrase node, shared by the documents of a context that contain it."""

    context = models.ForeignKey("memory.Context", on_delete=models.CASCADE)
    text = models.CharField(max_length=300)
    document_count = models.PositiveIntegerField(default=0)
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["context", "text"], name="keyword_unique_text")
        ]
        indexes = [
            models.Index(
                fields=["id"], condition=models.Q(embedding__isnull=True), name="keyword_unembedded"
            ),
            # hybrid_graph's seeds: a query's nearest keywords (memory.search.graph).
            HnswIndex(
                name="keyword_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]

    def __str__(self) -> str:
        return self.text


class KeywordLink(models.Model):
    keyword = models.ForeignKey(Keyword, on_delete=models.CASCADE, related_name="links")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="keyword_links")
    chunk = models.ForeignKey(Chunk, on_delete=models.CASCADE, null=True, blank=True)
    scope = models.CharField(max_length=300)
    score = models.FloatField()

    class Meta:
        indexes = [
            models.Index(fields=["keyword", "scope"], name="keyword_link_scope"),
        ]

    def __str__(self) -> str:
        return f"{self.keyword_id} → document {self.document_id}"
