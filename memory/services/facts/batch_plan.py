"""The fact batch's in-memory half: the facts of one batch decided in order against the
current state that fact_batch.py read under its locks, then written in bulk.

Each fact is re-observation of an identical current fact, an aggregate updated in place,
a new fact, or a single-valued collision decided by services/facts/rules.py (including
between facts of the same batch); ``BatchWriter.flush`` then writes everything with a
handful of bulk statements, priors out of "current" before newcomers enter it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from memory.domain.access import ContextAccess
from memory.domain.screening import REDACTED, secret_name, secret_refuse
from memory.infra.pg_overlap import overlap_open
from memory.infra.pg_rows import next_ids, rows_insert
from memory.kernel.errors import DomainError
from memory.models import Conflict, Entity, Fact, FactStatus, FactTrust, Predicate
from memory.search.indexing import FactText, facts_index
from memory.selectors.constraints import Violation
from memory.services.facts.rules import (
    collision_decide,
    collision_is_history,
    contested_fields,
    fact_check_shape,
    fact_check_validity,
    fact_identity,
    fact_kind_for,
    fact_unit_value,
    fact_value_text,
    history_fields,
    reobserve,
    superseded_fields,
)
from memory.services.facts.trust import TRUSTED, WriteTrust
from memory.services.registry.resolution import ResolvedPredicate

BULK_BATCH = 2_000
WriteOutcome = Literal["created", "reobserved", "updated", "superseded", "conflict"]
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
# A pending fact a trusted writer confirmed: written after _FACT_UPDATE_FIELDS, once the
# value it displaces has left "current" (the partial unique index is checked row by row).
_PROMOTED_FIELDS = ["trust", "trust_reason", "supersedes"]


@dataclass(frozen=True)
class FactInput:
    subject: Entity
    predicate: str  # any form; canonicalized
    kind: str | None = None  # relation | attribute | action | narrative; None: the predicate's
    object: Entity | None = None
    value: Any = None
    confidence: float = 1.0
    importance: float | None = None  # None: the predicate's default
    valid_from: datetime | None = None
    valid_until: datetime | None = None  # None: the predicate's default validity, if any
    # The caller refused values holding secrets already (an ingest run, before its items
    # named entities): the writer does not scan the value a second time.
    value_screened: bool = False


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
    trust: str = FactTrust.TRUSTED
    trust_reason: str = ""
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
    error: DomainError | None = None
    # A pending value of a single-valued slot: the trusted value it would replace.
    proposes_to_replace: AnyFact | None = None
    # The claim was rejected by a curator before: re-observed, still rejected.
    rejected_before: bool = False
    # The constraint report's rows that hold this fact once written: a write is never
    # refused for breaking a constraint, it is warned (selectors/constraints.py).
    warnings: list[Violation] = field(default_factory=list)


class BatchWriter:
    """Decides each fact against the current state, then writes everything in bulk."""

    def __init__(
        self,
        *,
        access: ContextAccess,
        scope: str,
        now: datetime,
        state: dict[tuple[int, int], list[AnyFact]],
        base: dict[str, Any],
        names: dict[int, str] | None = None,
        trust: WriteTrust = TRUSTED,
    ) -> None:
        self.access = access
        # The live entities' names as locked: new facts are indexed from them.
        self.names = names or {}
        self.trust = trust
        self.promoted: dict[int, Fact] = {}  # pending facts this batch's writer confirmed
        self.scope = scope
        self.now = now
        self.state = state
        self.base = base
        self.new: list[FactRow] = []
        self.dirty: dict[int, Fact] = {}  # existing facts changed, by pk
        self.rewritten: set[int] = set()  # existing aggregates whose value changed
        self.in_batch_links: list[tuple[FactRow, FactRow]] = []  # (new fact, new prior)
        self.conflicts: list[tuple[FactBatchItem, AnyFact, FactRow, str]] = []
        self._secret_forms: dict[tuple[str, str], bool] = {}

    def decide(self, item: FactBatchItem, *, subject_id: int, object_id: int | None) -> None:
        data = item.input
        resolved = item.resolved
        assert resolved is not None
        pred = resolved.predicate
        has_object, has_value = data.object is not None, data.value is not None
        kind = fact_kind_for(pred.kind, has_object=has_object, has_value=has_value, kind=data.kind)
        fact_check_shape(kind, has_object=has_object, has_value=has_value)
        text = fact_value_text(data.value)
        if self._secret_predicate(data.predicate, pred.name):
            secret_refuse(REDACTED, what=f"a value of {pred.name!r}")
        if not data.value_screened:
            secret_refuse(text, what="the fact value")
        confidence = fact_unit_value("confidence", data.confidence)
        importance = fact_unit_value(
            "importance", pred.default_importance if data.importance is None else data.importance
        )
        fact_check_validity(data.valid_from, data.valid_until)
        facts = self.state[(subject_id, pred.pk)]
        identity = fact_identity(
            subject=subject_id,
            predicate=pred.pk,
            scope=self.scope,
            kind=kind,
            object=object_id,
            value_text=text,
        )
        identical = _identical(facts, identity, self.scope)
        if identical is not None:
            self._reobserve(item, identical, confidence)
            return
        held = [f for f in facts if _holds(f)]  # the trusted current values
        if pred.is_aggregate and held and not self.trust.pending:
            prior = held[0]
            prior.value, prior.value_text, prior.object_id = data.value, text, object_id
            prior.confidence, prior.last_seen_at = confidence, self.now
            prior.observed_count += 1
            prior.raw_predicate = data.predicate[:200]
            self._touch(prior)
            if isinstance(prior, Fact):
                self.rewritten.add(prior.pk)
            item.outcome, item.fact = "updated", prior
            return
        fact = self._new_fact(
            data, pred, kind, subject_id, object_id, text, (confidence, importance)
        )
        item.fact = fact
        facts.append(fact)
        self.new.append(fact)
        if self.trust.pending:
            # A proposal: it waits beside the trusted value and displaces nothing.
            fact.trust, fact.trust_reason = self.trust.trust, self.trust.reason
            item.outcome = "created"
            if pred.single_valued and held:
                item.proposes_to_replace = held[0]
            return
        if not pred.single_valued or not held:
            item.outcome = "created"
            return
        self._collide(item, fact, held[0])

    def _secret_predicate(self, raw: str, name: str) -> bool:
        """Whether a form or its predicate names a secret, each pair judged once a batch."""
        verdict = self._secret_forms.get((raw, name))
        if verdict is None:
            verdict = self._secret_forms[(raw, name)] = bool(secret_name(raw) or secret_name(name))
        return verdict

    def _reobserve(self, item: FactBatchItem, identical: AnyFact, confidence: float) -> None:
        """An identical claim: seen once more. A rejected claim stays rejected; a pending
        one is accepted when this writer confirms it and it displaces nothing it may not."""
        seen = reobserve(
            observed_count=identical.observed_count,
            confidence=identical.confidence,
            last_seen_at=identical.last_seen_at,
            seen_count=1,
            seen_confidence=confidence,
            seen_at=self.now,
        )
        identical.observed_count, identical.confidence = seen.observed_count, seen.confidence
        identical.last_seen_at = seen.last_seen_at
        self._touch(identical)
        item.outcome, item.fact = "reobserved", identical
        item.rejected_before = identical.trust == FactTrust.REJECTED
        if (
            identical.trust == FactTrust.PENDING
            and self.trust.confirms(identical.trust_reason)
            and not self._own_claim(identical)
        ):
            self._confirm(item, identical)

    def _own_claim(self, fact: AnyFact) -> bool:
        """Whether the writer of this batch wrote ``fact``: a principal never confirms its
        own claim (an agent relaying a claim twice, or through a second token of its user,
        is still one voice). Claims without a writer (system work) are no one's."""
        user = self.access.user
        writer = fact.created_by_id if isinstance(fact, Fact) else getattr(user, "pk", None)
        return user is not None and writer is not None and writer == getattr(user, "pk", None)

    def _confirm(self, item: FactBatchItem, pending: AnyFact) -> None:
        held = [f for f in self.state[_slot_key(pending)] if _holds(f)]
        if pending.status != FactStatus.CURRENT:
            return
        if pending.single_valued and held:
            if isinstance(pending, FactRow):
                return  # proposed and confirmed in one batch: a curator chooses
            prior = held[0]
            if collision_is_history(
                newcomer_valid_from=pending.valid_from,
                newcomer_valid_until=pending.valid_until,
                prior_valid_from=prior.valid_from,
                now=self.now,
            ):
                for name, value in history_fields(
                    newcomer_valid_until=pending.valid_until,
                    prior_valid_from=prior.valid_from,
                    now=self.now,
                ).items():
                    setattr(pending, name, value)
                self._touch(pending)
                pending.trust, pending.trust_reason = FactTrust.TRUSTED, ""
                return
            collision = collision_decide(
                newcomer_confidence=pending.confidence,
                prior_confidence=prior.confidence,
                auto_supersede=self.access.context.auto_supersede,
            )
            if not collision.newcomer_wins or isinstance(prior, FactRow):
                return  # stays a proposal for a curator
            for name, value in superseded_fields(
                prior_valid_until=prior.valid_until,
                newcomer_valid_from=pending.valid_from,
                now=self.now,
                prior_valid_from=prior.valid_from,
            ).items():
                setattr(prior, name, value)
            self._touch(prior)
            pending.supersedes_id = prior.pk
            item.superseded = prior
        pending.trust, pending.trust_reason = FactTrust.TRUSTED, ""
        if isinstance(pending, Fact):
            self.promoted[pending.pk] = pending

    def _new_fact(
        self,
        data: FactInput,
        pred: Predicate,
        kind: str,
        subject_id: int,
        object_id: int | None,
        text: str,
        weights: tuple[float, float],  # confidence, importance
    ) -> FactRow:
        confidence, importance = weights
        valid_until = data.valid_until
        if valid_until is None and pred.default_validity_days:
            valid_until = (data.valid_from or self.now) + timedelta(days=pred.default_validity_days)
        return FactRow(
            predicate=pred,
            subject_id=subject_id,
            object_id=object_id,
            kind=kind,
            raw_predicate=data.predicate[:200],
            value=data.value,
            value_text=text,
            confidence=confidence,
            importance=importance,
            valid_from=data.valid_from,
            valid_until=valid_until,
            last_seen_at=self.now,
        )

    def _collide(self, item: FactBatchItem, fact: FactRow, prior: AnyFact) -> None:
        """A new trusted value meets the trusted current one of a single-valued slot
        (fact_rules decides): valid time first, then confidence and recording time."""
        if collision_is_history(
            newcomer_valid_from=fact.valid_from,
            newcomer_valid_until=fact.valid_until,
            prior_valid_from=prior.valid_from,
            now=self.now,
        ):
            for name, value in history_fields(
                newcomer_valid_until=fact.valid_until,
                prior_valid_from=prior.valid_from,
                now=self.now,
            ).items():
                setattr(fact, name, value)
            item.outcome = "created"
            return
        collision = collision_decide(
            newcomer_confidence=fact.confidence,
            prior_confidence=prior.confidence,
            auto_supersede=self.access.context.auto_supersede,
        )
        if collision.newcomer_wins:
            changes = superseded_fields(
                prior_valid_until=prior.valid_until,
                newcomer_valid_from=fact.valid_from,
                now=self.now,
                prior_valid_from=prior.valid_from,
            )
            for name, value in changes.items():
                setattr(prior, name, value)
            if isinstance(prior, FactRow):
                self.in_batch_links.append((fact, prior))
            else:
                fact.supersedes_id = prior.pk
                self._touch(prior)
            item.outcome, item.superseded = "superseded", prior
            return
        for name, value in contested_fields(now=self.now).items():
            setattr(fact, name, value)
        item.outcome = "conflict"
        self.conflicts.append((item, prior, fact, collision.reason))

    def _texts(self) -> dict[int, FactText]:
        """The search texts of the new facts whose entities' names the lock read."""
        texts: dict[int, FactText] = {}
        context_id = self.access.context.pk
        for row in self.new:
            subject = self.names.get(row.subject_id)
            obj = row.value_text if row.object_id is None else self.names.get(row.object_id)
            if subject is not None and obj is not None:
                texts[_pk(row)] = FactText(context_id, self.scope, subject, row.predicate.name, obj)
        return texts

    def _touch(self, fact: AnyFact) -> None:
        if isinstance(fact, Fact):
            self.dirty[fact.pk] = fact

    def flush(self) -> None:
        # Priors leave "current" before new values enter it (the partial unique index).
        if self.dirty:
            Fact.objects.bulk_update(
                list(self.dirty.values()), _FACT_UPDATE_FIELDS, batch_size=BULK_BATCH
            )
        if self.promoted:
            Fact.objects.bulk_update(
                list(self.promoted.values()), _PROMOTED_FIELDS, batch_size=BULK_BATCH
            )
        if self.new:
            for row, pk in zip(self.new, next_ids(Fact, len(self.new)), strict=True):
                row.pk = pk
            for fact, prior in self.in_batch_links:
                fact.supersedes_id = prior.pk
            for start in range(0, len(self.new), BULK_BATCH):
                _insert(self.new[start : start + BULK_BATCH], base=self.base, now=self.now)
        # Search postings commit with the facts: new facts and aggregates rewritten in
        # place (a re-observation says nothing new).
        facts_index(
            sorted(self.rewritten), inserted=[_pk(f) for f in self.new], texts=self._texts()
        )
        if self.conflicts:
            rows = [
                Conflict(
                    context=self.access.context,
                    scope=self.scope,
                    subject_id=contested.subject_id,
                    predicate=contested.predicate,
                    current_fact_id=_pk(current),
                    contested_fact_id=_pk(contested),
                    reason=reason,
                )
                for _, current, contested, reason in self.conflicts
            ]
            Conflict.objects.bulk_create(rows, batch_size=BULK_BATCH)
            for (item, _, _, _), conflict in zip(self.conflicts, rows, strict=True):
                item.conflict = conflict


