"""Reads the registry screens need beyond the predicate rows."""

from __future__ import annotations

from django.db.models import Count

from memory.access import ContextAccess
from memory.models import AuditEvent, Entity, Fact, FactStatus, Predicate


def subjects_with_several_values(*, access: ContextAccess, predicate: Predicate) -> int:
    """How many subjects (among the facts the caller can read) hold more than one current
    value of ``predicate``: what turning single-valued on leaves for a curator to settle,
    since the flag rules new writes and supersedes nothing already stored."""
    return (
        Fact.objects.filter(
            access.grants.read_q(),
            context=access.context,
            predicate=predicate,
            status=FactStatus.CURRENT,
        )
        .values("subject_id")
        .annotate(values=Count("id"))
        .filter(values__gt=1)
        .count()
    )


def predicate_last_update(*, access: ContextAccess, predicate: Predicate) -> AuditEvent | None:
    """The newest edit of ``predicate`` (its audit event carries the undo)."""
    return (
        AuditEvent.objects.filter(
            context=access.context, action="predicate_update", target_id=predicate.name
        )
        .order_by("-pk")
        .first()
    )


def entity_names(*, access: ContextAccess, entity_ids: list[int]) -> dict[int, str]:
    """Names of the readable entities among ``entity_ids`` (one query), for reports that
    store ids."""
    if not entity_ids:
        return {}
    return dict(
        Entity.objects.filter(
            access.grants.read_q(), context=access.context, pk__in=entity_ids
        ).values_list("pk", "name")
    )
