"""A curator deletes an item: audited, with what it extracted taken back, and undone
exactly from the audit log.

The API's deletes (``items_write``) are an agent's store working op by op, like a
database; a curator's delete is a change to the memory, so it keeps the whole row in its
audit event — value, index, text, vector, lifetime, times and the extraction it links
to — and the undo writes it back with its id. Deleting takes back what the item
extracted (``item_extraction_take_back``: its run retracted, or its turn's facts); the
undo brings the item back first, then undoes that retraction through its own audit
event, or queues again a run that was failed before it ran.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models.expressions import RawSQL
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from memory.domain.access import ContextAccess
from memory.domain.namespaces import Namespace
from memory.infra.pg_rows import json_text
from memory.infra.queueing import items_sweep_enqueue
from memory.kernel.errors import Conflict, NotFound
from memory.kernel.wording import counted
from memory.models import Item, Role, Run, RunOutcome, Turn
from memory.search.analyzer import analyze
from memory.search.bm25 import IndexItem, postings_replace
from memory.search.models import Target
from memory.selectors.items import items_visible
from memory.services.audit import audit_record
from memory.services.ingest.run import run_enqueue
from memory.services.items.extract import FAILED_BEFORE_IT_RAN, item_extraction_take_back
from memory.services.items.writes import items_delete_ids

# The columns an undo writes back (the vector as pgvector's text).
_ROW = (
    "id", "namespace", "scope", "key", "value", "index", "text", "embedding_model",
    "ttl_minutes", "expires_at", "run_id", "turn_id", "created_at", "updated_at",
)  # fmt: skip


@dataclass(frozen=True)
class ItemDeleted:
    namespace: Namespace
    audit_event_id: int
    summary: str
    facts_retracted: int


def item_label(namespace: list[str] | tuple[str, ...], key: str) -> str:
    """How messages and the audit log name an item."""
    return f"{' / '.join(namespace)} · {key}"


@transaction.atomic
def item_delete(*, access: ContextAccess, item_id: int) -> ItemDeleted:
    """Delete a live item the caller reads and may write (a curator's), taking back
    what it extracted; NotFound for an item the caller cannot see."""
    access.require_role(Role.CURATOR)
    row = _row_locked(access, item_id)
    access.require_write(row["scope"])
    taken = item_extraction_take_back(access=access, run_id=row["run_id"], turn_id=row["turn_id"])
    items_delete_ids([item_id])
    label = item_label(row["namespace"], row["key"])
    summary = f"deleted item {label}"
    if taken.facts:
        summary += f" and retracted the {counted(taken.facts, 'fact')} it extracted"
    elif taken.failed_run_id:
        summary += f"; its extraction (run {taken.failed_run_id}) will not run"
    event = audit_record(
        context=access.context,
        actor=access.user,
        action="item_delete",
        target_type="item",
        target_id=item_id,
        summary=summary,
        before={"namespace": row["namespace"], "key": row["key"], "value": row["value"]},
        undo={
            "op": "item_restore",
            "item": row,
            "retraction_event": taken.audit_event_id,
            "failed_run": taken.failed_run_id,
        },
    )
    return ItemDeleted(
        namespace=tuple(row["namespace"]),
        audit_event_id=event.pk,
        summary=summary,
        facts_retracted=taken.facts,
    )


def _row_locked(access: ContextAccess, item_id: int) -> dict[str, Any]:
    visible = items_visible(access).filter(pk=item_id).select_for_update().values_list("pk")
    if not visible:
        raise NotFound(f"item {item_id} not found", code="item_not_found")
    row = (
        Item.objects.filter(pk=item_id)
        .annotate(vector=RawSQL("embedding::text", []))
        .values(*_ROW, "vector")
        .get()
    )
    row["embedding"] = row.pop("vector")
    # Full ISO text: the audit log's encoder keeps only milliseconds.
    return {k: v.isoformat() if isinstance(v, dt.datetime) else v for k, v in row.items()}


@transaction.atomic
def item_restore(*, access: ContextAccess, undo: dict[str, Any]) -> int | None:
    """Write a deleted item back with its id (the audit undo of ``item_delete``), or
    raise Conflict (409) when another item took its namespace and key since. Returns
    the audit event of the retraction that the caller undoes next, if any."""
    row = dict(undo["item"])
    access.require_write(row["scope"])
    taken = Item.objects.filter(
        context=access.context, namespace=row["namespace"], key=row["key"]
    ).exists()
    if taken:
        raise Conflict(
            f"item {item_label(row['namespace'], row['key'])} was written again since; delete "
            "that one first to bring this one back",
            code="undo_blocked",
        )
    row["run_id"] = Run.objects.filter(pk=row["run_id"]).values_list("pk", flat=True).first()
    row["turn_id"] = Turn.objects.filter(pk=row["turn_id"]).values_list("pk", flat=True).first()
    row["expires_at"] = _lifetime(row)
    _insert(access.context.pk, row)
    terms = analyze(row["text"]) if row["text"] else []
    if terms:
        postings_replace(
            context_id=access.context.pk,
            target=Target.ITEM,
            items=[IndexItem(ref_id=row["id"], scope=row["scope"], terms=terms)],
            unindexed=[row["id"]],
        )
    if row["expires_at"] is not None:
        items_sweep_enqueue(run_after=row["expires_at"])
    _requeue(undo.get("failed_run"))
    audit_record(
        context=access.context,
        actor=access.user,
        action="item_restore",
        target_type="item",
        target_id=row["id"],
        summary=f"brought back item {item_label(row['namespace'], row['key'])}",
    )
    event_id = undo.get("retraction_event")
    return int(event_id) if event_id else None


def _lifetime(row: dict[str, Any]) -> dt.datetime | None:
    """The item's expiry as it was; one that has passed since starts again, so that the
    undo brings back an item that can be read."""
    expires = parse_datetime(row["expires_at"]) if row["expires_at"] else None
    if expires is None or row["ttl_minutes"] is None:
        return expires
    now = timezone.now()
    return expires if expires > now else now + dt.timedelta(minutes=row["ttl_minutes"])


def _insert(context_id: int, row: dict[str, Any]) -> None:
    names = [*_ROW, "embedding"]
    values = [row[name] for name in names]
    casts = {"namespace": "%s::text[]", "value": "%s::jsonb", "index": "%s::jsonb",
             "embedding": "%s::vector"}  # fmt: skip
    placeholders = [casts.get(name, "%s") for name in names]
    for i, name in enumerate(names):
        if name in ("value", "index") and values[i] is not None:
            values[i] = json_text(values[i])
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO memory_item (context_id, {', '.join(names)}) "  # noqa: S608
            f"VALUES (%s, {', '.join(placeholders)})",
            [context_id, *values],
        )


def _requeue(run_id: int | None) -> None:
    """A run failed because its item was deleted before it ran runs after all."""
    if not run_id:
        return
    run = (
        Run.objects.select_for_update()
        .filter(pk=run_id, outcome=RunOutcome.FAILED, error=FAILED_BEFORE_IT_RAN)
        .first()
    )
    if run is None:
        return
    run.outcome, run.error = RunOutcome.PENDING, ""
    run.save(update_fields=["outcome", "error"])
    run_enqueue(run=run)