def _holds(fact: AnyFact) -> bool:
    """The trusted current value(s) of a slot: what a trusted newcomer collides with."""
    return fact.status == FactStatus.CURRENT and fact.trust == FactTrust.TRUSTED


def _identical(facts: list[AnyFact], identity: tuple[Any, ...], scope: str) -> AnyFact | None:
    """The stored claim a newcomer re-observes: a trusted current one first, then a
    rejected one (so it stays rejected), then a pending one."""
    candidates = [
        f
        for f in facts
        if (f.status == FactStatus.CURRENT or f.trust == FactTrust.REJECTED)
        and _stored_identity(f, scope) == identity
    ]
    order = {FactTrust.TRUSTED: 0, FactTrust.REJECTED: 1, FactTrust.PENDING: 2}
    return min(candidates, key=lambda f: order[FactTrust(f.trust)], default=None)


def _slot_key(fact: AnyFact) -> tuple[int, int]:
    predicate_id = fact.predicate.pk if isinstance(fact, FactRow) else fact.predicate_id
    return (fact.subject_id, predicate_id)


def _stored_identity(fact: AnyFact, scope: str) -> tuple[Any, ...]:
    """``fact_identity`` of a stored fact or of one this batch is about to insert."""
    predicate_id = fact.predicate.pk if isinstance(fact, FactRow) else fact.predicate_id
    return fact_identity(
        subject=fact.subject_id,
        predicate=predicate_id,
        scope=scope,
        kind=fact.kind,
        object=fact.object_id,
        value_text=fact.value_text,
    )


