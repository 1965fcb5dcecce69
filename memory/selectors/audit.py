"""The audit log as a person reads it: every action's name in words, and the entities
an event's summary mentions by id shown by name (with a link), old events included."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from memory.domain.access import ContextAccess
from memory.models import AuditEvent, Entity

# Every action the services record, in the order the filter lists them. A test checks
# that each ``audit_record(action=...)`` in the code is here.
ACTION_LABELS: dict[str, str] = {
    "drift_alias": "Drift: aliased",
    "drift_reject": "Drift: rejected",
    "drift_alias_bulk": "Drift: aliased in bulk",
    "drift_alias_undo": "Drift: alias undone",
    "drift_alias_bulk_undo": "Drift: bulk alias undone",
    "drift_reject_undo": "Drift: rejection undone",
    "predicate_register": "Predicate registered",
    "predicate_update": "Predicate edited",
    "predicate_flag": "Predicate flag changed",
    "predicate_unregister": "Predicate unregistered",
    "predicate_restore": "Predicate restored",
    "predicate_alias_add": "Alias added",
    "predicate_alias_remove": "Alias removed",
    "constraint_exception_add": "Constraint exception added",
    "constraint_exception_remove": "Constraint exception removed",
    "conflict_resolve": "Conflict resolved",
    "fact_correct": "Fact corrected",
    "fact_retract": "Facts retracted",
    "fact_restore": "Fact restored",
    "fact_edit": "Fact edited",
    "fact_accept": "Fact accepted (review)",
    "fact_reject": "Fact rejected (review)",
    "entity_seed": "Entity seeded",
    "entities_seed": "Entities seeded from a file",
    "entity_update": "Entity edited",
    "entity_delete": "Entity deleted",
    "entity_merge": "Entities merged",
    "merge_undo": "Merge undone",
    "duplicates_dismiss": "Not duplicates",
    "document_delete": "Document deleted",
    "item_delete": "Item deleted",
    "item_restore": "Item restored",
    "token_issue": "Token created",
    "token_revoke": "Token revoked",
    "membership_set": "Member added or role changed",
    "membership_remove": "Member removed",
    "context_update": "Context settings changed",
    "run_retract": "Run retracted",
    "run_retract_undo": "Run retraction undone",
}

# "entity 12", "entities [3, 4]", "merge 7": ids a summary names instead of names.
_ENTITY_IDS = re.compile(r"\bentit(?:y|ies) (\[[\d, ]+\]|\d+)")


@dataclass(frozen=True)
class Segment:
    text: str
    href_entity: int | None = None  # an entity to link to


@dataclass(frozen=True)
class AuditRow:
    event: AuditEvent
    label: str
    segments: list[Segment]


def action_label(action: str) -> str:
    return ACTION_LABELS.get(action, action.replace("_", " ").capitalize())


def _ids_in(event: AuditEvent) -> list[int]:
    ids: list[int] = []
    for match in _ENTITY_IDS.finditer(event.summary):
        ids += [int(n) for n in re.findall(r"\d+", match[1])]
    if event.action == "merge_undo" and event.target_type == "entity":
        ids.append(int(event.target_id))
        ids += [int(n) for n in (event.after or {}).get("restored", []) if str(n).isdigit()]
    return ids


def _segments(event: AuditEvent, names: dict[int, str]) -> list[Segment]:
    if event.action == "merge_undo" and event.target_id.isdigit():
        survivor = int(event.target_id)
        restored = [int(n) for n in (event.after or {}).get("restored", []) if int(n) != survivor]
        if survivor in names:
            parts = [Segment("undid the merge into "), Segment(names[survivor], survivor)]
            back = [pk for pk in restored if pk in names]
            if back:
                parts.append(Segment("; restored "))
                for position, pk in enumerate(back):
                    if position:
                        parts.append(Segment(" and " if position == len(back) - 1 else ", "))
                    parts.append(Segment(names[pk], pk))
            return parts
    segments: list[Segment] = []
    cursor = 0
    for match in _ENTITY_IDS.finditer(event.summary):
        ids = [int(n) for n in re.findall(r"\d+", match[1])]
        if not all(pk in names for pk in ids):
            continue  # not visible (or deleted): keep the id
        segments.append(Segment(event.summary[cursor : match.start()]))
        for position, pk in enumerate(ids):
            if position:
                segments.append(Segment(" and " if position == len(ids) - 1 else ", "))
            segments.append(Segment(names[pk], pk))
        cursor = match.end()
    segments.append(Segment(event.summary[cursor:]))
    return [s for s in segments if s.text]


def audit_rows(*, access: ContextAccess, events: Iterable[AuditEvent]) -> list[AuditRow]:
    """``events`` (one page) ready to show; one query for the names they mention, only
    of entities the caller may read."""
    events = list(events)
    wanted = {pk for event in events for pk in _ids_in(event)}
    names = (
        dict(
            Entity.objects.filter(
                access.grants.read_q(), context=access.context, pk__in=wanted
            ).values_list("pk", "name")
        )
        if wanted
        else {}
    )
    return [
        AuditRow(event=event, label=action_label(event.action), segments=_segments(event, names))
        for event in events
    ]
