"""Import a memory export (``memory.services.transfer.format``) into an empty context.

Two phases. Reading (``import_lines.py``): every line is checked and copied (COPY, a few
thousand rows at a time) into a session-local staging table per line type, holding the
exporting database's ids; progress is reported as lines are read. Writing
(``import_rows.py``), in one transaction: each staged row gets a new id from its table's
sequence, and one INSERT … SELECT per type writes the rows with every reference remapped
through the staging tables. A bad line, a reference to a row the file does not hold, or
counts that disagree with the ``end`` line stop the import before anything is written.
Then the search postings are loaded in bulk (``import_index.py``: the facts' and
entities' texts are analyzed from the rows read, in a thread, while the connection
writes them), the blocking keys of the duplicate finder written, and the embedding queue
told; items are embedded once the import has committed.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import connection, transaction

from memory.domain.access import ContextAccess
from memory.infra.queueing import embeddings_drain_enqueue
from memory.infra.restore_writes import replica_role_leave
from memory.kernel.errors import Conflict, ValidationFailed
from memory.matching.model import Model
from memory.matching.weights import model_save
from memory.models import Context, Document, Entity, Fact, Item, Role, Turn
from memory.search.models import Target
from memory.services.items.writes import items_vectors_fill
from memory.services.transfer.format import CONTEXT_SETTINGS, KINDS
from memory.services.transfer.import_constraints import import_constraints_remap
from memory.services.transfer.import_index import ImportKeys, memory_import_index
from memory.services.transfer.import_lines import Progress, Staging
from memory.services.transfer.import_restore import (
    restore_keys_checked,
    restore_rows_checked,
    restore_triggers_off,
)
from memory.services.transfer.import_rows import StagedRows

# Memory for each sort or hash of the import's statements, for its transaction only.
WORK_MEM = "256MB"


@dataclass
class MemoryImportReport:
    counts: dict[str, int] = field(default_factory=dict)
    lines: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # Whether the rows' foreign keys and insert triggers were checked and done set-based
    # (decision 0099) rather than row by row at commit.
    set_based_checks: bool = False
    # Whether the facts' and entities' texts were analyzed from the file's rows while
    # the rows were written (decision 0104) rather than read back once written.
    texts_analyzed_ahead: bool = False


def memory_import_check_empty(context: Context) -> None:
    """An import adds a whole memory: only into a context that holds none."""
    for model in (Entity, Fact, Turn, Document, Item):
        if model._default_manager.filter(context=context).exists():
            raise Conflict(
                f"context {context.slug!r} already holds {model._meta.verbose_name_plural}; "
                "import a memory into a new, empty context",
                code="context_not_empty",
            )


def memory_import(
    *,
    access: ContextAccess,
    lines: Iterable[str],
    total_lines: int = 0,
    on_progress: Progress | None = None,
    apply_settings: bool = True,
) -> MemoryImportReport:
    """Read ``lines`` (an export) into the empty context; see the module docstring."""
    access.require_role(Role.ADMIN)
    context = access.context
    memory_import_check_empty(context)
    report = MemoryImportReport()
    started = time.perf_counter()
    staging = Staging()
    keys = ImportKeys(context)
    try:
        header, end, extras, report.lines = staging.read(
            lines, total_lines, on_progress, report.counts
        )
        report.seconds["read"] = round(time.perf_counter() - started, 3)
        _check_counts(end, report.counts)
        # Python analyzes the facts' and entities' texts while PostgreSQL writes the rows.
        staging.texts.start()
        with transaction.atomic():
            Context.objects.select_for_update().filter(pk=context.pk).first()
            memory_import_check_empty(context)
            with connection.cursor() as cursor:
                # The postings' sorts and aggregates run over every posting of a corpus
                # at once (several million rows at a million facts).
                cursor.execute(f"SET LOCAL work_mem = '{WORK_MEM}'")
            rows = StagedRows(staging, report.counts)
            rows.prepare()
            # A restore into an empty context writes rows nobody else can see: their
            # triggers' work is done set-based where the database allows it.
            per_row = restore_triggers_off(KINDS)
            report.set_based_checks = per_row is None
            if per_row is not None:
                report.notes.append(per_row)
            rows.insert(context.pk, report.counts)
            import_constraints_remap(
                context_id=context.pk,
                entity_ids=rows.refs()[Target.ENTITY] if report.counts.get("entity") else None,
            )
            if report.set_based_checks:
                restore_rows_checked(context.pk, rows.new_ids())
            report.seconds["write"] = round(time.perf_counter() - started, 3)
            # Python makes blocking keys while PostgreSQL loads the postings.
            keys.begin()
            report.texts_analyzed_ahead = memory_import_index(context, staging.texts, rows.refs())
            report.seconds["postings"] = round(time.perf_counter() - started, 3)
            keys.write()
            if report.set_based_checks:
                restore_keys_checked(context.pk)
                replica_role_leave()
            if apply_settings:
                _apply_settings(context, header)
            model_json = extras.get("duplicate_model")
            entity_count = Entity.objects.filter(context=context, merged_into__isnull=True)
            if model_json is not None:
                model_save(context.pk, Model.from_json(model_json), entity_count.count())
            report.seconds["keys"] = round(time.perf_counter() - started, 3)
        report.seconds["index"] = round(time.perf_counter() - started, 3)
    finally:
        keys.close()
        staging.drop()
    embeddings_drain_enqueue()
    if report.counts.get("item"):
        # Items have no place in the worker's embedding queue: a put embeds its own.
        items_vectors_fill(context_id=context.pk)
    return report


def _check_counts(end: dict[str, Any] | None, counts: dict[str, int]) -> None:
    if end is None:
        raise ValidationFailed(
            "the file has no end line: the export is cut short", code="export_truncated"
        )
    expected = end.get("counts")
    if not isinstance(expected, dict):
        raise ValidationFailed("the end line needs its counts", code="invalid_export")
    for name, want in expected.items():
        if counts.get(name, 0) != want:
            raise ValidationFailed(
                f"the end line counts {want} {name} lines, the file holds "
                f"{counts.get(name, 0)}: the export is incomplete",
                code="export_truncated",
            )


def _apply_settings(context: Context, header: dict[str, Any]) -> None:
    settings = header.get("context")
    if not isinstance(settings, dict):
        return
    changed = {k: settings[k] for k in CONTEXT_SETTINGS if k in settings}
    for name, value in changed.items():
        setattr(context, name, value)
    try:
        context.full_clean(exclude=["slug", "name"])
    except DjangoValidationError as exc:
        raise ValidationFailed(
            f"the header's context settings: {exc}", code="invalid_export"
        ) from None
    context.save(update_fields=list(changed))
