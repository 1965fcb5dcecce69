"""OpenAPI naming: nested ``InputSerializer`` / ``OutputSerializer`` classes (one per view,
HackSoft style) would all be called "Input"/"Output" in the schema and overwrite each
other; this names them after their view instead (``ContextListApi.InputSerializer`` →
``ContextListInput``)."""

from __future__ import annotations

from typing import Any, Literal

from drf_spectacular.openapi import AutoSchema


class MemoryAutoSchema(AutoSchema):
    def get_serializer_name(
        self, serializer: Any, direction: Literal["request", "response"]
    ) -> str:
        name: str = super().get_serializer_name(serializer, direction)
        qualname = type(serializer).__qualname__
        if "." not in qualname or getattr(getattr(serializer, "Meta", None), "ref_name", None):
            return name
        outer, inner = qualname.rsplit(".", 1)
        return outer.replace(".", "").removesuffix("Api") + inner.removesuffix("Serializer")
