"""What several pages' forms clean alike: a scope, a list typed one item a line, an
uploaded text file."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError

from memory.kernel.scopes import ScopeError, scope_validate
from memory.models import EntityType

ENTITY_TYPE_CHOICES = EntityType.choices


def scope_clean(value: str) -> str:
    try:
        return scope_validate(value)
    except ScopeError as exc:
        raise ValidationError(str(exc)) from None


def lines_split(value: str) -> list[str]:
    """One item per line (a ``;`` also separates), blanks dropped."""
    return [p.strip() for line in value.splitlines() for p in line.split(";") if p.strip()]


def text_read(upload: Any, limit: int) -> str:
    """An uploaded file as text: UTF-8 (a byte-order mark dropped), at most ``limit``
    bytes, not empty; ValidationError says what is wrong with it."""
    if upload.size > limit:
        raise ValidationError(f"the file is {upload.size:,} bytes; at most {limit:,}")
    raw = upload.read()
    try:
        text: str = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationError(
            f"the file is not UTF-8 text (byte {exc.start}); save it as UTF-8"
        ) from None
    if "\x00" in text:
        raise ValidationError("the file contains NUL bytes: it is not text")
    if not text.strip():
        raise ValidationError("the file is empty")
    return text
