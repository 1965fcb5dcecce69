"""Many fact writes at once, under the same rules as ``fact_write`` (services/facts.py).

For one scope and a list of facts: every distinct predicate form is resolved once (a
registry load, then ``predicate_resolve_for_write`` only for forms the registry does not
hold), every subject is locked in one ordered ``SELECT … FOR UPDATE`` (ordered so two
batches cannot deadlock), the current facts of those subjects are read in one query, and
the facts are decided in order in memory — re-observation of an identical current fact,
aggregates updated in place, single-valued supersession (confidence ≥ 0.7 and ≥ the
prior's, else a contested fact and a Conflict), including between facts of the same
batch — then written with a handful of bulk statements. The partial unique constraint
``fact_one_current_single_value`` stays the last line.

A fact that cannot be written (hostile or rejected predicate, unknown predicate in a strict
context, wrong shape) is reported on its item and the others are written. Strict-mode
refusals are recorded as drift by the caller after its transaction commits
(``fact_batch_record_refused``), as fact_write does.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from memory.access import ContextAccess
from memory.errors import MemoryError_, ValidationFailed
from memory.models import (
    Conflict,
    Entity,
    Fact,
    FactStatus,
    Predicate,
    PredicateMode,
    PredicateStatus,
    SourceKind,
)
from memory.models import Run as RunModel
from memory.pg import next_ids, rows_insert
from memory.predicate_names import predicate_check_text
from memory.scopes import scope_validate
from memory.search.indexing import facts_index
from memory.selectors.predicates import predicate_canonicalize, registry_index_load
from memory.services.entities import entity_live
from memory.services.facts import (
    SUPERSEDE_CONFIDENCE_FLOOR,
    WriteOutcome,
    fact_check_shape,
    fact_conflict_reason,
    fact_unit_value,
    fact_value_text,
)
from memory.services.predicates import (
    ResolvedPredicate,
    UnknownPredicate,
    predicate_record_refused,
    predicate_resolve_for_write,
)

BULK_BATCH = 2_000
_FACT_UPDATE_FIELDS = [
    "status",
    "status_changed_at",
    "valid_until",
    "last_seen_at",
    "observed_count",
    "confidence",
    "value",
    "value_text",
    "object",
    "raw_predicate",
]


@dataclass(frozen=True)
class FactInput:
    subject: Entity
    predicate: str  # any form; canonicalized
    kind: str  # relation | attribute | action | narrative
    object: Entity | None = None
    value: Any = None
    confidence: float = 1.0
    valid_from: datetime | None = None


@dataclass(slots=True)
class FactRow:
    """A fact the batch inserts, as its column values: building a model instance per row
    costs more than inserting the row (they are written with one INSERT … SELECT FROM
    unnest). ``pk`` is set before the insert, from the table's sequence."""

    predicate: Predicate
    subject_id: int
    object_id: int | None
    kind: str
    raw_predicate: str
    value: Any
    value_text: str
    confidence: float
    importance: float
    valid_from: datetime | None
    valid_until: datetime | None
    last_seen_at: datetime
    status: str = FactStatus.CURRENT
    status_changed_at: datetime | None = None
    observed_count: int = 1
    supersedes_id: int | None = None
    pk: int | None = None

    @property
    def single_valued(self) -> bool:
        return self.predicate.single_valued


AnyFact = Fact | FactRow


@dataclass
class FactBatchItem:
    input: FactInput
    outcome: WriteOutcome | None = None  # None: not written, see ``error``
    fact: AnyFact | None = None
    resolved: ResolvedPredicate | None = None
    superseded: AnyFact | None = None
    conflict: Conflict | None = None
    error: MemoryError_ | None = None


@dataclass
class FactBatchResult:
    items: list[FactBatchItem]
    # Raw forms a strict context refused: record them with fact_batch_record_refused
    # once the caller's transaction has committed.
    refused_predicates: list[str] = field(default_factory=list)


