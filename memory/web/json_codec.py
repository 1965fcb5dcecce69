"""JSON in and out of the API with orjson, answering exactly what DRF's own JSON parser and
renderer answer (docs/decisions/0127).

DRF reads and writes JSON with the standard library: on a 2,000-fact ``POST memories``
the encoding of the answer and of the triples' serializability check cost as much as
the rest of the HTTP face together. orjson does the same work several times faster, but
it does not read every document as ``json`` does, so each class here takes orjson's
result only where the two agree and hands everything else to DRF's class:

- reading: orjson refuses what ``json`` refuses, and more (a lone surrogate escape,
  ``NaN``, a number past a double's range), and it reads an integer past 64 bits as a
  float where ``json`` keeps the integer. A body orjson refuses, or one with a run of 19
  digits (where such an integer can hide), is read by DRF's parser: the same value, or
  the same ``malformed`` answer, as before (and a body nested past the interpreter's
  recursion limit, which crashed the standard library's reader, is ``malformed`` too).
- writing: orjson writes the JSON types as ``json`` does (numbers may be spelt another
  way, ``1e-7`` for ``1e-07``: the same numbers); date-times and dataclasses are passed
  to DRF's encoder, so they read as before; anything orjson cannot write (an integer past
  64 bits, text with a lone surrogate, a type DRF's encoder refuses) and every indented
  answer go through DRF's renderer. One difference is deliberate: a NaN or infinite
  number, which DRF's strict renderer turned into a 500, is written ``null``.
"""

from __future__ import annotations

import codecs
import io
import re
from typing import Any

import orjson
from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.renderers import JSONRenderer
from rest_framework.utils.encoders import JSONEncoder

# An integer orjson may read as a float (past 64 bits) has at least 19 digits; a body
# with such a run anywhere (in a string too) is read by the standard library instead.
_LONG_DIGITS = re.compile(rb"\d{19}")
_UTF8 = codecs.lookup("utf-8").name

# Text JSON allows and JavaScript did not, escaped as DRF's renderer escapes it.
_LINE_SEPARATOR = "\u2028".encode()
_PARAGRAPH_SEPARATOR = "\u2029".encode()

# Date-times and dataclasses, which ``json`` cannot encode, are refused when checking.
_CHECK_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
_WRITE_OPTIONS = (
    orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
)


def json_body_read(raw: bytes) -> Any:
    """The value of a UTF-8 JSON document as ``json.loads`` reads it, or ValueError
    where orjson refuses it (the caller then asks the standard library)."""
    if _LONG_DIGITS.search(raw):
        raise ValueError("long digit runs are read by the standard library")
    return orjson.loads(raw)


def json_value_encodable(value: Any) -> bool:
    """Whether ``json.dumps`` (standard library, defaults) can encode ``value``, where
    orjson decides it; False leaves the caller to ask ``json``. Of what orjson writes
    here only a UUID and a plain enum, which no JSON body holds, are not ``json``'s."""
    try:
        orjson.dumps(value, option=_CHECK_OPTIONS)
    except orjson.JSONEncodeError:
        return False
    return True


class FastJSONParser(JSONParser):
    """``application/json`` bodies, read by orjson where it reads them as ``json`` does."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        raw = stream.read()
        if _is_utf8(encoding):
            try:
                return json_body_read(raw)
            except ValueError:  # orjson.JSONDecodeError is one
                pass
        try:
            return super().parse(io.BytesIO(raw), media_type, parser_context)
        except RecursionError:
            # Arrays or objects nested past the interpreter's recursion limit (orjson
            # refuses them past 1,024 levels): the standard library's reader crashed.
            raise ParseError("JSON parse error - the document is nested too deeply") from None


def _is_utf8(encoding: str) -> bool:
    try:
        return codecs.lookup(encoding).name == _UTF8
    except LookupError:
        return False


class FastJSONRenderer(JSONRenderer):
    """``application/json`` answers written by orjson, byte for byte DRF's but for the
    spelling of some numbers; indented answers and what orjson cannot write go through
    DRF's renderer."""

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Any = None,
    ) -> bytes:
        if data is None:
            return b""
        indent = self.get_indent(accepted_media_type or "", renderer_context or {})
        # orjson writes compact UTF-8, DRF's default (COMPACT_JSON on, UNICODE_JSON on).
        if indent is None and self.compact and not self.ensure_ascii:
            try:
                rendered = orjson.dumps(data, default=_drf_default, option=_WRITE_OPTIONS)
            except orjson.JSONEncodeError:
                pass
            else:
                if _LINE_SEPARATOR in rendered or _PARAGRAPH_SEPARATOR in rendered:
                    rendered = rendered.replace(_LINE_SEPARATOR, b"\\u2028").replace(
                        _PARAGRAPH_SEPARATOR, b"\\u2029"
                    )
                return rendered
        return super().render(data, accepted_media_type, renderer_context)


_ENCODER = JSONEncoder()


def _drf_default(value: Any) -> Any:
    """What DRF's encoder makes of a value JSON has no type for (a date-time, a lazy
    text, a decimal…); its TypeError sends the whole answer to DRF's renderer."""
    return _ENCODER.default(value)
