"""orjson reads and writes the API's JSON exactly as DRF's own JSON classes do (decision
0127): the same value or the same refusal for every body, the same answer for every value.
Each case runs through both and compares; no database."""

from __future__ import annotations

import datetime
import decimal
import io
import json
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from django.utils.functional import lazy
from hypothesis import given
from hypothesis import strategies as st
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.renderers import JSONRenderer
from rest_framework.serializers import JSONField

from memory.api.fields import TriplesField
from memory.web.json_codec import FastJSONParser, FastJSONRenderer


def read(parser: JSONParser, body: bytes, charset: str | None = None) -> tuple[str, Any]:
    context = {"encoding": charset} if charset else {}
    try:
        return "value", parser.parse(io.BytesIO(body), "application/json", context)
    except ParseError as error:
        return "refused", str(error.detail)


def typed(value: Any) -> Any:
    """A value with each number's type kept (1 and 1.0 compare equal in Python)."""
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [typed(v) for v in value]
    return (type(value).__name__, repr(value))


def assert_read_alike(body: bytes, charset: str | None = None) -> None:
    fast = read(FastJSONParser(), body, charset)
    drf = read(JSONParser(), body, charset)
    assert fast[0] == drf[0], (body, fast, drf)
    if fast[0] == "value":
        assert typed(fast[1]) == typed(drf[1]), body
    else:
        assert fast[1] == drf[1]


@pytest.mark.parametrize(
    "body",
    [
        b'{"k": 99999999999999999999}',  # past 64 bits: orjson reads a float, json an int
        b'{"k": -9223372036854775809}',
        b'{"k": 18446744073709551615}',
        b'{"k": 1e400}',  # json reads infinity, orjson refuses
        b'{"k": -1e400}',
        b'{"k": 1e-400}',
        b'{"k": 0.30000000000000004, "n": -0, "z": -0.0, "e": 1E2}',
        b'{"text": "\\ud800"}',  # a lone surrogate escape: json keeps it, orjson refuses
        b'{"text": "\\ud83d\\ude00 \\u0000 \xe2\x80\xa8"}',
        b'{"k": NaN}',
        b'{"k": Infinity}',
        b'\xef\xbb\xbf{"k": 1}',  # a byte-order mark
        b'{"k": "\xff"}',  # not UTF-8
        b'{"k": 1,}',
        b'{"k": 1} x',
        b'{"k": 1, "k": 2}',
        b"",
        b"   ",
        b'"just text"',
        b"{not json",
    ],
)
def test_a_body_reads_as_drf_reads_it(body: bytes) -> None:
    assert_read_alike(body)


def test_a_body_nested_too_deeply_is_malformed_not_a_crash() -> None:
    deep = b"[" * 5_000 + b"]" * 5_000
    with pytest.raises(RecursionError):  # what answered a 500
        JSONParser().parse(io.BytesIO(deep), "application/json", {})
    assert read(FastJSONParser(), deep) == (
        "refused",
        "JSON parse error - the document is nested too deeply",
    )
    fewer = b"[" * 500 + b"]" * 500  # within orjson's 1,024 levels: read
    assert read(FastJSONParser(), fewer)[0] == "value"


def test_a_body_in_another_charset_reads_as_drf_reads_it() -> None:
    assert_read_alike('{"name": "Zoë"}'.encode("latin-1"), charset="latin-1")
    assert_read_alike('{"name": "Zoë"}'.encode("utf-16"), charset="utf-16")


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@given(value=json_values, ascii_only=st.booleans())
def test_any_json_document_reads_as_drf_reads_it(value: Any, ascii_only: bool) -> None:
    assert_read_alike(json.dumps(value, ensure_ascii=ascii_only).encode())


def render(renderer: JSONRenderer, data: Any, media_type: str = "application/json") -> Any:
    try:
        return renderer.render(data, media_type, {})
    except (TypeError, ValueError) as error:
        return type(error)


@given(value=json_values)
def test_an_answer_reads_as_drf_wrote_it(value: Any) -> None:
    fast, drf = render(FastJSONRenderer(), value), render(JSONRenderer(), value)
    assert json.loads(fast or "null") == json.loads(drf or "null")  # None: an empty answer


no_float_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**64 - 1) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@given(value=no_float_values)
def test_an_answer_without_floats_is_drf_s_byte_for_byte(value: Any) -> None:
    assert render(FastJSONRenderer(), value) == render(JSONRenderer(), value)


@dataclass
class Point:
    x: int


@pytest.mark.parametrize(
    "value",
    [
        {"at": datetime.datetime(2024, 5, 1, 12, 30, 0, 123456, tzinfo=datetime.UTC)},
        {"at": datetime.datetime(2024, 5, 1, 12, 30)},
        {"on": datetime.date(2024, 5, 1), "time": datetime.time(9, 5)},
        {"took": datetime.timedelta(seconds=1.5), "price": decimal.Decimal("1.25")},
        {"id": uuid.UUID(int=7), "lazy": lazy(lambda: "later", str)()},
        {1: "int key", None: "none key", False: "bool key", 1.5: "float key"},
        {"big": 2**70, "small": -(2**70)},
        {"separators": "line \u2028 paragraph \u2029"},
        {"tuple": (1, 2), "set": frozenset()},
    ],
)
def test_values_json_has_no_type_for_are_written_as_drf_writes_them(value: Any) -> None:
    assert render(FastJSONRenderer(), value) == render(JSONRenderer(), value)


@pytest.mark.parametrize("value", [{"point": Point(1)}, {"text": "\ud800"}, {"what": object()}])
def test_what_drf_cannot_write_fails_as_it_did(value: Any) -> None:
    fast, drf = render(FastJSONRenderer(), value), render(JSONRenderer(), value)
    assert isinstance(drf, type) and fast is drf


def test_an_indented_answer_is_drf_s() -> None:
    value = {"a": [1, 2.5, "x"]}
    media_type = "application/json; indent=2"
    assert render(FastJSONRenderer(), value, media_type) == render(
        JSONRenderer(), value, media_type
    )


def test_a_number_json_cannot_hold_is_written_null_not_refused() -> None:
    """The one deliberate difference: DRF's strict renderer refused it (a 500)."""
    assert render(JSONRenderer(), {"x": float("nan")}) is ValueError
    assert json.loads(render(FastJSONRenderer(), {"x": float("nan"), "y": float("inf")})) == {
        "x": None,
        "y": None,
    }


@pytest.mark.parametrize(
    "value",
    [
        {"entities": [{"name": "Ada", "type": "person"}]},
        {"n": 2**70, "text": "\ud800"},  # orjson cannot write these; json can
        {"at": datetime.datetime(2024, 5, 1)},  # json cannot
        {"point": Point(1)},
        {"id": 3, "nested": [[], {}, None, 1.5]},
        "text",
    ],
)
def test_triples_field_takes_and_refuses_what_drf_s_json_field_did(value: Any) -> None:
    def outcome(field: JSONField) -> Any:
        try:
            return "taken", field.run_validation(value)
        except Exception as error:
            return "refused", getattr(error, "detail", error)

    assert outcome(TriplesField()) == outcome(JSONField())