def _pk(fact: AnyFact) -> int:
    assert fact.pk is not None  # every fact has its id once the batch is inserted
    return int(fact.pk)


def _column_values(row: FactRow, batch: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row.pk,
        "context_id": batch["context_id"],
        "scope": batch["scope"],
        "subject_id": row.subject_id,
        "predicate_id": row.predicate.id,  # .id, not .pk: the property costs a lookup a row
        "raw_predicate": row.raw_predicate,
        "kind": row.kind,
        "object_id": row.object_id,
        "value": None if row.value is None else json.dumps(row.value),
        "value_text": row.value_text,
        "confidence": row.confidence,
        "importance": row.importance,
        "valid_from": row.valid_from,
        "valid_until": row.valid_until,
        "recorded_at": batch["recorded_at"],
        "last_seen_at": row.last_seen_at,
        "observed_count": row.observed_count,
        "status": row.status,
        "status_changed_at": row.status_changed_at,
        "supersedes_id": row.supersedes_id,
        "single_valued": row.single_valued,
        "source_kind": batch["source_kind"],
        "source_ref": batch["source_ref"],
        "run_id": batch["run_id"],
        "document_id": batch["document_id"],
        "turn_id": batch["turn_id"],  # provenance: the turn of the ingest run
        "created_by_id": batch["created_by_id"],
        "trust": row.trust,
        "trust_reason": row.trust_reason,
        "reviewed_at": None,
        "reviewed_by_id": None,
        "review_note": "",
    }


def _insert(rows: list[FactRow], *, base: dict[str, Any], now: datetime) -> None:
    created_by, run = base["created_by"], base["run"]
    batch = {  # what every row of the batch shares, worked out once
        "context_id": base["context"].pk,
        "scope": base["scope"],
        "recorded_at": now,
        "source_kind": base["source_kind"],
        "source_ref": base["source_ref"],
        "run_id": run.pk if run is not None else None,
        "document_id": base["document_id"],
        "turn_id": base.get("turn_id"),
        "created_by_id": created_by.pk if created_by is not None else None,
    }
    # Inside a write's overlap window a large batch goes in chunks: the server writes each
    # chunk's rows (and their index entries) while Python builds the next. Elsewhere one
    # statement: more would only add round trips.
    size = _INSERT_CHUNK if overlap_open() else max(len(rows), 1)
    for start in range(0, len(rows), size):
        chunk = rows[start : start + size]
        rows_insert(Fact, [_column_values(row, batch) for row in chunk], overlap=True)


_INSERT_CHUNK = 500
