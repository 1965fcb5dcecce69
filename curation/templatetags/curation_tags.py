"""Small display filters for the dashboard templates."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()


@register.filter
def thousands(value: Any) -> str:
    """1234567 → "1,234,567" (independent of locale settings)."""
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return str(value)


@register.filter
def percent(value: float | None, digits: int = 0) -> str:
    """0.8312 → "83%"; None → "—"."""
    if value is None:
        return "—"
    return f"{value * 100:.{digits}f}%"


@register.filter
def undo_event(message: Any) -> int | None:
    """The audit event a message offers to undo (``extra_tags="undo:<id>"``), if any."""
    for tag in str(getattr(message, "extra_tags", "") or "").split():
        if tag.startswith("undo:") and tag[5:].isdigit():
            return int(tag[5:])
    return None


@register.filter
def undo_merge(message: Any) -> int | None:
    """The merge a message offers to undo (``extra_tags="merge:<id>"``), if any."""
    for tag in str(getattr(message, "extra_tags", "") or "").split():
        if tag.startswith("merge:") and tag[6:].isdigit():
            return int(tag[6:])
    return None


FLAGS = (
    ("single_valued", "single-valued"),
    ("is_aggregate", "aggregate"),
    ("exclude_from_prompt", "not in prompt"),
)


@register.filter
def flags(predicate: Any) -> list[tuple[str, str, bool]]:
    """A predicate's boolean flags as (field, label, on)."""
    return [(field, label, bool(getattr(predicate, field))) for field, label in FLAGS]


@register.filter
def flags_on(predicate: Any) -> list[str]:
    """The labels of the flags a predicate has set."""
    return [label for field, label in FLAGS if getattr(predicate, field)]


@register.filter
def get(mapping: Any, key: Any) -> Any:
    """``mapping[key]`` or None (templates cannot index by a variable)."""
    try:
        return mapping.get(key)
    except AttributeError:
        return None


@register.filter
def explain_field(name: str) -> str:
    """A field of a duplicate pair's explanation as a curator reads it: "name",
    "email (identifier)", "date_of_birth"."""
    kind, _, rest = str(name).partition(":")
    if kind == "id":
        return f"{rest} (identifier)"
    if kind == "attr":
        return rest.rpartition(":")[0] or rest
    return str(name)


@register.filter
def signed(value: float) -> str:
    """A weight with its sign: "+9.8", "−4.2" (a minus sign, not a hyphen)."""
    number = float(value)
    return f"+{number:.1f}" if number >= 0 else f"\u2212{abs(number):.1f}"
