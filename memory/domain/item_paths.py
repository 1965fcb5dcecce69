"""Which text of an item is indexed: JSON paths over its value.

A path is ``$`` (the whole value) or fields separated by dots, each optionally followed
by ``[*]`` (every element) or ``[N]`` (one element, negative from the end):
``text``, ``metadata.title``, ``messages[*].content``, ``messages[-1].content``.
"""

from __future__ import annotations

import re
from typing import Any

from memory.kernel.errors import ValidationFailed

MAX_PATHS = 20
MAX_PATH_CHARS = 200
_STEP = re.compile(r"([^.\[\]]+)((?:\[(?:\*|-?\d+)\])*)")
_INDEX = re.compile(r"\[(\*|-?\d+)\]")


def paths_validate(index: object) -> list[str] | None:
    """``index`` as given to a put: a list of paths, or ``False``/None (not indexed)."""
    if index is False or index is None:
        return None
    if not isinstance(index, list) or not all(isinstance(p, str) for p in index):
        raise ValidationFailed(
            'index must be a list of JSON paths (such as "text" or "$") or false',
            code="invalid_index",
        )
    if len(index) > MAX_PATHS:
        raise ValidationFailed(f"index names at most {MAX_PATHS} paths", code="invalid_index")
    for path in index:
        if path == "$":
            continue
        if (
            not path
            or len(path) > MAX_PATH_CHARS
            or "\x00" in path
            or not all(_STEP.fullmatch(step) for step in path.split("."))
        ):
            raise ValidationFailed(
                f"index path {path[:80]!r} is not a JSON path like 'text', 'a.b' or "
                "'messages[*].content'",
                code="invalid_index",
            )
    return list(index)


def _leaves(value: Any) -> list[str]:
    """The text of every scalar under ``value``, in document order."""
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, dict):
        return [text for v in value.values() for text in _leaves(v)]
    if isinstance(value, list):
        return [text for v in value for text in _leaves(v)]
    if value is None or isinstance(value, bool):
        return []
    return [str(value)]


def _select(values: list[Any], step: str) -> list[Any]:
    match = _STEP.fullmatch(step)
    assert match is not None  # paths are validated before they are used
    name, indexes = match.group(1), _INDEX.findall(match.group(2))
    found = [v[name] for v in values if isinstance(v, dict) and name in v]
    for index in indexes:
        chosen: list[Any] = []
        for v in found:
            if not isinstance(v, list):
                continue
            if index == "*":
                chosen.extend(v)
            elif -len(v) <= int(index) < len(v):
                chosen.append(v[int(index)])
        found = chosen
    return found


def text_at_paths(value: Any, paths: list[str]) -> str:
    """The indexed text of ``value``: what each path selects, one piece a line."""
    pieces: list[str] = []
    for path in paths:
        selected = [value] if path == "$" else _select_path(value, path)
        for found in selected:
            pieces.extend(_leaves(found))
    return "\n".join(pieces)


def _select_path(value: Any, path: str) -> list[Any]:
    found = [value]
    for step in path.split("."):
        found = _select(found, step)
    return found
