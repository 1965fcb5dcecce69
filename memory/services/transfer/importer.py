"""Import a memory export (``memory.services.transfer.format``) into an empty context.

Two phases. Reading: every line is checked and copied (COPY, a few thousand rows at a
time) into a session-local staging table per line type, holding the exporting
database's ids; progress is reported as lines are read. Writing, in one transaction:
each staged row gets a new id from its table's sequence, and one INSERT … SELECT per
type writes the rows with every reference remapped through the staging tables. A bad
line, a reference to a row the file does not hold, or counts that disagree with the
``end`` line stop the import before anything is written. Then the search postings are
loaded in bulk (memory_import_index.py: the facts' and entities' texts are analyzed
from the rows read, in a thread, while the connection writes them), the blocking keys of
the duplicate finder written, and the embedding queue told.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import psycopg
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DatabaseError, connection, models, transaction
from django.utils import timezone
from psycopg.types.json import Jsonb

from memory.domain.access import ContextAccess
from memory.infra.queueing import embeddings_drain_enqueue
from memory.infra.restore_writes import replica_role_leave, serial_sequence, triggers_firing
from memory.kernel.errors import Conflict, ValidationFailed
from memory.matching.model import Model
from memory.matching.weights import model_save
from memory.models import (
    Context,
    Document,
    Entity,
    Fact,
    Predicate,
    PredicateAlias,
    Role,
    Turn,
)
from memory.search.models import Target
from memory.services.transfer.format import (
    CONTEXT_SETTINGS,
    FORMAT,
    FORMAT_VERSION,
    KIND_BY_NAME,
    KIND_OF_MODEL,
    KINDS,
    SKIPPED_COLUMNS,
    Kind,
)
from memory.services.transfer.import_constraints import import_constraints_remap
from memory.services.transfer.import_index import (
    ImportKeys,
    ImportTexts,
    memory_import_index,
)
from memory.services.transfer.import_restore import (
    restore_keys_checked,
    restore_rows_checked,
    restore_triggers_off,
)

FLUSH_ROWS = 5_000  # rows of a kind held before they are sent
STREAM_ROWS = 50_000  # rows of a kind sent through one COPY (progress is told between two)
# Memory for each sort or hash of the import's statements, for its transaction only.
WORK_MEM = "256MB"
# Rows of a kind from which its table is analyzed once written (a sample of at most
# 30,000 rows a table, the columns the import reads by: a tenth of a second or so).
ANALYZE_ROWS = 1_000
MAX_LINE_ERRORS_SHOWN = 1

Progress = Callable[[int, int], None]


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
    for model in (Entity, Fact, Turn, Document):
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
    staging = _Staging()
    keys = ImportKeys(context)
    try:
        header, end, extras = staging.read(lines, total_lines, on_progress, report)
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
            staging.prepare(report)
            # A restore into an empty context writes rows nobody else can see: their
            # triggers' work is done set-based where the database allows it.
            per_row = restore_triggers_off(KINDS)
            report.set_based_checks = per_row is None
            if per_row is not None:
                report.notes.append(per_row)
            staging.insert(context.pk, report.counts)
            import_constraints_remap(
                context_id=context.pk,
                entity_ids=_ids(KIND_BY_NAME["entity"]) if report.counts.get("entity") else None,
            )
            if report.set_based_checks:
                restore_rows_checked(context.pk, staging.new_ids())
            report.seconds["write"] = round(time.perf_counter() - started, 3)
            # Python makes blocking keys while PostgreSQL loads the postings.
            keys.begin()
            report.texts_analyzed_ahead = memory_import_index(
                context, staging.texts, staging.refs()
            )
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


# --- staging ------------------------------------------------------------------------------


def _table(kind: Kind) -> str:
    return f"memory_import_{kind.name}"


def _ids(kind: Kind) -> str:
    return f"memory_import_{kind.name}_ids"


class _Staging:
    """Session-local staging tables, one per line type, holding rows as exported."""

    def __init__(self) -> None:
        self.created: list[str] = []
        self.buffers: dict[str, list[list[Any]]] = {}
        self.defaults: dict[str, tuple[Any, ...]] = {}
        self.replace_registry = False
        self.counts: dict[str, int] = {}
        self.texts = ImportTexts()
        self.stream = _CopyStream()

    def read(
        self,
        lines: Iterable[str],
        total: int,
        on_progress: Progress | None,
        report: MemoryImportReport,
    ) -> tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any]]:
        with connection.cursor() as cursor:
            for kind in KINDS:
                table = _table(kind)
                cursor.execute(f"DROP TABLE IF EXISTS {table}")
                cursor.execute(
                    f"CREATE TEMP TABLE {table} AS "  # noqa: S608 - names from the models
                    f"SELECT * FROM {kind.model._meta.db_table} WITH NO DATA"
                )
                self.created.append(table)
        try:
            return self._read_lines(lines, total, on_progress, report)
        except BaseException:
            self.stream.abort()  # the COPY open, if any, is given up with its rows
            raise

    def _read_lines(
        self,
        lines: Iterable[str],
        total: int,
        on_progress: Progress | None,
        report: MemoryImportReport,
    ) -> tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any]]:
        header: dict[str, Any] | None = None
        end: dict[str, Any] | None = None
        extras: dict[str, Any] = {}
        number = reported = 0
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            record = _parse(raw, number)
            type_ = record.pop("record")
            if number == 1 or header is None:
                if type_ != "header":
                    raise ValidationFailed(
                        "line 1 is not the header of a memory export", code="invalid_export"
                    )
                header = _check_header(record)
                continue
            if end is not None:
                raise ValidationFailed(
                    f"line {number}: a line after the end line", code="invalid_export"
                )
            if type_ == "end":
                end = record
            elif type_ == "duplicate_model":
                extras["duplicate_model"] = record.get("params")
            elif type_ in KIND_BY_NAME:
                self._add(KIND_BY_NAME[type_], record, number, "\\u0000" in raw)
                report.counts[type_] = report.counts.get(type_, 0) + 1
            else:
                raise ValidationFailed(
                    f"line {number}: unknown line type {str(type_)[:40]!r}", code="invalid_export"
                )
            # Progress may write to the database (a job's row): only between two COPYs.
            if on_progress is not None and number - reported >= 1_000 and self.stream.idle:
                on_progress(number, max(total, number))
                reported = number
        if header is None:
            raise ValidationFailed("the file is empty", code="invalid_export")
        for name in list(self.buffers):
            self._flush(KIND_BY_NAME[name])
        self.stream.close()
        report.lines = number
        if on_progress is not None:
            on_progress(number, max(total, number))
        return header, end, extras

    def _add(self, kind: Kind, record: dict[str, Any], number: int, nul: bool) -> None:
        """Stage one line's row. ``nul``: the line may hold a NUL character (JSON writes
        one only as an escape), so its texts are checked one by one."""
        plan = _plan(kind)
        missing = self._missing(kind)
        row = list(missing)
        position, scalar = plan.position, plan.scalar
        # Only the fields the line gives (a third of a fact's): the defaults are known good.
        for name, value in record.items():
            i = position.get(name)
            if i is None:
                if name in SKIPPED_COLUMNS:
                    continue
                raise ValidationFailed(
                    f"line {number}: {kind.name} has no field {name[:40]!r}",
                    code="invalid_export",
                )
            row[i] = value
            if scalar[i] and (type(value) is dict or type(value) is list):
                _wrong_shape(plan.fields[i], kind, number)  # a parsed line holds no other
        for i in plan.stamped:  # a time the row was written: now, when not known
            if row[i] is None:
                row[i] = missing[i]
        for i, nullable in plan.json:
            value = row[i]
            row[i] = None if value is None and nullable else Jsonb(value)
        for i in plan.arrays:
            row[i] = _array_cell(plan.fields[i], row[i], kind, number)
        if nul:
            for i in plan.scalars:
                _text_checked(row[i], plan.fields[i], kind, number)
        if self.texts.wants(kind):
            self.texts.add(kind, row)
        buffer = self.buffers.setdefault(kind.name, [])
        buffer.append(row)
        if len(buffer) >= FLUSH_ROWS:
            self._flush(kind)

    def _missing(self, kind: Kind) -> tuple[Any, ...]:
        """What each field of ``kind`` holds when a line leaves it out, worked out once
        per import: the defaults are constants (or empty lists and objects, which no
        row changes), and a stamped field's "now" is the import's."""
        missing = self.defaults.get(kind.name)
        if missing is None:
            missing = self.defaults[kind.name] = tuple(_default(f) for f in kind.fields())
        return missing

    def _flush(self, kind: Kind) -> None:
        rows = self.buffers.pop(kind.name, [])
        if rows:
            self.stream.write(kind, rows)

    def prepare(self, report: MemoryImportReport) -> None:
        """Give every staged row a new id (the references are checked as the rows are
        written, ``_insert_sql``); a file with predicates replaces the context's
        registry."""
        self.replace_registry = report.counts.get("predicate", 0) > 0
        self.counts = dict(report.counts)
        with connection.cursor() as cursor:
            # Once a session (a later role of the session may not replace it).
            cursor.execute(
                "SELECT 1 FROM pg_proc WHERE proname = 'memory_import_dangling' "
                "AND pronamespace = pg_my_temp_schema()"
            )
            if cursor.fetchone() is None:
                cursor.execute(_DANGLING_FUNCTION)
            for kind in KINDS:
                self._number(cursor, kind)

    def _number(self, cursor: Any, kind: Kind) -> None:
        """The kind's map from old ids to new ones, taken from its table's sequence in
        the order of the old ones (an export of the import lists its rows in the same
        order as the file). A narrow table: the writes join it once per reference."""
        table, ids = _table(kind), _ids(kind)
        cursor.execute(f"DROP TABLE IF EXISTS {ids}")
        if not self.counts.get(kind.name):  # joined all the same, to find a dangling one
            cursor.execute(f"CREATE TEMP TABLE {ids} (id bigint UNIQUE, new_id bigint)")
            self.created.append(ids)
            return
        sequence = f"{serial_sequence(kind.model._meta.db_table)}::regclass"
        cursor.execute(
            f"""
            CREATE TEMP TABLE {ids} AS
            SELECT id, nextval({sequence}) AS new_id
            FROM (SELECT id FROM {table} ORDER BY id) o
            """  # noqa: S608 - names from the models
        )
        self.created.append(ids)
        # The map is the narrow table to look in for a line without an id.
        cursor.execute(f"SELECT 1 FROM {ids} WHERE id IS NULL LIMIT 1")  # noqa: S608
        if cursor.fetchone() is not None:
            raise ValidationFailed(f"a {kind.name} line has no id", code="invalid_export")
        try:
            with transaction.atomic():
                cursor.execute(f"CREATE UNIQUE INDEX ON {ids} (id)")
        except DatabaseError:
            raise ValidationFailed(
                f"two {kind.name} lines have one id", code="invalid_export"
            ) from None
        cursor.execute(f"ANALYZE {ids}")

    def insert(self, context_id: int, counts: dict[str, int]) -> None:
        """One INSERT … SELECT a kind, references remapped; then the statistics of the
        tables written, which the import's own indexing reads at once: a restore into a
        fresh installation would otherwise plan those reads on tables never analyzed."""
        if self.replace_registry:
            with triggers_firing():
                PredicateAlias.objects.filter(context_id=context_id).delete()
                Predicate.objects.filter(context_id=context_id).delete()
        with connection.cursor() as cursor:
            for kind in self._written():
                try:
                    with transaction.atomic():
                        cursor.execute(*_insert_sql(kind, context_id))
                except DatabaseError as exc:
                    if _sqlstate(exc) == DANGLING_SQLSTATE:  # as the function words it
                        raise ValidationFailed(_first_line(exc), code="invalid_export") from None
                    raise ValidationFailed(
                        f"the {kind.name} lines could not be written: {_first_line(exc)}",
                        code="invalid_export",
                    ) from None
            for kind in KINDS:
                # Facts whose texts are analyzed ahead are not read by the import again
                # (their read-back analyzes them first); autovacuum does after commit.
                if kind.name == "fact" and self.texts.usable:
                    continue
                if counts.get(kind.name, 0) >= ANALYZE_ROWS:
                    cursor.execute(_analyze_sql(kind))

    def refs(self) -> dict[Target, str]:
        """The maps from the file's ids to the rows' of the kinds ``texts`` analyzes."""
        return {
            Target.FACT: _ids(KIND_BY_NAME["fact"]),
            Target.ENTITY: _ids(KIND_BY_NAME["entity"]),
        }

    def new_ids(self) -> list[tuple[Kind, str, frozenset[tuple[str, str]]]]:
        """Each kind with a query of the ids its rows were written with, and the foreign
        keys its rows keep by construction (``_kept_keys``)."""
        return [
            (kind, f"SELECT new_id FROM {_ids(kind)}", _kept_keys(kind))  # noqa: S608
            for kind in self._written()
        ]

    def _written(self) -> list[Kind]:
        """The kinds the file has lines of (in dependency order)."""
        return [kind for kind in KINDS if self.counts.get(kind.name)]

    def drop(self) -> None:
        self.texts.close()
        if self.created:
            with connection.cursor() as cursor:
                cursor.execute(f"DROP TABLE IF EXISTS {', '.join(self.created)}")
        self.created = []


class _CopyStream:
    """The COPY into a kind's staging table, kept open from one batch of its rows to the
    next (up to ``STREAM_ROWS``): the server stores the rows sent while Python parses the
    lines that follow, where a COPY a batch would wait for it at the end of each."""

    def __init__(self) -> None:
        self.kind: Kind | None = None
        self.stack: contextlib.ExitStack | None = None
        self.copy: Any = None
        self.rows = 0

    @property
    def idle(self) -> bool:
        return self.stack is None

    def write(self, kind: Kind, rows: list[list[Any]]) -> None:
        if self.kind is not kind:
            self.close()
        try:
            if self.stack is None:
                self._open(kind)
            write_row = self.copy.write_row
            for row in rows:
                write_row(row)
        except (DatabaseError, psycopg.Error) as exc:  # COPY speaks psycopg's errors
            self.abort()
            raise _refused(kind, exc) from None
        self.rows += len(rows)
        if self.rows >= STREAM_ROWS:
            self.close()

    def close(self) -> None:
        """End the COPY: the server has stored every row sent, or says why not."""
        stack, kind = self.stack, self.kind
        self._forget()
        if stack is None or kind is None:
            return
        try:
            stack.close()  # a refusal rolls the COPY's savepoint back on its way out
        except (DatabaseError, psycopg.Error) as exc:
            raise _refused(kind, exc) from None

    def abort(self) -> None:
        """Give the open COPY up (its rows are not stored), for a failure elsewhere."""
        stack = self.stack
        self._forget()
        if stack is not None:
            with contextlib.suppress(Exception):
                stack.__exit__(ValidationFailed, ValidationFailed("the import stopped"), None)

    def _open(self, kind: Kind) -> None:
        columns = ", ".join(str(f.column) for f in kind.fields())
        stack = contextlib.ExitStack()
        try:
            stack.enter_context(transaction.atomic())
            cursor = stack.enter_context(connection.cursor())
            sql = f"COPY {_table(kind)} ({columns}) FROM STDIN"
            self.copy = stack.enter_context(cursor.cursor.copy(sql))
        except BaseException:
            stack.close()
            raise
        self.stack, self.kind, self.rows = stack, kind, 0

    def _forget(self) -> None:
        self.stack, self.kind, self.copy, self.rows = None, None, None, 0


def _refused(kind: Kind, exc: Exception) -> ValidationFailed:
    return ValidationFailed(f"{kind.name} lines: {_first_line(exc)}", code="invalid_export")


def _target_kind(f: models.Field) -> Kind | None:
    if not f.is_relation or f.related_model is None:
        return None
    return KIND_OF_MODEL.get(f.related_model)


def _kept_keys(kind: Kind) -> frozenset[tuple[str, str]]:
    """The foreign keys, as (column, referenced table), that the rows ``_insert_sql``
    writes keep by construction, so that no check need look them up: the context (the
    import's, held locked), each reference remapped through a kind's id map (a staged
    reference the map lacks stops the insert, ``_insert_sql``, and every id of a map is
    that of a row of its kind written in this transaction, which no one else can see to
    delete), and each reference to what an export does not carry (written NULL)."""
    return frozenset(
        (str(f.column), f.related_model._meta.db_table)
        for f in kind.model._meta.concrete_fields
        if f.is_relation and f.related_model is not None
    )


def _insert_sql(kind: Kind, context_id: int) -> tuple[str, list[Any]]:
    """One INSERT … SELECT: new ids, the target context, references remapped through
    the staging tables, references to what an export does not carry (users, runs) NULL,
    vectors left for the worker."""
    table = kind.model._meta.db_table
    columns: list[str] = ["id"]
    values: list[str] = ["n.new_id"]
    joins: list[str] = []
    params: list[Any] = []
    for f in kind.model._meta.concrete_fields:
        if f.attname == "id":
            continue
        columns.append(str(f.column))
        if f.attname == "context_id":
            values.append("%s")
            params.append(context_id)
        elif f.column == "embedding":
            values.append("NULL")
        elif f.column == "embedding_model":
            values.append("''")
        elif f.is_relation:
            target = _target_kind(f)
            if target is None:
                values.append("NULL")
            else:
                # A reference the file does not hold stops the statement, naming it.
                alias = f"j{len(joins)}"
                joins.append(f"LEFT JOIN {_ids(target)} {alias} ON {alias}.id = s.{f.column}")
                values.append(
                    f"CASE WHEN {alias}.new_id IS NULL AND s.{f.column} IS NOT NULL "
                    f"THEN pg_temp.memory_import_dangling('{kind.name}', s.id, "
                    f"'{f.attname}', s.{f.column}) ELSE {alias}.new_id END"
                )
        else:
            values.append(f"s.{f.column}")
    sql = (
        f"INSERT INTO {table} ({', '.join(columns)}) "  # noqa: S608 - names from the models
        f"SELECT {', '.join(values)} FROM {_table(kind)} s JOIN {_ids(kind)} n ON n.id = s.id "
        # In the new ids' order: the primary key and the time-ordered indexes are
        # written at their right edge.
        f"{' '.join(joins)} ORDER BY n.new_id"
    )
    return sql, params


# Raised by the import's INSERT … SELECT for a reference to a row the file does not
# hold: one pass over the staged rows both remaps and checks them. A function of the
# session's own temporary schema (the right to create temporary tables is all it needs).
DANGLING_SQLSTATE = "MDI01"
_DANGLING_FUNCTION = f"""
CREATE FUNCTION pg_temp.memory_import_dangling(
    kind text, id bigint, field text, ref bigint
) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% %: % % is not in the file', kind, id, field, ref
        USING ERRCODE = '{DANGLING_SQLSTATE}';
END $$
"""


def _sqlstate(exc: BaseException) -> str | None:
    cause = exc.__cause__
    return getattr(getattr(cause, "diag", None), "sqlstate", None)


def _analyze_sql(kind: Kind) -> str:
    """ANALYZE of the columns the import's own statements join and filter on: the primary
    key and every reference (a quarter of the whole table's cost for facts). A partial
    ANALYZE leaves the table's count of changes since its last full one as it is, so
    autovacuum still analyzes every column once the import has committed."""
    columns = ["id", *(str(f.column) for f in kind.model._meta.concrete_fields if f.is_relation)]
    return f"ANALYZE {kind.model._meta.db_table} ({', '.join(columns)})"


def _first_line(exc: Exception) -> str:
    return str(exc).strip().split("\n", 1)[0][:300]


def _parse(raw: str, number: int) -> dict[str, Any]:
    try:
        record = json.loads(raw)
    except ValueError:
        raise ValidationFailed(f"line {number} is not JSON", code="invalid_export") from None
    if not isinstance(record, dict) or not isinstance(record.get("record"), str):
        raise ValidationFailed(
            f"line {number}: each line is an object naming its record type",
            code="invalid_export",
        )
    return record


def _check_header(record: dict[str, Any]) -> dict[str, Any]:
    if record.get("format") != FORMAT:
        raise ValidationFailed("the header does not name a memory export", code="invalid_export")
    if record.get("version") != FORMAT_VERSION:
        raise ValidationFailed(
            f"export format version {record.get('version')!r}; this server reads {FORMAT_VERSION}",
            code="invalid_export",
        )
    return record


def _stamped(f: models.Field) -> bool:
    return bool(getattr(f, "auto_now_add", False) or getattr(f, "auto_now", False))


def _default(f: models.Field) -> Any:
    if f.has_default():
        return f.get_default()
    if f.null:
        return None
    if _stamped(f):
        return timezone.now().isoformat()
    if isinstance(f, (models.CharField, models.TextField)):
        return ""
    return None


_SCALARS = (str, int, float, bool)


@dataclass(frozen=True)
class _Plan:
    """How a line type's values become COPY cells (worked out once per type): the
    positions of the cells each check applies to."""

    fields: tuple[models.Field, ...]
    position: dict[str, int]  # each field's cell, by the name a line gives it
    scalar: tuple[bool, ...]  # by cell: whether it takes neither JSON nor an array
    stamped: tuple[int, ...]  # NOT NULL creation and change times: null means now
    json: tuple[tuple[int, bool], ...]  # with whether the field takes SQL NULL
    arrays: tuple[int, ...]
    scalars: tuple[int, ...]


@cache
def _plan(kind: Kind) -> _Plan:
    fields = tuple(kind.fields())
    json, arrays, scalars = [], [], []
    for i, f in enumerate(fields):
        if isinstance(f, models.JSONField):
            json.append((i, f.null))
        elif f.get_internal_type() == "ArrayField":
            arrays.append(i)
        else:
            scalars.append(i)
    return _Plan(
        fields=fields,
        position={f.attname: i for i, f in enumerate(fields)},
        scalar=tuple(i in scalars for i in range(len(fields))),
        stamped=tuple(i for i, f in enumerate(fields) if not f.null and _stamped(f)),
        json=tuple(json),
        arrays=tuple(arrays),
        scalars=tuple(scalars),
    )


def _array_cell(f: models.Field, value: Any, kind: Kind, number: int) -> Any:
    if isinstance(value, list) and all(isinstance(v, _SCALARS) for v in value):
        return [_text_checked(v, f, kind, number) for v in value]
    return _wrong_shape(f, kind, number)


def _wrong_shape(f: models.Field, kind: Kind, number: int) -> Any:
    raise ValidationFailed(
        f"line {number}: {kind.name}.{f.attname} has a value of the wrong shape",
        code="invalid_export",
    )


def _text_checked(value: Any, f: models.Field, kind: Kind, number: int) -> Any:
    if isinstance(value, str) and "\x00" in value:
        raise ValidationFailed(
            f"line {number}: {kind.name}.{f.attname} holds a NUL character",
            code="invalid_export",
        )
    return value