@transaction.atomic
def facts_write_batch(
    *,
    access: ContextAccess,
    scope: str,
    facts: list[FactInput],
    source_kind: str = SourceKind.API,
    source_ref: str = "",
    run: RunModel | None = None,
) -> FactBatchResult:
    """Write ``facts`` into ``scope``; one item per input, in order (see the module doc)."""
    scope = scope_validate(scope)
    access.require_write(scope)
    items = [FactBatchItem(input=f) for f in facts]
    if not items:
        return FactBatchResult(items=[])
    _check_entities(access, facts)
    resolved, refused = _resolve_predicates(access, {f.predicate for f in facts})
    subjects = _lock_subjects({f.subject.pk for f in facts})
    predicate_ids = {r.predicate.pk for r in resolved.values() if isinstance(r, ResolvedPredicate)}
    state = _current_facts(scope, set(subjects.values()), predicate_ids)
    writer = _BatchWriter(
        access=access,
        scope=scope,
        now=timezone.now(),
        state=state,
        base=_base_fields(access, scope, source_kind, source_ref, run),
    )
    for item in items:
        outcome = resolved[item.input.predicate]
        if isinstance(outcome, MemoryError_):
            item.error = outcome
            continue
        item.resolved = outcome
        try:
            writer.decide(item, subject_id=subjects[item.input.subject.pk])
        except ValidationFailed as exc:
            item.error = exc
    writer.flush()
    return FactBatchResult(items=items, refused_predicates=refused)


def fact_batch_record_refused(*, access: ContextAccess, raws: list[str]) -> None:
    """Record the forms a strict context refused as drift (after the batch committed)."""
    for raw in dict.fromkeys(raws):
        predicate_record_refused(context=access.context, raw=raw)


def _check_entities(access: ContextAccess, facts: list[FactInput]) -> None:
    scopes: set[str] = set()
    for fact in facts:
        for entity in (fact.subject, fact.object):
            if entity is None:
                continue
            if entity.pk is None or entity.context_id != access.context.pk:
                raise ValidationFailed("entities must belong to this context", code="wrong_context")
            scopes.add(entity.scope)
    for entity_scope in scopes:
        access.require_read(entity_scope)


def _resolve_predicates(
    access: ContextAccess, raws: set[str]
) -> tuple[dict[str, ResolvedPredicate | MemoryError_], list[str]]:
    """Each distinct form once, from one registry load. Registered forms, and drift the
    registry already holds in a permissive context, resolve in memory (the drift's
    last-seen stamp is written once for the batch); new, rejected and strict-refused forms
    go through predicate_resolve_for_write, which owns those rules."""
    context = access.context
    index = registry_index_load(context=context)
    permissive = context.predicate_mode == PredicateMode.PERMISSIVE
    out: dict[str, ResolvedPredicate | MemoryError_] = {}
    refused: list[str] = []
    seen_drift: set[int] = set()
    for raw in sorted(raws):
        try:
            predicate_check_text(raw)
            found = predicate_canonicalize(context=context, name=raw, index=index)
            known = found.predicate
            if found.registered and known is not None:
                out[raw] = ResolvedPredicate(known, found.canonical, found.via, True)
            elif permissive and known is not None and known.status == PredicateStatus.OBSERVED:
                out[raw] = ResolvedPredicate(known, known.name, "none", False)
                seen_drift.add(known.pk)
            else:
                out[raw] = predicate_resolve_for_write(context=context, raw=raw)
        except UnknownPredicate as exc:
            out[raw] = exc
            refused.append(raw)
        except ValidationFailed as exc:
            out[raw] = exc
    if seen_drift:
        now = timezone.now()
        Predicate.objects.filter(pk__in=seen_drift).update(
            last_seen_at=now, first_seen_at=Coalesce("first_seen_at", Value(now))
        )
    return out, refused


def _lock_subjects(ids: set[int]) -> dict[int, int]:
    """Lock the subjects (ordered by id); map each to its live entity (merged → survivor).

    The redirects are read under the locks, the survivor's too: a merge committing while
    we waited is seen, never a stale copy (as ``entities_lock_live``, without loading
    whole rows with their vectors for a few thousand subjects).
    """
    redirects: dict[int, int | None] = dict(
        Entity.objects.select_for_update()
        .filter(pk__in=ids)
        .order_by("pk")
        .values_list("pk", "merged_into_id")
    )
    live: dict[int, int] = {}
    for pk in sorted(redirects):
        current, seen = pk, {pk}
        while (target := redirects[current]) is not None and target not in seen:
            if target not in redirects:
                redirects.update(
                    Entity.objects.select_for_update()
                    .filter(pk=target)
                    .values_list("pk", "merged_into_id")
                )
            seen.add(target)
            current = target
        live[pk] = current
    return live


