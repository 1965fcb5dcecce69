"""Bulk entity import (seeding) from CSV or JSONL: one upsert per row, per-row report.

The file is refused whole (``ValidationFailed``) only when it cannot be read as a table of
entities at all; anything wrong with a single row becomes an ``error`` entry of the report
and the other rows still land. Each row is its own savepoint, so a failing row leaves
nothing behind.

Rows are written in batches of BATCH_ROWS, one transaction each: a batch's rows are marked
canonical and audited together (one ``entities_seed`` event listing its rows), and their
vectors are computed together after the batch commits — not one commit, audit event and
embedding task per row (see docs/BENCHMARKS.md, "Seeding throughput").
"""

from __future__ import annotations

import csv
import io
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

from django.db import DataError, IntegrityError
from django.utils import timezone

from memory.domain.access import ContextAccess
from memory.infra.queueing import (
    entity_embeddings_collect,
    entity_embeddings_enqueue,
)
from memory.infra.transactions import transaction_retried
from memory.kernel.errors import DomainError, ValidationFailed
from memory.models import Entity, Role
from memory.services.audit import audit_record
from memory.services.duplicates.finder import duplicates_check_batch
from memory.services.entities.writes import (
    IdentifierInput,
    entities_lock_live,
    entity_find,
    entity_upsert,
)
from memory.services.vectors import vectors_compute

logger = logging.getLogger(__name__)

ImportFormat = Literal["csv", "jsonl"]
RowStatus = Literal["created", "matched", "error"]

MAX_IMPORT_ROWS = 50_000
MAX_IMPORT_BYTES = 20 * 1024 * 1024
# Rows per transaction, audit event and embedding call.
BATCH_ROWS = 100

ENTITY_FIELDS = frozenset({"name", "type", "scope", "aliases", "identifiers", "attributes"})
# Columns (CSV) or keys (JSONL) whose value is an identifier of that kind, so a plain
# export with an ``email`` column resolves people by email without reformatting.
IDENTIFIER_FIELDS = frozenset(
    {"email", "domain", "url", "website", "sku", "phone", "username", "handle", "isbn"}
)
KNOWN_FIELDS = ENTITY_FIELDS | IDENTIFIER_FIELDS


@dataclass(frozen=True)
class ImportRow:
    row: int  # 1-based record number, header excluded
    line: int  # line of the file where the record starts
    status: RowStatus
    entity_id: int | None = None
    message: str = ""


@dataclass
class ImportReport:
    format: ImportFormat
    total: int = 0
    created: int = 0
    matched: int = 0
    failed: int = 0
    rows: list[ImportRow] = field(default_factory=list)
    # File-level remarks that are not errors (e.g. extra CSV columns kept as attributes).
    notes: list[str] = field(default_factory=list)

    def add(self, entry: ImportRow) -> None:
        self.rows.append(entry)
        if entry.status == "created":
            self.created += 1
        elif entry.status == "matched":
            self.matched += 1
        else:
            self.failed += 1

    @property
    def errors(self) -> list[ImportRow]:
        return [r for r in self.rows if r.status == "error"]


@dataclass(frozen=True)
class _Record:
    """One parsed row before validation: raw fields, or the reason it could not be read."""

    row: int
    line: int
    fields: dict[str, Any]
    problem: str = ""


class _RowError(ValueError):
    """A row's own fault, reported in its entry."""


