from __future__ import annotations

from typing import Any

from rest_framework.parsers import BaseParser


class PlainTextParser(BaseParser):
    """CSV and JSON-lines bodies for bulk imports, passed on as text."""

    media_type = "text/*"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        return stream.read() if stream is not None else b""


class NdjsonParser(PlainTextParser):
    media_type = "application/x-ndjson"


class JsonLinesParser(PlainTextParser):
    media_type = "application/jsonl"
