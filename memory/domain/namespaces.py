"""Item namespaces: tuples of labels, spelled as scopes so that scope grants apply.

A namespace is a tuple of non-empty labels in which any character may appear except
NUL (PostgreSQL cannot store it). Each label becomes one scope segment:

- a label of letters, digits and ``_.-`` that starts with a letter or a digit is its
  own segment (``("org", "acme", "user_1")`` is the scope ``org/acme/user_1``, so a
  token granted ``read,write:org/acme/*`` reads and writes it);
- any other label is spelled ``x:`` followed by the label with every other byte of its
  UTF-8 written ``@XX`` (``"a%b"`` → ``x:a@25b``, ``"alice\\n"`` → ``x:alice@0A``).

Plain segments hold neither ``:`` nor ``@``, so the spelling is one-to-one and a
namespace prefix is a scope prefix at label boundaries.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memory.kernel.errors import ValidationFailed
from memory.kernel.scopes import MAX_SCOPE_LENGTH

MAX_LABELS = 20
MAX_KEY_CHARS = 1000
_PLAIN_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_SAFE_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
ENCODED_PREFIX = "x:"
# How the turn of an item's extraction begins its ``ref`` (``item:<scope>#<key>``).
ITEM_REF_PREFIX = "item:"

Namespace = tuple[str, ...]


class NamespaceError(ValidationFailed):
    code = "invalid_namespace"


def label_segment(label: str) -> str:
    """The scope segment that spells ``label``."""
    if _PLAIN_LABEL.fullmatch(label):
        return label
    spelled = "".join(
        chr(byte) if byte in _SAFE_BYTES else f"@{byte:02X}" for byte in label.encode()
    )
    return ENCODED_PREFIX + spelled


def segment_label(segment: str) -> str:
    """The label a scope segment spells (the inverse of ``label_segment``)."""
    if not segment.startswith(ENCODED_PREFIX):
        return segment
    raw = bytearray()
    text = segment[len(ENCODED_PREFIX) :]
    i = 0
    while i < len(text):
        if text[i] == "@":
            raw.append(int(text[i + 1 : i + 3], 16))
            i += 3
        else:
            raw.append(ord(text[i]))
            i += 1
    return raw.decode()


def namespace_scope(namespace: Namespace) -> str:
    """The scope that spells a (validated, non-empty) namespace."""
    return "/".join(label_segment(label) for label in namespace)


def scope_namespace(scope: str) -> Namespace:
    """The namespace an item's scope spells (the inverse of ``namespace_scope``)."""
    return tuple(segment_label(segment) for segment in scope.split("/"))


def namespace_validate(
    labels: object, *, allow_empty: bool = False, what: str = "namespace"
) -> Namespace:
    """``labels`` as a namespace, or NamespaceError naming what is wrong with it.

    ``allow_empty``: the empty tuple is accepted (a search prefix that constrains
    nothing)."""
    if not isinstance(labels, list | tuple) or not all(isinstance(x, str) for x in labels):
        raise NamespaceError(f"{what} must be a list of text labels")
    namespace = tuple(labels)
    if not namespace and not allow_empty:
        raise NamespaceError(f"{what} must have at least one label")
    if len(namespace) > MAX_LABELS:
        raise NamespaceError(f"{what} has {len(namespace)} labels; at most {MAX_LABELS}")
    for label in namespace:
        if not label:
            raise NamespaceError(f"{what} labels must not be empty")
        if "\x00" in label:
            raise NamespaceError(f"{what} labels must not contain NUL characters")
    if namespace and len(namespace_scope(namespace)) > MAX_SCOPE_LENGTH:
        raise NamespaceError(
            f"{what} is too long: spelled as a scope it takes more than "
            f"{MAX_SCOPE_LENGTH} characters"
        )
    return namespace


def key_validate(key: object) -> str:
    if not isinstance(key, str) or not key:
        raise ValidationFailed("key must be non-empty text", code="invalid_key")
    if len(key) > MAX_KEY_CHARS or "\x00" in key:
        raise ValidationFailed(
            f"key must be at most {MAX_KEY_CHARS} characters without NUL", code="invalid_key"
        )
    return key


def labels_match(namespace: Sequence[str], pattern: Sequence[str], *, suffix: bool) -> bool:
    """Whether ``namespace`` starts (or, with ``suffix``, ends) with ``pattern``, label by
    label; ``*`` in the pattern matches exactly one label."""
    if len(pattern) > len(namespace):
        return False
    part = namespace[len(namespace) - len(pattern) :] if suffix else namespace[: len(pattern)]
    return all(want in ("*", got) for want, got in zip(pattern, part, strict=True))