def _current_facts(
    scope: str, subject_ids: set[int], predicate_ids: set[int]
) -> dict[tuple[int, int], list[AnyFact]]:
    state: dict[tuple[int, int], list[AnyFact]] = defaultdict(list)
    if not subject_ids or not predicate_ids:
        return state
    current = Fact.objects.filter(
        subject_id__in=subject_ids,
        predicate_id__in=predicate_ids,
        scope=scope,
        status=FactStatus.CURRENT,
    ).order_by("pk")
    for fact in current:
        state[(fact.subject_id, fact.predicate_id)].append(fact)
    return state


def _base_fields(
    access: ContextAccess, scope: str, source_kind: str, source_ref: str, run: RunModel | None
) -> dict[str, Any]:
    return {
        "context": access.context,
        "scope": scope,
        "source_kind": source_kind,
        "source_ref": source_ref[:300],
        "run": run,
        "created_by": access.user if getattr(access.user, "is_authenticated", False) else None,
    }


class _BatchWriter:
    """Decides each fact against the current state, then writes everything in bulk."""

    def __init__(
        self,
        *,
        access: ContextAccess,
        scope: str,
        now: datetime,
        state: dict[tuple[int, int], list[AnyFact]],
        base: dict[str, Any],
    ) -> None:
        self.access = access
        self.scope = scope
        self.now = now
        self.state = state
        self.base = base
        self.new: list[FactRow] = []
        self.dirty: dict[int, Fact] = {}  # existing facts changed, by pk
        self.rewritten: set[int] = set()  # existing aggregates whose value changed
        self.in_batch_links: list[tuple[FactRow, FactRow]] = []  # (new fact, new prior)
        self.conflicts: list[tuple[FactBatchItem, AnyFact, FactRow]] = []

    def decide(self, item: FactBatchItem, *, subject_id: int) -> None:
        data = item.input
        resolved = item.resolved
        assert resolved is not None
        pred = resolved.predicate
        fact_check_shape(data.kind, object_=data.object, value=data.value)
        text = fact_value_text(data.value)
        confidence = fact_unit_value("confidence", data.confidence)
        object_id = entity_live(data.object).pk if data.object is not None else None
        current = self.state[(subject_id, pred.pk)]
        identical = next(
            (
                f
                for f in current
                if f.kind == data.kind and f.object_id == object_id and f.value_text == text
            ),
            None,
        )
        if identical is not None:
            identical.last_seen_at = self.now
            identical.observed_count += 1
            identical.confidence = max(identical.confidence, confidence)
            self._touch(identical)
            item.outcome, item.fact = "reobserved", identical
            return
        if pred.is_aggregate and current:
            prior = current[0]
            prior.value, prior.value_text, prior.object_id = data.value, text, object_id
            prior.confidence, prior.last_seen_at = confidence, self.now
            prior.observed_count += 1
            prior.raw_predicate = data.predicate[:200]
            self._touch(prior)
            if isinstance(prior, Fact):
                self.rewritten.add(prior.pk)
            item.outcome, item.fact = "updated", prior
            return
        fact = self._new_fact(data, pred, subject_id, object_id, text, confidence)
        item.fact = fact
        if not pred.single_valued or not current:
            current.append(fact)
            self.new.append(fact)
            item.outcome = "created"
            return
        self._single_valued(item, fact, current)

    def _new_fact(
        self,
        data: FactInput,
        pred: Predicate,
        subject_id: int,
        object_id: int | None,
        text: str,
        confidence: float,
    ) -> FactRow:
        valid_until = None
        if pred.default_validity_days:
            valid_until = (data.valid_from or self.now) + timedelta(days=pred.default_validity_days)
        return FactRow(
            predicate=pred,
            subject_id=subject_id,
            object_id=object_id,
            kind=data.kind,
            raw_predicate=data.predicate[:200],
            value=data.value,
            value_text=text,
            confidence=confidence,
            importance=pred.default_importance,
            valid_from=data.valid_from,
            valid_until=valid_until,
            last_seen_at=self.now,
        )

    def _single_valued(self, item: FactBatchItem, fact: FactRow, current: list[AnyFact]) -> None:
        prior = current[0]
        wins = (
            self.access.context.auto_supersede
            and fact.confidence >= SUPERSEDE_CONFIDENCE_FLOOR
            and fact.confidence >= prior.confidence
        )
        self.new.append(fact)
        if wins:
            prior.status = FactStatus.SUPERSEDED
            prior.status_changed_at = self.now
            if prior.valid_until is None or prior.valid_until > self.now:
                prior.valid_until = fact.valid_from or self.now
            if isinstance(prior, FactRow):
                self.in_batch_links.append((fact, prior))
            else:
                fact.supersedes_id = prior.pk
                self._touch(prior)
            current[:] = [fact]
            item.outcome, item.superseded = "superseded", prior
            return
        fact.status = FactStatus.CONTESTED
        fact.status_changed_at = self.now
        item.outcome = "conflict"
        self.conflicts.append((item, prior, fact))

    def _touch(self, fact: AnyFact) -> None:
        if isinstance(fact, Fact):
            self.dirty[fact.pk] = fact

    def flush(self) -> None:
        # Priors leave "current" before new values enter it (the partial unique index).
        if self.dirty:
            Fact.objects.bulk_update(
                list(self.dirty.values()), _FACT_UPDATE_FIELDS, batch_size=BULK_BATCH
            )
        if self.new:
            for row, pk in zip(self.new, next_ids(Fact, len(self.new)), strict=True):
                row.pk = pk
            for fact, prior in self.in_batch_links:
                fact.supersedes_id = prior.pk
            for start in range(0, len(self.new), BULK_BATCH):
                _insert(self.new[start : start + BULK_BATCH], base=self.base, now=self.now)
        # Search postings commit with the facts, as fact_write's do: new facts and
        # aggregates rewritten in place (a re-observation says nothing new).
        facts_index([_pk(f) for f in self.new] + sorted(self.rewritten))
        if self.conflicts:
            rows = [
                Conflict(
                    context=self.access.context,
                    scope=self.scope,
                    subject_id=contested.subject_id,
                    predicate=contested.predicate,
                    current_fact_id=_pk(current),
                    contested_fact_id=_pk(contested),
                    # The rule reads only confidences and the context's setting.
                    reason=fact_conflict_reason(
                        access=self.access,
                        fact=contested,  # type: ignore[arg-type]
                        current=current,  # type: ignore[arg-type]
                    ),
                )
                for _, current, contested in self.conflicts
            ]
            Conflict.objects.bulk_create(rows, batch_size=BULK_BATCH)
            for (item, _, _), conflict in zip(self.conflicts, rows, strict=True):
                item.conflict = conflict


