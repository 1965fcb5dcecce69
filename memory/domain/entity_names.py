"""Pure normalization of entity names, types and identifiers (no database)."""

from __future__ import annotations

import re
import unicodedata

from memory.domain.screening import REDACTED, secret_name, secret_refuse
from memory.kernel.errors import ValidationFailed
from memory.models.entity import ENTITY_TYPES, EntityType

MAX_NAME_LENGTH = 300
MAX_IDENTIFIER_LENGTH = 500

# Removed from the *key* only (the display name keeps them), and only at the end, so
# "Acme Corp", "ACME Inc." and "Acme" share a key but "Corp Holdings" keeps its "corp".
LEGAL_SUFFIXES = frozenset(
    {
        "inc", "incorporated", "corp", "corporation", "co", "company", "ltd", "limited",
        "llc", "llp", "lp", "plc", "gmbh", "ag", "sa", "sas", "sarl", "bv", "nv", "oy", "ab",
        "as", "aps", "spa", "srl", "pty", "kk", "pte", "sl",
    }
)  # fmt: skip

TYPE_SYNONYMS: dict[str, str] = {
    "company": EntityType.ORGANISATION,
    "firm": EntityType.ORGANISATION,
    "organization": EntityType.ORGANISATION,
    "org": EntityType.ORGANISATION,
    "business": EntityType.ORGANISATION,
    "corporation": EntityType.ORGANISATION,
    "startup": EntityType.ORGANISATION,
    "institution": EntityType.ORGANISATION,
    "agency": EntityType.ORGANISATION,
    "employer": EntityType.ORGANISATION,
    "city": EntityType.LOCATION,
    "country": EntityType.LOCATION,
    "place": EntityType.LOCATION,
    "region": EntityType.LOCATION,
    "address": EntityType.LOCATION,
    "team": EntityType.PROJECT,
    "initiative": EntityType.PROJECT,
    "task": EntityType.PROJECT,
    "program": EntityType.PROJECT,
    "programme": EntityType.PROJECT,
    "people": EntityType.PERSON,
    "human": EntityType.PERSON,
    "user": EntityType.PERSON,
    "individual": EntityType.PERSON,
    "contact": EntityType.PERSON,
    "subject": EntityType.TOPIC,
    "theme": EntityType.TOPIC,
    "priority": EntityType.TOPIC,
    "meeting": EntityType.EVENT,
    "conference": EntityType.EVENT,
    "idea": EntityType.CONCEPT,
    "rule": EntityType.POLICY,
    "regulation": EntityType.POLICY,
    "tool": EntityType.PRODUCT,
    "software": EntityType.PRODUCT,
    "device": EntityType.PRODUCT,
}
RESERVED_TYPES = frozenset({EntityType.AGENT, EntityType.SERVICE})
# The types the extraction prompt offers the model (the reserved ones are for seeding).
EXTRACTION_TYPES: tuple[str, ...] = tuple(t for t in ENTITY_TYPES if t not in RESERVED_TYPES)

IDENTIFIER_KIND_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


def entity_normalize_key(name: str) -> str:
    """Casefold, fold punctuation and whitespace, drop trailing legal suffixes."""
    text = unicodedata.normalize("NFKC", name).casefold()
    text = text.replace("&", " and ")
    tokens = re.sub(r"[\W_]+", " ", text).split()
    while len(tokens) > 1 and tokens[-1] in LEGAL_SUFFIXES:
        tokens.pop()
    return " ".join(tokens)


def entity_name_folded(name: str) -> str:
    """A name as "the same name" compares it: case and spacing set aside, nothing else
    (unlike the key, it keeps punctuation and legal suffixes: "Globex Corporation" is not
    "Globex")."""
    return " ".join(name.split()).casefold()


def entity_type_coerced(raw: str | None, stored: str) -> bool:
    """Whether a type the caller gave was not one a memory may use (and ``stored`` as
    ``other`` instead): the write says so rather than hide the mistake."""
    given = (raw or "").strip().casefold()
    return stored == EntityType.OTHER and given not in ("", "other")


def entity_type_coerced_warning(name: str, raw: str) -> str:
    shown = raw.strip()[:40]
    return f"entity {name!r}: type {shown!r} is not a type a memory may use; stored as other"


def entity_type_normalize(raw: str | None, *, allow_reserved: bool = True) -> str:
    """Map a type onto the closed set: synonyms first, anything else becomes ``other``.

    ``agent`` and ``service`` are for principals' self entities; extraction passes
    ``allow_reserved=False`` so a model can never mint them.
    """
    value = re.sub(r"[\s_-]+", " ", (raw or "").strip().casefold()).strip()
    value = TYPE_SYNONYMS.get(value, value)
    if value.endswith("s") and value[:-1] in ENTITY_TYPES:
        value = value[:-1]  # "persons", "projects"
    if value not in ENTITY_TYPES:
        return EntityType.OTHER
    if value in RESERVED_TYPES and not allow_reserved:
        return EntityType.OTHER
    return value


def entity_clean_name(name: object) -> str:
    if not isinstance(name, str):
        raise ValidationFailed("an entity name must be a string", code="invalid_name")
    cleaned = " ".join(name.split())
    if not cleaned:
        raise ValidationFailed("an entity name cannot be empty", code="invalid_name")
    if len(cleaned) > MAX_NAME_LENGTH:
        raise ValidationFailed(
            f"an entity name can be at most {MAX_NAME_LENGTH} characters (got {len(cleaned)})",
            code="name_too_long",
        )
    if not entity_normalize_key(cleaned):
        raise ValidationFailed(
            "an entity name needs at least one letter or digit", code="invalid_name"
        )
    secret_refuse(cleaned, what="the entity name")
    return cleaned


def identifier_normalize(kind: str, value: str) -> tuple[str, str]:
    """Validate and canonicalize an identifier so equal identifiers compare equal."""
    kind = (kind or "").strip().lower()
    if not IDENTIFIER_KIND_RE.match(kind):
        raise ValidationFailed(
            f"identifier kind {kind[:50]!r} must be lowercase letters, digits and _",
            code="invalid_identifier",
        )
    value = (value or "").strip()
    if not value or len(value) > MAX_IDENTIFIER_LENGTH:
        raise ValidationFailed(
            f"identifier value must be 1–{MAX_IDENTIFIER_LENGTH} characters",
            code="invalid_identifier",
        )
    if secret_name(kind):
        secret_refuse(REDACTED, what=f"a {kind} identifier")
    secret_refuse(value, what="the identifier value")
    if kind in ("email", "domain", "username", "handle"):
        value = value.lower()
    if kind == "domain":
        value = value.removeprefix("www.").rstrip(".")
    if kind == "url":
        scheme, sep, rest = value.partition("://")
        host, slash, path = rest.partition("/")
        value = f"{scheme.lower()}{sep}{host.lower().removeprefix('www.')}{slash}{path}"
        value = value.rstrip("/")
    return kind, value
