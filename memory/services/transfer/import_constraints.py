"""The entity ids inside imported predicates' constraints (exceptions, and the allowed
objects of a relation), remapped to the ids the import gave those entities. Ids in a
JSON column are not foreign keys, so the import's own remapping does not reach them; an
id the file's entities do not hold is dropped rather than left to name another entity."""

from __future__ import annotations

from typing import Any

from django.db import connection

from memory.models import Predicate, PredicateKind


def import_constraints_remap(*, context_id: int, entity_ids: str | None) -> None:
    """``entity_ids``: the import's staging table of (file id, new id) for entities, or
    None when the file held no entities."""
    predicates = list(Predicate.objects.filter(context_id=context_id).exclude(constraints=[]))
    wanted = {i for p in predicates for i in _entity_ids(p)}
    if not wanted:
        return
    mapping: dict[int, int] = {}
    if entity_ids is not None:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT id, new_id FROM {entity_ids} WHERE id = ANY(%s)",  # noqa: S608
                [sorted(wanted)],
            )
            mapping = dict(cursor.fetchall())
    for predicate in predicates:
        rules: list[dict[str, Any]] = predicate.constraints
        for rule in rules:
            rule["exceptions"] = sorted(mapping[i] for i in rule["exceptions"] if i in mapping)
            if rule["type"] == "allowed_values" and predicate.kind == PredicateKind.RELATION:
                rule["values"] = [mapping[v] for v in rule["values"] if v in mapping]
        predicate.constraints = [r for r in rules if r["type"] != "allowed_values" or r["values"]]
        predicate.save(update_fields=["constraints"])


def _entity_ids(predicate: Predicate) -> set[int]:
    found: set[int] = set()
    for rule in predicate.constraints:
        found.update(rule.get("exceptions", []))
        if rule["type"] == "allowed_values" and predicate.kind == PredicateKind.RELATION:
            found.update(v for v in rule["values"] if type(v) is int)
    return found
