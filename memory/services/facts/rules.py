"""The rules for writing a fact, as pure functions (no I/O): every path that puts a fact
where another may already be — the single writer and the batch writer (fact_batch.py),
a drift alias moving facts onto a registered predicate (drift.py) and a merge moving
facts onto a survivor (merges.py) — asks these, so one rule holds everywhere
(docs/decisions/0022):

- two facts are *identical* when subject, predicate, scope, kind, object and value text
  agree; an identical newcomer re-observes the current fact (count, last seen, the
  higher confidence) instead of becoming a second row;
- a single-valued predicate holds one current value per *slot* (subject, predicate,
  scope);
- valid time decides first (docs/decisions/0120): a newcomer whose validity began
  before the current value's, or has already ended, is *history* — stored superseded
  with its own interval, closing nothing current;
- otherwise, when a different value meets the current one in its slot, the newcomer supersedes it
  only when the context allows automatic supersession and its confidence is ≥ 0.7 and
  ≥ the prior's; otherwise both are kept — the prior stays current, the newcomer is
  ``contested`` — and a Conflict records why.

The partial unique constraint ``fact_one_current_single_value`` and the subject locks are
what make the rules hold under concurrent writers; this module only decides.
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memory.kernel.errors import ValidationFailed
from memory.kernel.wording import with_article
from memory.models import FactKind, FactStatus
from memory.models.predicate import PredicateKind

SUPERSEDE_CONFIDENCE_FLOOR = 0.7
MAX_VALUE_CHARS = 64 * 1024

FactSlot = tuple[Hashable, Hashable, str]
FactIdentity = tuple[Hashable, Hashable, str, str, Hashable, str]


def fact_slot(*, subject: Hashable, predicate: Hashable, scope: str) -> FactSlot:
    """Where a single-valued fact holds its one current value. ``subject`` is whatever
    names the subject once the write lands (a merge passes "survivor" for its group)."""
    return (subject, predicate, scope)


def fact_identity(
    *,
    subject: Hashable,
    predicate: Hashable,
    scope: str,
    kind: str,
    object: Hashable,
    value_text: str,
) -> FactIdentity:
    """What makes two facts the same fact. The subject is part of it: Sam's "works_at B"
    must not fold into someone else's "works_at B"."""
    return (subject, predicate, scope, kind, object, value_text)


@dataclass(frozen=True)
class Collision:
    """What happens when a newcomer meets a different current value in its slot."""

    newcomer_wins: bool
    # Why the newcomer did not win: the reason its Conflict records ("" when it won).
    reason: str


def collision_decide(
    *, newcomer_confidence: float, prior_confidence: float, auto_supersede: bool
) -> Collision:
    if not auto_supersede:
        return Collision(False, "auto_supersede is off for this context")
    if newcomer_confidence < SUPERSEDE_CONFIDENCE_FLOOR:
        return Collision(
            False,
            f"confidence {newcomer_confidence:.2f} is under the {SUPERSEDE_CONFIDENCE_FLOOR} "
            "needed to replace a single value",
        )
    if newcomer_confidence < prior_confidence:
        return Collision(
            False,
            f"confidence {newcomer_confidence:.2f} is under the current value's "
            f"{prior_confidence:.2f}",
        )
    return Collision(True, "")


def collision_is_history(
    *,
    newcomer_valid_from: datetime | None,
    newcomer_valid_until: datetime | None,
    prior_valid_from: datetime | None,
    now: datetime,
) -> bool:
    """Whether a newcomer meeting the current value of its slot is an older value: its
    validity has ended, or it began before the current value's did (a value without
    ``valid_from`` begins when it is written). Such a value is history, never current."""
    if newcomer_valid_until is not None and newcomer_valid_until <= now:
        return True
    if prior_valid_from is None:
        return False
    return (newcomer_valid_from or now) < prior_valid_from


def history_fields(
    *, newcomer_valid_until: datetime | None, prior_valid_from: datetime | None, now: datetime
) -> dict[str, Any]:
    """The fields an older value takes: it never was the current one here, and its
    validity ends where it said, else where the current value's began."""
    return {
        "status": FactStatus.SUPERSEDED,
        "status_changed_at": now,
        "valid_until": newcomer_valid_until or prior_valid_from or now,
    }