def _pk(fact: AnyFact) -> int:
    assert fact.pk is not None  # every fact has its id once the batch is inserted
    return int(fact.pk)


def _column_values(row: FactRow, base: dict[str, Any], now: datetime) -> dict[str, Any]:
    created_by = base["created_by"]
    run = base["run"]
    return {
        "id": row.pk,
        "context_id": base["context"].pk,
        "scope": base["scope"],
        "subject_id": row.subject_id,
        "predicate_id": row.predicate.pk,
        "raw_predicate": row.raw_predicate,
        "kind": row.kind,
        "object_id": row.object_id,
        "value": None if row.value is None else json.dumps(row.value),
        "value_text": row.value_text,
        "confidence": row.confidence,
        "importance": row.importance,
        "valid_from": row.valid_from,
        "valid_until": row.valid_until,
        "recorded_at": now,
        "last_seen_at": row.last_seen_at,
        "observed_count": row.observed_count,
        "status": row.status,
        "status_changed_at": row.status_changed_at,
        "supersedes_id": row.supersedes_id,
        "single_valued": row.single_valued,
        "source_kind": base["source_kind"],
        "source_ref": base["source_ref"],
        "run_id": run.pk if run is not None else None,
        "document_id": None,
        "turn_id": None,  # set by the ingest run that owns the turn (provenance)
        "created_by_id": created_by.pk if created_by is not None else None,
    }


def _insert(rows: list[FactRow], *, base: dict[str, Any], now: datetime) -> None:
    rows_insert(Fact, [_column_values(row, base, now) for row in rows])