def entities_import(
    *,
    access: ContextAccess,
    content: bytes | str,
    format: ImportFormat | None = None,
    scope_default: str | None = None,
    seeded: bool = True,
    on_progress: Callable[[int, int], None] | None = None,
    embed_now: bool = False,
) -> ImportReport:
    """Upsert every row of ``content`` through ``entity_upsert`` and report row by row.

    ``format`` is sniffed when None (a first line starting with ``{`` is JSONL). Rows
    without a scope use ``scope_default``. Fields other than the entity's own and the
    identifier columns (``email``, ``domain``…) are kept as attributes. Seeding canonical
    entities (``seeded=True``) is an admin action; scope grants are checked per row.
    ``on_progress(done, total)`` is called after each batch of rows.

    Vectors of the new and changed entities: with ``embed_now`` (import jobs, already running in
    the worker) computed here after each batch commits; otherwise one
    embedding task per batch for the worker. An embedder failure leaves them to the worker.
    """
    if seeded:
        access.require_role(Role.ADMIN)
    text = _decode(content)
    fmt = format or _sniff(text)
    if fmt not in ("csv", "jsonl"):
        raise ValidationFailed(f"format must be csv or jsonl, got {fmt!r}", code="invalid_format")
    records = _parse_csv(text) if fmt == "csv" else _parse_jsonl(text)
    report = ImportReport(format=fmt, total=len(records))
    extra = sorted({key for record in records for key in record.fields} - KNOWN_FIELDS)
    if extra:
        report.notes.append(f"fields kept as attributes: {', '.join(extra)}")
    for start in range(0, len(records), BATCH_ROWS):
        batch = records[start : start + BATCH_ROWS]
        with entity_embeddings_collect() as changed:
            write = partial(_batch_write, access, batch, scope_default, seeded, changed)
            entries = transaction_retried(write, what="entity import batch")
        for entry in entries:
            report.add(entry)
        _embed(changed, now=embed_now)
        if on_progress is not None:
            on_progress(start + len(batch), report.total)
    return report


def _batch_write(
    access: ContextAccess,
    batch: list[_Record],
    scope_default: str | None,
    seeded: bool,
    changed: list[int],
) -> list[ImportRow]:
    """One batch's rows in one transaction (``changed`` collects the entities to embed)."""
    changed.clear()  # what a broken attempt collected was rolled back
    # The entities the rows match already, locked together in id order before each row's
    # upsert locks its own in file order (docs/decisions/0119).
    entities_lock_live(_matches(access, batch, scope_default))
    # One duplicate check for the batch's entities, in its transaction.
    with duplicates_check_batch():
        entries = [_import_one(access=access, record=r, scope_default=scope_default) for r in batch]
    if seeded:
        _seed_batch(access, entries)
    return entries


def _matches(access: ContextAccess, batch: list[_Record], scope_default: str | None) -> list[int]:
    ids = []
    for record in batch:
        try:
            values = _row_values(record.fields, scope_default=scope_default)
        except _RowError:
            continue  # reported by its upsert
        found = entity_find(
            access=access, name=values["name"], type=values["type"], scope=values["scope"]
        )
        if found is not None:
            ids.append(found.pk)
    return ids


def _seed_batch(access: ContextAccess, entries: list[ImportRow]) -> None:
    """Mark a batch's entities canonical and record one audit event listing its rows."""
    done = [e for e in entries if e.entity_id is not None]
    if not done:
        return
    ids = [e.entity_id for e in entries if e.entity_id is not None]
    marked = set(Entity.objects.filter(pk__in=ids, seeded=False).values_list("pk", flat=True))
    Entity.objects.filter(pk__in=marked).update(seeded=True, updated_at=timezone.now())
    created = sum(e.status == "created" for e in done)
    canonical = sum(e.status != "created" and e.entity_id in marked for e in done)
    audit_record(
        context=access.context,
        actor=access.user,
        action="entities_seed",
        target_type="import",
        target_id=f"rows {entries[0].row}-{entries[-1].row}",
        summary=f"seeded {len(done)} entities (rows {entries[0].row}–{entries[-1].row}): "
        f"{created} created, {canonical} marked canonical",
        after={
            "rows": [
                {"row": e.row, "entity_id": e.entity_id, "status": e.status,
                 "marked_canonical": e.entity_id in marked}
                for e in done
            ]
        },
    )  # fmt: skip