def superseded_fields(
    *,
    prior_valid_until: datetime | None,
    newcomer_valid_from: datetime | None,
    now: datetime,
    prior_valid_from: datetime | None = None,
) -> dict[str, Any]:
    """The fields a superseded prior takes: it leaves "current", and its validity ends
    where the newcomer's begins (unless it had already ended) — never before its own
    began."""
    valid_until = prior_valid_until
    if valid_until is None or valid_until > now:
        valid_until = newcomer_valid_from or now
    if prior_valid_from is not None and valid_until < prior_valid_from:
        valid_until = prior_valid_from
    return {
        "status": FactStatus.SUPERSEDED,
        "status_changed_at": now,
        "valid_until": valid_until,
    }


def contested_fields(*, now: datetime) -> dict[str, Any]:
    """The fields a newcomer that lost its collision takes (kept, beside the current)."""
    return {"status": FactStatus.CONTESTED, "status_changed_at": now}


@dataclass(frozen=True)
class Reobservation:
    observed_count: int
    confidence: float
    last_seen_at: datetime


def reobserve(
    *,
    observed_count: int,
    confidence: float,
    last_seen_at: datetime,
    seen_count: int,
    seen_confidence: float,
    seen_at: datetime,
) -> Reobservation:
    """An identical newcomer (seen ``seen_count`` times) folds into the current fact."""
    return Reobservation(
        observed_count=observed_count + seen_count,
        confidence=max(confidence, seen_confidence),
        last_seen_at=max(last_seen_at, seen_at),
    )


# --- the shape of one fact ------------------------------------------------------------


def fact_value_text(value: Any) -> str:
    if value is None:
        return ""
    text = (
        value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
    )
    if len(text) > MAX_VALUE_CHARS:
        raise ValidationFailed(
            f"a fact value can be at most {MAX_VALUE_CHARS} characters", code="value_too_long"
        )
    return text


def fact_unit_value(name: str, value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise ValidationFailed(
            f"{name} must be between 0 and 1, got {value}", code=f"invalid_{name}"
        )
    return float(value)


_FACT_KINDS = frozenset(FactKind.values)  # computed once: ``values`` rebuilds its list


def fact_kind_for(
    predicate_kind: str, *, has_object: bool, has_value: bool, kind: str | None
) -> str:
    """The kind a fact is stored as: the one given, else what its predicate implies."""
    if kind is not None:
        if kind not in _FACT_KINDS:
            raise ValidationFailed(
                f"kind must be one of {', '.join(FactKind.values)}", code="invalid_kind"
            )
        return kind
    if predicate_kind == PredicateKind.ACTION:
        return FactKind.ACTION
    if has_object or (predicate_kind == PredicateKind.RELATION and not has_value):
        return FactKind.RELATION
    if predicate_kind == PredicateKind.NARRATIVE:
        return FactKind.NARRATIVE
    return FactKind.ATTRIBUTE


def fact_check_shape(kind: str, *, has_object: bool, has_value: bool) -> None:
    if kind == FactKind.RELATION and not has_object:
        raise ValidationFailed("a relation fact needs an object entity", code="missing_object")
    if kind in (FactKind.ATTRIBUTE, FactKind.NARRATIVE) and not has_value:
        raise ValidationFailed(f"{with_article(kind)} fact needs a value", code="missing_value")
    if kind in (FactKind.ATTRIBUTE, FactKind.NARRATIVE) and has_object:
        raise ValidationFailed(
            f"{with_article(kind)} fact has a value, not an object", code="unexpected_object"
        )


def fact_check_validity(valid_from: datetime | None, valid_until: datetime | None) -> None:
    if valid_from and valid_until and valid_until < valid_from:
        raise ValidationFailed("valid_until is before valid_from", code="invalid_validity")


def fact_check_entity_types(
    *,
    predicate: str,
    ends: list[tuple[str, str, str, list[str]]],
) -> None:
    """A relation's ends must be of the types its predicate names (when it names any).
    ``ends`` holds (``"subject"`` or ``"object"``, entity name, entity type, allowed)."""
    for end, name, type_, allowed in ends:
        if allowed and type_ not in allowed:
            raise ValidationFailed(
                f"{predicate} takes {' or '.join(map(with_article, allowed))} as its {end}; "
                f"{name} is {with_article(type_)}",
                code="wrong_entity_type",
            )
