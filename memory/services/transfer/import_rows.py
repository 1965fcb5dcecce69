"""Writing a memory import's staged rows (``import_lines.py``) into the context, inside
the import's transaction.

Each staged row gets a new id from its table's sequence (a map per kind, from the file's
ids to the new ones); then one INSERT … SELECT per kind writes the rows with every
reference remapped through the maps. A reference to a row the file does not hold stops
the statement, naming it; so do a line without an id and two lines with one. The tables
written are analyzed at once, for the import's own indexing reads them next.
"""

from __future__ import annotations

from typing import Any

from django.db import DatabaseError, connection, models, transaction

from memory.infra.restore_writes import serial_sequence, triggers_firing
from memory.kernel.errors import ValidationFailed
from memory.models import Predicate, PredicateAlias
from memory.search.models import Target
from memory.services.transfer.format import KIND_BY_NAME, KIND_OF_MODEL, KINDS, Kind
from memory.services.transfer.import_lines import Staging, error_first_line, staging_table

# Rows of a kind from which its table is analyzed once written (a sample of at most
# 30,000 rows a table, the columns the import reads by: a tenth of a second or so).
ANALYZE_ROWS = 1_000


def _ids(kind: Kind) -> str:
    return f"memory_import_{kind.name}_ids"


class StagedRows:
    """The rows ``staging`` holds, written into a context: their id maps (dropped with
    the staging tables) and the statements that write them."""

    def __init__(self, staging: Staging, counts: dict[str, int]) -> None:
        self.staging = staging
        # A file with predicates replaces the context's registry.
        self.replace_registry = counts.get("predicate", 0) > 0
        self.counts = dict(counts)

    def prepare(self) -> None:
        """Give every staged row a new id (the references are checked as the rows are
        written, ``_insert_sql``)."""
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
        table, ids = staging_table(kind), _ids(kind)
        cursor.execute(f"DROP TABLE IF EXISTS {ids}")
        if not self.counts.get(kind.name):  # joined all the same, to find a dangling one
            cursor.execute(f"CREATE TEMP TABLE {ids} (id bigint UNIQUE, new_id bigint)")
            self.staging.created.append(ids)
            return
        sequence = f"{serial_sequence(kind.model._meta.db_table)}::regclass"
        cursor.execute(
            f"""
            CREATE TEMP TABLE {ids} AS
            SELECT id, nextval({sequence}) AS new_id
            FROM (SELECT id FROM {table} ORDER BY id) o
            """  # noqa: S608 - names from the models
        )
        self.staging.created.append(ids)
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
                        raise ValidationFailed(
                            error_first_line(exc), code="invalid_export"
                        ) from None
                    raise ValidationFailed(
                        f"the {kind.name} lines could not be written: {error_first_line(exc)}",
                        code="invalid_export",
                    ) from None
            for kind in KINDS:
                # Facts whose texts are analyzed ahead are not read by the import again
                # (their read-back analyzes them first); autovacuum does after commit.
                if kind.name == "fact" and self.staging.texts.usable:
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
        f"SELECT {', '.join(values)} "
        f"FROM {staging_table(kind)} s JOIN {_ids(kind)} n ON n.id = s.id "
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