def _embed(entity_ids: list[int], *, now: bool) -> None:
    if not entity_ids:
        return
    if now:
        try:
            vectors_compute("entities", entity_ids)
            return
        except Exception:  # the embedder is down: the worker retries later
            logger.warning("import: embedding %s entities failed; queued", len(entity_ids))
    entity_embeddings_enqueue(entity_ids)


def _decode(content: bytes | str) -> str:
    raw = content.encode() if isinstance(content, str) else content
    if len(raw) > MAX_IMPORT_BYTES:
        raise ValidationFailed(
            f"the file is {len(raw):,} bytes; at most {MAX_IMPORT_BYTES:,} (20 MB) per import",
            code="file_too_large",
        )
    try:
        text = raw.decode("utf-8-sig")  # spreadsheet exports often start with a BOM
    except UnicodeDecodeError as exc:
        raise ValidationFailed(
            f"the file is not UTF-8 text (byte {exc.start}); export it as UTF-8 CSV or JSONL",
            code="undecodable",
        ) from exc
    if "\x00" in text:
        raise ValidationFailed("the file contains NUL bytes: it is not text", code="undecodable")
    if not text.strip():
        raise ValidationFailed("the file is empty", code="empty_file")
    return text


def _sniff(text: str) -> ImportFormat:
    first = text.lstrip()[:1]
    if first == "[":
        raise ValidationFailed(
            "this looks like a JSON array; use JSONL (one JSON object per line) or CSV",
            code="invalid_format",
        )
    return "jsonl" if first == "{" else "csv"


def _check_row_count(count: int) -> None:
    if count > MAX_IMPORT_ROWS:
        raise ValidationFailed(
            f"the file has more than {MAX_IMPORT_ROWS:,} rows; split it into smaller files",
            code="too_many_rows",
        )


def _parse_csv(text: str) -> list[_Record]:
    first_line = text.split("\n", 1)[0]
    delimiter = "\t" if "\t" in first_line and "," not in first_line else ","
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    records: list[_Record] = []
    try:
        header = [h.strip().lower() for h in next(reader, [])]
        if "name" not in header:
            raise ValidationFailed(
                "not an entity CSV: the header needs a 'name' column "
                "(name,type,scope,aliases,identifiers,attributes)",
                code="invalid_format",
            )
        line = reader.line_num + 1
        for cells in reader:
            if any(cell.strip() for cell in cells):
                _check_row_count(len(records) + 1)
                records.append(_csv_record(header, cells, row=len(records) + 1, line=line))
            line = reader.line_num + 1
    except csv.Error as exc:
        raise ValidationFailed(
            f"the CSV cannot be read (line {reader.line_num}): {exc}", code="invalid_format"
        ) from exc
    return records


def _csv_record(header: list[str], cells: list[str], *, row: int, line: int) -> _Record:
    if len(cells) > len(header):
        return _Record(row, line, {}, f"{len(cells)} cells but the header has {len(header)}")
    fields = {
        column: cell.strip()
        for column, cell in zip(header, cells, strict=False)
        if column and cell.strip()
    }
    return _Record(row, line, fields)


def _parse_jsonl(text: str) -> list[_Record]:
    records: list[_Record] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        _check_row_count(len(records) + 1)
        row = len(records) + 1
        try:
            value = json.loads(line)
        except ValueError as exc:
            records.append(_Record(row, line_no, {}, f"not valid JSON: {exc}"))
            continue
        if isinstance(value, dict):
            records.append(_Record(row, line_no, value))
        else:
            records.append(_Record(row, line_no, {}, "each line must be a JSON object"))
    if not any(record.fields for record in records):
        raise ValidationFailed(
            'not JSONL: no line is a JSON object like {"name": ..., "scope": ...}',
            code="invalid_format",
        )
    return records


