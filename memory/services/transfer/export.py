"""Export a whole memory (one context) as JSON lines, streamed: a few thousand rows in
memory at a time whatever the context's size (``memory.services.transfer.format``
describes the format)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.utils import timezone

from memory.domain.access import ContextAccess
from memory.models import Role
from memory.models.duplicate import DuplicateModel
from memory.services.transfer.format import (
    CONTEXT_SETTINGS,
    FORMAT,
    FORMAT_VERSION,
    KINDS,
    Kind,
)

CHUNK_ROWS = 2_000


class _Encoder(DjangoJSONEncoder):
    """Datetimes as ISO 8601 with their offset (DjangoJSONEncoder trims microseconds,
    which the round trip must keep)."""

    def default(self, o: Any) -> Any:
        if hasattr(o, "isoformat") and hasattr(o, "tzinfo"):
            return o.isoformat()
        return super().default(o)


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, cls=_Encoder, ensure_ascii=False, separators=(",", ":")) + "\n"


def memory_export_lines(*, access: ContextAccess) -> Iterator[str]:
    """The context's lines, header first and counts last (admins: it is everything)."""
    access.require_role(Role.ADMIN)
    context = access.context
    yield _line(
        {
            "record": "header",
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "exported_at": timezone.now(),
            "context": {"slug": context.slug, "name": context.name}
            | {name: getattr(context, name) for name in CONTEXT_SETTINGS},
        }
    )
    counts: dict[str, int] = {}
    for kind in KINDS:
        if kind.name == "entity":
            yield from _duplicate_model(context.pk)
        counts[kind.name] = 0
        for line in _rows(kind, context.pk):
            counts[kind.name] += 1
            yield line
    yield _line({"record": "end", "counts": counts})


def _rows(kind: Kind, context_id: int) -> Iterator[str]:
    names = kind.field_names()
    rows = (
        kind.model._default_manager.filter(**{kind.context_path: context_id})
        .order_by("pk")
        .values_list(*names)
        .iterator(chunk_size=CHUNK_ROWS)
    )
    for row in rows:
        record: dict[str, Any] = {"record": kind.name}
        record.update(zip(names, row, strict=True))
        yield _line(record)


def _duplicate_model(context_id: int) -> Iterator[str]:
    """The learnt duplicate weights: no ids in them, and learning them again takes a
    full scan."""
    row = DuplicateModel.objects.filter(context_id=context_id).first()
    if row is not None:
        yield _line({"record": "duplicate_model", "params": row.params, "entities": row.entities})
