"""The search index: BM25 postings for chunks, facts, entities and turns, and fact vectors.

Chunks, entities and turns keep their vectors on their own rows (``Chunk.embedding``,
``Entity.embedding``, ``Turn.embedding``); facts have none there, so ``FactVector`` holds them.

Consistency is the database's job. Writers only insert ``SearchDoc`` rows with their
postings, or delete ``SearchDoc`` rows; statement-level triggers (migrations 0001 and
0002) keep ``SearchStats``, the postings and each term's document frequency in step
inside the same transaction, so a chunk, fact or entity deleted by any code path — a
cascade included — leaves no stale postings or statistics behind. Lock order is always
stats row, then term rows.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from pgvector.django import HnswIndex, VectorField

from memory.models.entity import EMBEDDING_DIMENSIONS


class Target(models.TextChoices):
    CHUNK = "chunk"
    FACT = "fact"
    ENTITY = "entity"
    TURN = "turn"
    ITEM = "item"


class SearchTerm(models.Model):
    """The term dictionary of one corpus (a context's chunks, facts or entities)."""

    # Indexed by search_term_unique, which leads with it (no index of its own to write).
    context = models.ForeignKey(
        "memory.Context", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    target = models.CharField(max_length=6, choices=Target.choices)
    text = models.CharField(max_length=100)
    # Documents holding the term, kept by the postings triggers (migration 0002). Writers
    # of one corpus already queue on its SearchStats row, so this adds no contention.
    df = models.PositiveIntegerField(default=0, db_default=0)
    # The largest tf and the shortest document among the term's postings (migration
    # 0003's trigger): f(max_tf, min_dl) bounds every posting's BM25 share, which lets a
    # query skip reading the lists of terms that cannot lift a document into its top k.
    # Deletes leave them as they are: a stale bound is looser, never wrong.
    max_tf = models.PositiveIntegerField(default=0, db_default=0)
    min_dl = models.PositiveIntegerField(default=0, db_default=0)

    class Meta:
        constraints = [
            # Query analysis looks terms up by (context, target, text); writers upsert them.
            models.UniqueConstraint(fields=["context", "target", "text"], name="search_term_unique")
        ]

    def __str__(self) -> str:
        return f"{self.target}:{self.text}"


_REF_FIELDS = {
    "chunk": "chunk",
    "fact": "fact",
    "entity": "entity",
    "turn": "turn",
    "item": "item",
}


def _one_target_q() -> models.Q:
    """Each search document indexes exactly the record its target names."""
    condition = models.Q()
    for target, field in _REF_FIELDS.items():
        condition |= models.Q(
            target=target,
            **{f"{other}__isnull": other != field for other in _REF_FIELDS.values()},
        )
    return condition


class SearchDoc(models.Model):
    """One indexed chunk, fact or entity: its scope, length and the terms it holds.

    Rows are never updated: re-indexing deletes the row (the trigger removes its
    postings through ``term_ids``) and inserts a new one.
    """

    # A document's context is its record's: the record's foreign key below (exactly one
    # is set) already ties the row to a live record of that context, so this one is not
    # checked again row by row. Nor indexed: nothing reads documents by context alone (a
    # query reads postings, then documents by id; docs/decisions/0110).
    context = models.ForeignKey(
        "memory.Context",
        on_delete=models.CASCADE,
        related_name="+",
        db_constraint=False,
        db_index=False,
    )
    target = models.CharField(max_length=6, choices=Target.choices)
    # One document a record, by the partial unique constraints below: each row names one
    # of the four, so a plain unique index on each would write three NULL entries a row.
    chunk = models.ForeignKey(
        "memory.Chunk", on_delete=models.CASCADE, null=True, related_name="+", db_index=False
    )
    fact = models.ForeignKey(
        "memory.Fact", on_delete=models.CASCADE, null=True, related_name="+", db_index=False
    )
    entity = models.ForeignKey(
        "memory.Entity", on_delete=models.CASCADE, null=True, related_name="+", db_index=False
    )
    turn = models.ForeignKey(
        "memory.Turn", on_delete=models.CASCADE, null=True, related_name="+", db_index=False
    )
    item = models.ForeignKey(
        "memory.Item", on_delete=models.CASCADE, null=True, related_name="+", db_index=False
    )
    scope = models.CharField(max_length=300)
    length = models.PositiveIntegerField()
    # The distinct terms: the delete trigger finds the postings by (term_id, doc_id)
    # through the primary key instead of a second index on doc_id.
    term_ids = ArrayField(models.BigIntegerField(), default=list)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=_one_target_q(),
                name="search_doc_one_target",
            ),
            *(
                models.UniqueConstraint(
                    fields=[field],
                    condition=models.Q(**{f"{field}__isnull": False}),
                    name=f"search_doc_one_per_{field}",
                )
                for field in _REF_FIELDS.values()
            ),
        ]

    def __str__(self) -> str:
        ref = self.chunk_id or self.fact_id or self.entity_id or self.turn_id or self.item_id
        return f"{self.target} {ref}"


class SearchPosting(models.Model):
    """``(term, doc) → tf`` with the document length copied in, so a query reads one
    posting list with an index-only scan of the primary key
    ``(term_id, doc_id) INCLUDE (tf, dl)`` and never visits ``SearchDoc`` to score.

    Created by raw SQL in migration 0001 (Django cannot declare ``INCLUDE`` on a
    primary key); owned by ``SearchDoc`` through its triggers.
    """

    pk = models.CompositePrimaryKey("term_id", "doc_id")
    term_id = models.BigIntegerField()
    doc_id = models.BigIntegerField()
    tf = models.IntegerField()
    dl = models.IntegerField()

    class Meta:
        managed = False
        db_table = "search_searchposting"

    def __str__(self) -> str:
        return f"term {self.term_id} in doc {self.doc_id}: {self.tf}"


class SearchStats(models.Model):
    """N and the summed document length of one corpus, kept by the ``SearchDoc`` triggers.

    The row is updated in the writing transaction, so concurrent writers of one corpus
    queue on it and the figures stay exact.
    """

    # Indexed by search_stats_unique, which leads with it.
    context = models.ForeignKey(
        "memory.Context", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    target = models.CharField(max_length=6, choices=Target.choices)
    doc_count = models.BigIntegerField(default=0)
    total_length = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["context", "target"], name="search_stats_unique")
        ]

    def __str__(self) -> str:
        return f"{self.target} stats of context {self.context_id}"


class FactVector(models.Model):
    """The embedding of a fact's sentence ("Alex works at Acme")."""

    fact = models.OneToOneField(
        "memory.Fact", on_delete=models.CASCADE, primary_key=True, related_name="vector"
    )
    context = models.ForeignKey("memory.Context", on_delete=models.CASCADE, related_name="+")
    scope = models.CharField(max_length=300)
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS)
    embedding_model = models.CharField(max_length=100)

    class Meta:
        indexes = [
            # Vector search over facts: ORDER BY embedding <=> query LIMIT k.
            HnswIndex(
                name="fact_vector_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]

    def __str__(self) -> str:
        return f"vector of fact {self.fact_id}"