def _import_one(*, access: ContextAccess, record: _Record, scope_default: str | None) -> ImportRow:
    try:
        if record.problem:
            raise _RowError(record.problem)
        values = _row_values(record.fields, scope_default=scope_default)
        # entity_upsert is atomic: inside the batch, a savepoint, so a failing row leaves
        # nothing behind. Marking canonical and the audit are the batch's (_seed_batch).
        result = entity_upsert(access=access, seeded=False, **values)
    except _RowError as exc:
        return ImportRow(record.row, record.line, "error", message=str(exc))
    except DomainError as exc:  # scope errors among them
        return ImportRow(record.row, record.line, "error", message=exc.message)
    except (DataError, IntegrityError) as exc:
        message = f"the database refused this row: {str(exc)[:200]}"
        return ImportRow(record.row, record.line, "error", message=message)
    note = "" if result.created else f"matched by {result.matched_by}"
    return ImportRow(
        record.row,
        record.line,
        "created" if result.created else "matched",
        entity_id=result.entity.pk,
        message="; ".join([note, *result.warnings]).strip("; "),
    )


def _row_values(fields: dict[str, Any], *, scope_default: str | None) -> dict[str, Any]:
    """The keyword arguments of ``entity_upsert`` for one row (CSV text or JSON values)."""
    name = fields.get("name")
    if name is None or (isinstance(name, str) and not name.strip()):
        raise _RowError("the row has no name")
    scope = fields.get("scope") or scope_default
    if not scope:
        raise _RowError("the row has no scope and no default scope was given")
    for key in ("scope", "type"):
        if fields.get(key) is not None and not isinstance(fields[key], str):
            raise _RowError(f"{key} must be a string")
    identifiers = [*_identifiers(fields.get("identifiers"))]
    for kind in sorted(IDENTIFIER_FIELDS & fields.keys()):
        if fields[kind] not in (None, ""):
            identifiers.append(_identifier_item({"kind": kind, "value": fields[kind]}))
    extra = {k: v for k, v in fields.items() if k not in KNOWN_FIELDS and v not in (None, "")}
    return {
        "name": name,
        "scope": scope,
        "type": fields.get("type") or None,
        "aliases": _aliases(fields.get("aliases")),
        "identifiers": identifiers,
        "attributes": {**extra, **_attributes(fields.get("attributes"))},
    }


def _aliases(raw: Any) -> list[str]:
    if raw is None or raw == "":
        return []
    if isinstance(raw, str):
        return [a.strip() for a in raw.split(";") if a.strip()]
    if isinstance(raw, list) and all(isinstance(a, str) for a in raw):
        return [a for a in raw if a.strip()]
    raise _RowError("aliases must be a list of strings (JSONL) or 'a;b;c' (CSV)")


def _identifiers(raw: Any) -> Iterator[IdentifierInput]:
    if raw is None or raw == "":
        return
    if isinstance(raw, str):
        for part in (p.strip() for p in raw.split(";")):
            kind, sep, value = part.partition(":")
            if part and not sep:
                raise _RowError(f"identifier {part[:80]!r} must look like kind:value")
            if part:
                yield IdentifierInput(kind.strip(), value.strip())
    elif isinstance(raw, dict):  # {"email": "a@b.c"} is accepted too
        for kind, value in raw.items():
            yield _identifier_item({"kind": kind, "value": value})
    elif isinstance(raw, list):
        for item in raw:
            yield _identifier_item(item)
    else:
        raise _RowError("identifiers must be a list of {kind, value} objects")


def _identifier_item(item: Any) -> IdentifierInput:
    if not isinstance(item, dict) or not isinstance(item.get("kind"), str):
        raise _RowError('each identifier must be an object {"kind": ..., "value": ...}')
    value = item.get("value")
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise _RowError(f"identifier {item['kind'][:40]!r} needs a text value")
    kind = "url" if item["kind"] == "website" else item["kind"]
    return IdentifierInput(kind, str(value))


def _attributes(raw: Any) -> dict[str, Any]:
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise _RowError(f"attributes is not valid JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise _RowError("attributes must be a JSON object")
    return raw
