"""Entity reads, limited to the caller's read grants."""

from __future__ import annotations

from django.contrib.postgres.search import SearchQuery, SearchVector
from django.db.models import Q, QuerySet

from memory.domain.access import ContextAccess
from memory.domain.entity_names import entity_normalize_key
from memory.kernel.errors import NotFound
from memory.models import AuditEvent, Entity


def entities_visible(*, access: ContextAccess) -> QuerySet[Entity]:
    return Entity.objects.filter(access.grants.read_q(), context=access.context)


def entity_list(
    *,
    access: ContextAccess,
    q: str | None = None,
    type: str | None = None,
    scope: str | None = None,
    include_merged: bool = False,
    seeded: bool | None = None,
) -> QuerySet[Entity]:
    entities = entities_visible(access=access).defer("embedding")
    if not include_merged:
        entities = entities.filter(merged_into__isnull=True)
    if q and q.strip():
        key = entity_normalize_key(q)
        if key:
            # Every word of the query starts a word of the key ("acm corp" finds "ACME
            # Corp."; legal suffixes and punctuation fold away on both sides), or the
            # query is one of the aliases: both answered by GIN indexes, no table scan.
            words = " & ".join(f"{word}:*" for word in key.split())
            entities = entities.alias(
                key_words=SearchVector("normalized_key", config="simple")
            ).filter(
                Q(key_words=SearchQuery(words, search_type="raw", config="simple"))
                | Q(alias_keys__contains=[key])
            )
        else:  # nothing but punctuation: only the name can match
            entities = entities.filter(name__icontains=q.strip())
    if type:
        entities = entities.filter(type=type)
    if scope:
        entities = entities.filter(scope=scope)
    if seeded is not None:
        entities = entities.filter(seeded=seeded)
    return entities.order_by("-updated_at", "-id")


def entity_get(*, access: ContextAccess, entity_id: int) -> Entity:
    entity = (
        entities_visible(access=access).prefetch_related("identifiers").filter(pk=entity_id).first()
    )
    if entity is None:
        raise NotFound(f"entity {entity_id} not found", code="entity_not_found")
    return entity


def entity_audit_events(*, access: ContextAccess, entity: Entity) -> QuerySet[AuditEvent]:
    return AuditEvent.objects.filter(
        context=access.context, target_type="entity", target_id=str(entity.pk)
    ).order_by("-created_at", "-id")
