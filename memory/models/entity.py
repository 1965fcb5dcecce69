from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex, OpClass
from django.contrib.postgres.search import SearchVector
from django.db import models
from pgvector.django import HnswIndex, VectorField

EMBEDDING_DIMENSIONS = 384


class EntityType(models.TextChoices):
    PERSON = "person"
    ORGANISATION = "organisation"
    PROJECT = "project"
    LOCATION = "location"
    TOPIC = "topic"
    PRODUCT = "product"
    POLICY = "policy"
    CONCEPT = "concept"
    EVENT = "event"
    AGENT = "agent"
    SERVICE = "service"
    OTHER = "other"


ENTITY_TYPES: tuple[str, ...] = tuple(EntityType.values)


class Entity(models.Model):
    """A node of the graph. A merged entity stays as a redirect (``merged_into``)."""

    # No index of its own: entity_key and the other indexes below lead with it.
    context = models.ForeignKey(
        "memory.Context", on_delete=models.CASCADE, related_name="entities", db_index=False
    )
    scope = models.CharField(max_length=300)
    name = models.CharField(max_length=300)
    type = models.CharField(max_length=20, choices=EntityType.choices, default=EntityType.OTHER)
    normalized_key = models.CharField(max_length=300)
    aliases = ArrayField(models.CharField(max_length=300), default=list, blank=True)
    # Normalized forms of ``aliases``, kept beside them so lookups by alias use an index.
    alias_keys = ArrayField(models.CharField(max_length=300), default=list, blank=True)
    attributes = models.JSONField(default=dict, blank=True)
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=100, blank=True)
    merged_into = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="merged_from"
    )
    seeded = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "entities"
        constraints = [
            # Upsert by normalized key: one live entity per (context, scope, type, key).
            models.UniqueConstraint(
                fields=["context", "scope", "type", "normalized_key"],
                condition=models.Q(merged_into__isnull=True),
                name="entity_unique_live_key",
            ),
            models.CheckConstraint(
                condition=models.Q(type__in=ENTITY_TYPES), name="entity_type_closed_set"
            ),
        ]
        indexes = [
            # Entity lists and the vocabulary gatherer: live entities of a context, newest first.
            models.Index(
                fields=["context", "-updated_at"],
                condition=models.Q(merged_into__isnull=True),
                name="entity_live_recent",
            ),
            # The vocabulary gatherer: the most recently updated live entities of each
            # scope visible from a write scope (one short index range per scope).
            models.Index(
                fields=["context", "scope", "-updated_at"],
                condition=models.Q(merged_into__isnull=True),
                name="entity_scope_recent",
            ),
            # Scope filters use prefix matches (``scope LIKE 'org/acme/%'``).
            models.Index(
                OpClass("scope", name="varchar_pattern_ops"),
                name="entity_scope_prefix",
            ),
            # Resolution by normalized key ignoring scope/type (duplicate finder, search).
            models.Index(fields=["context", "normalized_key"], name="entity_key"),
            # Resolution by alias: ``alias_keys @> ARRAY[key]``.
            GinIndex(fields=["alias_keys"], name="entity_alias_keys"),
            # Entity search as you type: every word of the query a prefix of a word of the
            # key (``to_tsvector('simple', key) @@ 'acm:* & corp:*'``; see entity_list).
            GinIndex(SearchVector("normalized_key", config="simple"), name="entity_key_words"),
            # The embedding backlog and the worker's drain read the rows without a vector.
            models.Index(
                fields=["id"],
                condition=models.Q(embedding__isnull=True, merged_into__isnull=True),
                name="entity_unembedded",
            ),
            # Embedding neighbours (resolution, duplicates, search).
            HnswIndex(
                name="entity_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.type})"


class EntityIdentifier(models.Model):
    """A strong identifier (email, domain, url, sku…): the cheapest resolution tier."""

    entity = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="identifiers")
    context = models.ForeignKey("memory.Context", on_delete=models.CASCADE)
    scope = models.CharField(max_length=300)
    kind = models.CharField(max_length=40)
    value = models.CharField(max_length=500)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["context", "scope", "kind", "value"], name="identifier_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind}:{self.value}"
