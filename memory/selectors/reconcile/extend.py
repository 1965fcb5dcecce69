"""Data extension: for entities a client has matched, the values of the properties it
asks for (current facts of a predicate, an attribute, identifiers), typed as the
protocol writes them."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from memory.domain.access import ContextAccess
from memory.kernel.errors import ValidationFailed
from memory.models import EntityIdentifier, Fact, FactStatus, Predicate, PredicateStatus
from memory.selectors.entities import entities_visible
from memory.selectors.reconcile.properties import (
    PropertyRef,
    identifier_kinds,
    is_scalar,
    property_resolve,
)

MAX_EXTEND_IDS = 500
MAX_EXTEND_PROPERTIES = 50
ExtendValue = dict[str, Any]  # {"id", "name"} | {"str"} | {"int"} | {"float"} | {"date"}


@dataclass(frozen=True)
class ExtendColumn:
    ref: PropertyRef
    name: str
    object_type: str | None = None  # a relation predicate's object type, when it has one


def extend_columns(*, access: ContextAccess, pids: Sequence[str]) -> list[ExtendColumn]:
    if not pids or len(pids) > MAX_EXTEND_PROPERTIES:
        raise ValidationFailed(
            f"ask for 1–{MAX_EXTEND_PROPERTIES} properties", code="invalid_extend"
        )
    predicates = {
        p.name: p
        for p in Predicate.objects.filter(context=access.context).exclude(
            status=PredicateStatus.REJECTED
        )
    }
    kinds = identifier_kinds(access)
    columns = []
    for pid in pids:
        ref = property_resolve(pid, identifier_kinds=kinds, predicates=set(predicates))
        predicate = predicates.get(ref.key) if ref.kind == "fact" else None
        if ref.kind == "fact" and predicate is None:
            raise ValidationFailed(
                f"no predicate {ref.key[:80]!r} in this context", code="invalid_property"
            )
        object_type = None
        if predicate is not None and len(predicate.object_types) == 1:
            object_type = predicate.object_types[0]
        label = ref.key.replace("_", " ") if ref.kind == "fact" else ref.key
        columns.append(ExtendColumn(ref, label, object_type))
    return columns


def extend_rows(
    *, access: ContextAccess, ids: Sequence[str], columns: Sequence[ExtendColumn]
) -> dict[str, dict[str, list[ExtendValue]]]:
    """Each asked entity's values of each column: current facts of the predicate
    (an entity as ``{id, name}``, a value by its type), the attribute, the identifiers.
    An id that names no visible entity gets empty columns."""
    if len(ids) > MAX_EXTEND_IDS:
        raise ValidationFailed(f"at most {MAX_EXTEND_IDS} ids", code="invalid_extend")
    pks = {i: int(i) for i in ids if i.strip().isdigit() and len(i) < 19}
    entities = {
        e.pk: e
        for e in entities_visible(access=access)
        .filter(pk__in=sorted(set(pks.values())))
        .only("pk", "attributes", "merged_into_id")
    }
    rows: dict[str, dict[str, list[ExtendValue]]] = {
        i: {c.ref.id: [] for c in columns} for i in ids
    }
    facts = _current_facts(
        access, sorted(entities), [c.ref.key for c in columns if c.ref.kind == "fact"]
    )
    identifiers: dict[tuple[int, str], list[str]] = defaultdict(list)
    id_kinds = [c.ref.key for c in columns if c.ref.kind == "id"]
    if id_kinds:
        for entity_id, kind, value in (
            EntityIdentifier.objects.filter(entity_id__in=sorted(entities), kind__in=id_kinds)
            .order_by("kind", "value")
            .values_list("entity_id", "kind", "value")
        ):
            identifiers[(entity_id, kind)].append(value)
    for text, pk in pks.items():
        entity = entities.get(pk)
        if entity is None:
            continue
        for column in columns:
            ref = column.ref
            if ref.kind == "attr":
                held = (entity.attributes or {}).get(ref.key)
                cells = [extend_value(held)] if held is not None and is_scalar(held) else []
            elif ref.kind == "id":
                cells = [{"str": v} for v in identifiers.get((pk, ref.key), [])]
            else:
                cells = facts.get((pk, ref.key), [])
            rows[text][ref.id] = cells
    return rows


def _current_facts(
    access: ContextAccess, subject_ids: list[int], predicates: list[str]
) -> dict[tuple[int, str], list[ExtendValue]]:
    out: dict[tuple[int, str], list[ExtendValue]] = defaultdict(list)
    if not subject_ids or not predicates:
        return out
    facts = (
        Fact.objects.filter(
            access.grants.read_q(),
            context=access.context,
            subject_id__in=subject_ids,
            predicate__name__in=predicates,
            status=FactStatus.CURRENT,
        )
        .select_related("object")
        .only("subject_id", "predicate__name", "object__id", "object__name", "value", "kind")
        .order_by("subject_id", "-confidence", "-id")[:20_000]
    )
    for fact in facts:
        key = (fact.subject_id, fact.predicate.name)
        if fact.object is not None:
            out[key].append({"id": str(fact.object.pk), "name": fact.object.name})
        elif fact.value is not None and is_scalar(fact.value):
            out[key].append(extend_value(fact.value))
        elif fact.value is not None:
            out[key].append({"str": str(fact.value)[:1000]})
    return out


def extend_value(value: Any) -> ExtendValue:
    """A value in the extension's typed form (a date-time only when it is one)."""
    if isinstance(value, bool):
        return {"str": "true" if value else "false"}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, float):
        return {"float": value} if math.isfinite(value) else {"str": str(value)}
    text = str(value)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return {"str": text}
    if "T" not in text and len(text) == 10:
        day = date.fromisoformat(text)
        return {"date": f"{day.isoformat()}T00:00:00Z"}
    if moment.tzinfo is None:
        return {"date": moment.strftime("%Y-%m-%dT%H:%M:%SZ")}
    return {"date": moment.isoformat().replace("+00:00", "Z")}
