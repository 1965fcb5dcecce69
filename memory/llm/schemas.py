"""Typed shapes of untrusted structured input: the model's extraction and callers' triples.

Both go through these Pydantic models before any service sees them. The two share their
item shapes and differ in their caps: a model answer is one turn (a few hundred items at
most, anything more is a runaway answer), a caller's triples may be a bulk import.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

MAX_LLM_ENTITIES = 200
MAX_LLM_ITEMS = 500  # per list: relations, attributes, actions
MAX_TRIPLES_ENTITIES = 20_000
MAX_TRIPLES_ITEMS = 50_000
MAX_VALUE_CHARS = 2_000


def _no_nul(text: str) -> str:
    # PostgreSQL text and jsonb cannot hold NUL: refuse it here, not at INSERT time.
    if "\x00" in text:
        raise ValueError("text must not contain NUL characters")
    return text


NoNul = AfterValidator(_no_nul)
Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=300), NoNul]
# Predicate text is checked and canonicalized later (hostile text becomes an `unresolved`
# item with its reason rather than failing the whole answer).
PredicateText = Annotated[str, StringConstraints(min_length=1, max_length=200), NoNul]
TypeText = Annotated[str, StringConstraints(strip_whitespace=True, max_length=40), NoNul]
DateText = Annotated[str, StringConstraints(strip_whitespace=True, max_length=40), NoNul]
Confidence = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
Value = (
    Annotated[str, StringConstraints(max_length=MAX_VALUE_CHARS), NoNul]
    | Annotated[int, Field(ge=-(2**53), le=2**53)]
    | Annotated[float, Field(allow_inf_nan=False)]
    | bool
)


class _Item(BaseModel):
    # Models add keys of their own ("notes", "reasoning"); they are ignored, not fatal.
    model_config = ConfigDict(extra="ignore")


class IdentifierItem(_Item):
    kind: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1, max_length=40), NoNul
    ]
    value: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1, max_length=500), NoNul
    ]


class EntityItem(_Item):
    name: Name
    type: TypeText | None = None
    aliases: list[Name] = Field(default_factory=list, max_length=20)
    identifiers: list[IdentifierItem] = Field(default_factory=list, max_length=10)


class RelationItem(_Item):
    subject: Name
    subject_type: TypeText | None = None
    predicate: PredicateText
    object: Name
    object_type: TypeText | None = None
    confidence: Confidence | None = None
    valid_from: DateText | None = None


class AttributeItem(_Item):
    subject: Name
    subject_type: TypeText | None = None
    key: PredicateText
    value: Value
    confidence: Confidence | None = None
    valid_from: DateText | None = None


class ActionItem(_Item):
    subject: Name
    subject_type: TypeText | None = None
    verb: PredicateText
    object: Name | None = None
    object_type: TypeText | None = None
    at: DateText | None = None
    confidence: Confidence | None = None


class ExtractionOutput(_Item):
    """What the chat model must answer for one turn."""

    entities: list[EntityItem] = Field(default_factory=list, max_length=MAX_LLM_ENTITIES)
    relations: list[RelationItem] = Field(default_factory=list, max_length=MAX_LLM_ITEMS)
    attributes: list[AttributeItem] = Field(default_factory=list, max_length=MAX_LLM_ITEMS)
    actions: list[ActionItem] = Field(default_factory=list, max_length=MAX_LLM_ITEMS)


# A caller's triples refuse unknown keys at every level: a typo ("confidance", "typ")
# must not vanish into a default. The same shapes as the model's, made strict.
_STRICT = ConfigDict(extra="forbid")


class StrictIdentifierItem(IdentifierItem):
    model_config = _STRICT


class StrictEntityItem(EntityItem):
    model_config = _STRICT

    identifiers: list[StrictIdentifierItem] = Field(default_factory=list, max_length=10)  # type: ignore[assignment]


class StrictRelationItem(RelationItem):
    model_config = _STRICT


class StrictAttributeItem(AttributeItem):
    model_config = _STRICT


class StrictActionItem(ActionItem):
    model_config = _STRICT


class TriplesInput(_Item):
    """``triples`` of ``POST memories`` with ``infer: triples``: no model picks the words."""

    model_config = _STRICT

    entities: list[StrictEntityItem] = Field(default_factory=list, max_length=MAX_TRIPLES_ENTITIES)
    relations: list[StrictRelationItem] = Field(default_factory=list, max_length=MAX_TRIPLES_ITEMS)
    attributes: list[StrictAttributeItem] = Field(
        default_factory=list, max_length=MAX_TRIPLES_ITEMS
    )
    actions: list[StrictActionItem] = Field(default_factory=list, max_length=MAX_TRIPLES_ITEMS)


class JudgeAnswer(_Item):
    """The optional LLM judge's verdict on an ambiguous pair of entities."""

    same: bool
    reason: Annotated[str, StringConstraints(max_length=500)] = ""


Extraction = ExtractionOutput | TriplesInput
