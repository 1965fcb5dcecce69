"""Array literals and the unnest bulk insert, against the real server's parser."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from django.db import connection

from memory.models import Context, Entity, FactStatus
from memory.pg import _element, array_literal, instances_insert, int_array_literal

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
    assert list(stored[entities[0].pk].embedding) == [0.5] * 384
    assert stored[entities[1].pk].embedding is None
