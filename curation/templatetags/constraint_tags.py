"""Template helpers of the constraint screens."""

from __future__ import annotations

import json
from typing import Any

from django import template

register = template.Library()


@register.filter
def pretty_json(value: Any) -> str:
    """A predicate's constraints as the JSON the registry page edits."""
    return json.dumps(value, indent=2, ensure_ascii=False)


@register.filter
def constraint_parameters(rule: dict[str, Any]) -> str:
    """What a constraint takes besides its type, status and exceptions, in words."""
    shown = []
    for key, value in rule.items():
        if key in ("type", "status", "exceptions") or value is None:
            continue
        text = ", ".join(str(v) for v in value) if isinstance(value, list) else str(value)
        shown.append(f"{key}: {text}")
    return "; ".join(shown)
