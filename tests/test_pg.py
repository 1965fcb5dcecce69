"""Array literals and the unnest bulk insert, against the real server's parser."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.infra.pg_arrays import _element, array_literal, int_array_literal
from memory.infra.pg_rows import (
    instance_insert,
    instance_read,
    instance_update,
    instances_insert,
    json_text,
)
from memory.models import Context, Entity, FactStatus, Run

HOSTILE = ["a,b", "{x}", 'say "hi"', "back\\slash", "NULL", "", " padded ", "émoji ✓", "'q'"]


@pytest.mark.django_db
def test_text_literal_round_trips_hostile_strings_and_null() -> None:
    values: list[object] = [*HOSTILE, None]
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::text[]", [array_literal(values)])
        assert cursor.fetchone()[0] == values


@pytest.mark.parametrize(
    "values",
    [
        HOSTILE,
        [*HOSTILE, None],
        ["plain", "words", "only"],
        [None, "x"],
        [1, -2, 3, 10**20],
        [1, None, 3],
        [True, 1],
        [0.1, 1e-300, -0.0, float("inf")],
        [0.5, 1],
        [None, 0.25, None],
        [FactStatus.CURRENT, FactStatus.SUPERSEDED, None],
        [datetime(2026, 12, 4, 9, 0, tzinfo=UTC), None],
        [date(2026, 12, 4), None],
        [],
    ],
)
def test_fast_paths_write_what_the_general_path_writes(values: list[object]) -> None:
    general = "{" + ",".join(_element(v) for v in values) + "}"
    assert array_literal(values) == general
    assert array_literal(iter(values)) == general


@pytest.mark.django_db
def test_typed_literals_round_trip() -> None:
    moment = datetime(2026, 11, 30, 3, 4, 5, 123456, tzinfo=UTC)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT %s::bigint[], %s::float8[], %s::timestamptz[], %s::bool[]",
            [
                int_array_literal([1, -2, 3]),
                array_literal([0.1, 1e-300, None]),
                array_literal([moment, None]),
                array_literal([True, False]),
            ],
        )
        ints, floats, moments, flags = cursor.fetchone()
    assert (ints, floats, moments, flags) == (
        [1, -2, 3],
        [0.1, 1e-300, None],
        [moment, None],
        [True, False],
    )


@pytest.mark.django_db
def test_instances_insert_writes_what_the_orm_reads_back(context: Context) -> None:
    entities = [
        Entity(
            context=context,
            scope="team",
            name=name,
            type="person",
            normalized_key=f"key {i}",
            aliases=[name, "x,y"],
            alias_keys=[f"k{i}"],
            attributes={"quote": 'a "b"', "n": i},
            embedding=[0.5] * 384 if i == 0 else None,
        )
        for i, name in enumerate(HOSTILE)
    ]
    instances_insert(entities)
    assert all(e.pk is not None and not e._state.adding for e in entities)
    stored = {e.pk: e for e in Entity.objects.filter(context=context)}
    for original in entities:
        row = stored[original.pk]
        assert (row.name, row.aliases, row.attributes) == (
            original.name,
            original.aliases,
            original.attributes,
        )
        assert row.created_at is not None and row.updated_at is not None
    embedded = stored[entities[0].pk].embedding
    assert embedded is not None
    assert list(embedded) == [0.5] * 384
    assert stored[entities[1].pk].embedding is None


def _fields(obj: object) -> dict[str, object]:
    return {f.attname: getattr(obj, f.attname) for f in type(obj)._meta.concrete_fields}  # type: ignore[attr-defined]


@pytest.mark.parametrize("with_creator", [True, False])
def test_single_row_helpers_write_and_read_what_the_orm_does(
    context: Context, django_user_model: Any, with_creator: bool
) -> None:
    creator = django_user_model.objects.create(username="ana") if with_creator else None
    run = Run(
        context=context,
        scope="org",
        mode="triples",
        input_text="Ana joined Acme — \u00e9t\u00e9 'quoted' {braces}",
        input_payload={"triples": {"relations": [{"subject": "Ana", "n": 10**20}]}, "ok": True},
        created_by=creator,
    )
    instance_insert(run)
    assert run.pk is not None and run.created_at is not None
    run.result, run.timings, run.outcome = {"facts": [1, 2.5, None, "x"]}, {"total_ms": 1.5}, "ok"
    instance_update(run, ["result", "timings", "outcome"])

    read = instance_read(Run, run.pk, related=("context", "created_by"))
    orm = Run.objects.select_related("context", "created_by").get(pk=run.pk)
    assert read is not None and _fields(read) == _fields(orm)
    assert read.input_payload["triples"]["relations"][0]["n"] == 10**20  # type: ignore[attr-defined]
    assert _fields(read.context) == _fields(orm.context)  # type: ignore[attr-defined]
    if with_creator:
        assert _fields(read.created_by) == _fields(orm.created_by)  # type: ignore[attr-defined]
    else:
        assert read.created_by is None  # type: ignore[attr-defined]
    with CaptureQueriesContext(connection) as queries:
        assert read.context.slug == context.slug  # type: ignore[attr-defined]
    assert len(queries) == 0
    assert instance_read(Run, run.pk + 1000) is None


@pytest.mark.parametrize(
    "value",
    [
        {"triples": [{"subject": "Ana", "object": "Acme"}], "ok": True, "none": None},
        {1: "int key", 2.5: "float key", None: "null key", False: "bool key"},
        {"big": 10**20, "neg": -(2**63), "float": 0.1, "nested": [[], {}, [1, [2]]]},
        ["émoji ✓", 'say "hi"', "back\\slash", "\u0000 nul", "line\nbreak"],
        "plain",
        0,
    ],
)
def test_json_text_reads_back_as_json_dumps_does(value: object) -> None:
    assert json.loads(json_text(value)) == json.loads(json.dumps(value))


def test_json_text_refuses_and_encodes_as_json_dumps_does() -> None:
    when = datetime(2026, 1, 2, tzinfo=UTC)
    with pytest.raises(TypeError):
        json.dumps({"at": when})
    with pytest.raises(TypeError):
        json_text({"at": when})

    class Dates(json.JSONEncoder):
        def default(self, o: object) -> object:
            return o.isoformat() if isinstance(o, datetime) else super().default(o)

    assert json_text({"at": when}, Dates) == json.dumps({"at": when}, cls=Dates)
