"""Finding duplicate entities: as they are written, and by a full scan for backfill.

Blocking (``memory.matching.blocking``) proposes the pairs worth comparing;
each is compared field by field and scored by the context's Fellegi–Sunter model
(``memory.matching.scoring``), whose weights EM estimates from the context's
own entities; ``memory.services.duplicates.pairs`` stores the pairs at or above the match
probability and withdraws the finder's open pairs that fell below.

Incremental: ``duplicates_check(entity_ids)`` runs inside the transaction of every write
that creates or changes entities (ingest, POST entities, bulk and CSV seeding, merge
undo, and the drain that writes their vectors), once per batch: a handful of statements
whatever the batch size. When the context has doubled since its weights were estimated,
the check queues ``duplicates_refit`` for the task worker instead of re-estimating in the
writer's transaction (docs/decisions/0101).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from django.db import transaction

from memory.domain.access import ContextAccess
from memory.infra.queueing import duplicates_refit_enqueue
from memory.infra.stages import stage
from memory.kernel.errors import ValidationFailed
from memory.matching.blocking import (
    Pair,
    blocks_of,
    keys_and_holders,
    keys_rewrite,
    keys_write_all,
)
from memory.matching.neighbours import (
    cosines,
    edit_distance_pairs,
    embedding_neighbours,
    embedding_neighbours_all,
)
from memory.matching.records import records_of, records_read
from memory.matching.scoring import MATCH_PROBABILITY, Record
from memory.matching.weights import model_read, model_read_for_check, model_save
from memory.models import AuditEvent, Context, Entity, Role
from memory.models.duplicate import DuplicateCandidate, DuplicateModel, DuplicateStatus
from memory.services.audit import audit_record
from memory.services.duplicates.pairs import (
    Existing,
    existing_pairs,
    is_finders_open,
    model_fit,
    needing_cosines,
    refit_due,
    refit_if_grown,
    score_pairs,
    store,
)

logger = logging.getLogger(__name__)


@dataclass
class ScanReport:
    entities: int = 0
    pairs: int = 0  # blocked pairs compared
    stored: int = 0  # pairs at or above the match probability
    new: int = 0
    seconds: float = 0.0
    withdrawn: int = 0  # open pairs the finder had stored that fell below it
    fitted_pairs: int = 0  # blocked pairs EM estimated the weights on (0: defaults)
    by_method: dict[str, int] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)


@dataclass
class CheckReport:
    entities: int = 0
    compared: int = 0
    stored: int = 0
    new: int = 0
    withdrawn: int = 0


# --- incremental ---------------------------------------------------------------------------

_collecting: ContextVar[set[int] | None] = ContextVar("duplicates_collecting", default=None)


@contextmanager
def duplicates_check_batch() -> Iterator[set[int]]:
    """Collect the ids that ``duplicates_check`` calls inside the block ask for, and
    check them once when the block ends (a bulk writer's batch: one check, not one per
    row). The block should end inside the writer's transaction."""
    ids: set[int] = set()
    token = _collecting.set(ids)
    try:
        yield ids
    finally:
        _collecting.reset(token)
    if ids:
        duplicates_check(sorted(ids))


def duplicates_check(entity_ids: Iterable[int]) -> CheckReport | None:
    """Check these entities (just created or changed, or just given a vector) against
    the live entities of their type: refresh their blocking keys, score every blocked
    pair and every open pair they are in, store those at or above the match probability
    and withdraw the finder's open pairs that fell below. Runs in the caller's
    transaction; inside ``duplicates_check_batch`` it only collects. Returns None when
    it only collected."""
    ids = sorted(set(entity_ids))
    collecting = _collecting.get()
    if collecting is not None:
        collecting.update(ids)
        return None
    with stage("duplicates"):
        return _check(ids)


def _check(ids: list[int]) -> CheckReport:
    report = CheckReport()
    if not ids:
        return report
    by_context: dict[int, dict[int, Record]] = defaultdict(dict)
    for pk, (context_id, record) in records_read(ids=ids).items():
        by_context[context_id][pk] = record
    gone = set(ids) - {pk for mine in by_context.values() for pk in mine}
    if gone:  # merged away: their keys go, their open pairs with them below
        _forget_keys(gone)
    for context_id, mine in by_context.items():
        _check_in(context_id, mine, report)
    return report


def _forget_keys(ids: set[int]) -> None:
    from memory.models.duplicate import DuplicateKey

    DuplicateKey.objects.filter(entity_id__in=sorted(ids)).delete()


def _check_in(context_id: int, mine: dict[int, Record], report: CheckReport) -> None:
    """About eight statements whatever the number of entities: keys and their holders,
    embedding neighbours, stored pairs, the other entities' records, cosines where the
    names differ (often none), the model, then the writes."""
    with transaction.atomic(savepoint=False):
        proposed, rare, rewrite = keys_and_holders(context_id, mine)
        similarities = embedding_neighbours(
            context_id, [pk for pk, r in mine.items() if r.has_vector is not False]
        )
        for pair in similarities:
            proposed[pair].add("embedding")
        existing = existing_pairs(context_id, list(mine))
        for pair, known in existing.items():
            if is_finders_open(known):
                proposed.setdefault(pair, set())  # re-scored, kept or withdrawn
        others = {x for p in proposed for x in p} - set(mine)
        records = mine | records_of(context_id, others)
        similarities |= cosines(needing_cosines(records, proposed, similarities, rare))
        # The model and the live-entity count its refit check needs, in one statement.
        model, fitted_on, counted = model_read_for_check(context_id)
        if refit_due(fitted_on, counted):  # off the writer's path: see duplicates_refit
            duplicates_refit_enqueue(context_id)
        scored = score_pairs(model, records, proposed, similarities, rare)
        stored, new, withdrawn = store(
            context_id, scored, existing, source="check", withdraw=list(existing)
        )
        # Last: nothing above reads these entities' stored keys, and in an ingest's
        # overlap window the server writes them while the run prepares its facts.
        keys_rewrite(rewrite)
    report.entities += len(mine)
    report.compared += len(scored)
    report.stored += stored
    report.new += new
    report.withdrawn += withdrawn


# Entities checked again after a re-estimate, a transaction each.
RECHECK_BATCH = 2_000


def duplicates_refit(context_id: int) -> bool:
    """Re-estimate the context's weights if it has doubled since the last estimate, then
    check again the entities written since that estimate, so that every one of them is
    scored by the new weights. Returns whether it re-estimated.

    The check queues this (``duplicates_refit_task``) instead of doing it in the
    writer's transaction: at a few thousand entities a re-estimate takes half a second,
    which made one write in a few slower than the rest (docs/decisions/0101). Until it
    runs, writes are scored by the previous weights, which were estimated on at least half
    of the same context."""
    with transaction.atomic():
        previous = DuplicateModel.objects.filter(context_id=context_id).select_for_update()
        since = previous.values_list("fitted_at", flat=True).first()
        current, fitted_on, counted = model_read_for_check(context_id)
        if refit_if_grown(context_id, current, fitted_on, counted) is None:
            return False
    written = Entity.objects.filter(context_id=context_id, merged_into__isnull=True)
    if since is not None:
        written = written.filter(updated_at__gte=since)
    ids = list(written.order_by("pk").values_list("pk", flat=True))
    for start in range(0, len(ids), RECHECK_BATCH):
        with transaction.atomic():
            _check(ids[start : start + RECHECK_BATCH])
    return True


# --- the full scan --------------------------------------------------------------------------


@transaction.atomic
def duplicates_scan(*, context: Context, use_embeddings: bool = True) -> ScanReport:
    """Rebuild the context's blocking keys, re-estimate its weights by EM on all blocked
    pairs, score them and store the candidates (dismissed pairs stay; the finder's open
    pairs below the match probability now go). ``report.phases`` says where the time went."""
    clock = _PhaseClock()
    records = records_of(context.pk, None)
    clock.lap("read")
    keys_write_all(context.pk, records)
    clock.lap("keys_written")
    proposed, rare = blocks_of(records)
    clock.lap("blocks")
    for pair in edit_distance_pairs(records.values()):
        proposed[pair].add("edit_distance")
    clock.lap("edit_distance")
    similarities: dict[Pair, float] = {}
    if use_embeddings:
        similarities = embedding_neighbours_all(context.pk)
        for pair in similarities:
            proposed[pair].add("embedding")
        clock.lap("embeddings")
        similarities |= cosines(needing_cosines(records, proposed, similarities, rare))
        clock.lap("cosines")
    model = model_fit(records, proposed, similarities, rare, with_vectors=use_embeddings)
    if not model.fitted_pairs and not model.fields:  # nothing learnt: keep what there was
        model = model_read(context.pk)[0]
    model_save(context.pk, model, len(records))
    clock.lap("fit")
    scored = score_pairs(model, records, proposed, similarities, rare)
    clock.lap("score")
    existing: Existing = existing_pairs(context.pk)
    stored, new, withdrawn = store(context.pk, scored, existing, source="scan", withdraw=existing)
    clock.lap("store")
    report = ScanReport(
        entities=len(records),
        pairs=len(scored),
        stored=stored,
        new=new,
        withdrawn=withdrawn,
        fitted_pairs=model.fitted_pairs,
    )
    for s in scored.values():
        if s.probability >= MATCH_PROBABILITY:
            for method in s.methods:
                report.by_method[method] = report.by_method.get(method, 0) + 1
    report.phases = clock.phases
    report.seconds = round(sum(clock.phases.values()), 3)
    return report


class _PhaseClock:
    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.phases[name] = round(now - self._last, 3)
        self._last = now


# --- curators' answers ----------------------------------------------------------------------


def duplicates_dismiss(*, access: ContextAccess, entity_ids: list[int]) -> int:
    """Mark every pair among ``entity_ids`` "not duplicates"; returns how many pairs."""
    undo = duplicates_dismiss_recorded(access=access, entity_ids=entity_ids).undo
    return len(undo["previous"]) if undo else 0


@transaction.atomic
def duplicates_dismiss_recorded(*, access: ContextAccess, entity_ids: list[int]) -> AuditEvent:
    """Mark every pair among ``entity_ids`` "not duplicates" so none is proposed again;
    returns the audit event that undoes it (``duplicates_reopen``)."""
    access.require_role(Role.CURATOR)
    ids = sorted(set(entity_ids))
    if not 2 <= len(ids) <= 50:
        raise ValidationFailed("dismiss 2–50 entities at a time", code="invalid_dismiss")
    visible = Entity.objects.filter(access.grants.read_q(), context=access.context, pk__in=ids)
    if visible.count() != len(ids):
        raise ValidationFailed("some of these entities do not exist here", code="entity_not_found")
    previous = {}
    for a, b in itertools.combinations(ids, 2):
        candidate, created = DuplicateCandidate.objects.get_or_create(
            context=access.context,
            entity_a_id=a,
            entity_b_id=b,
            defaults={
                "score": 0.0,
                "methods": [],
                "status": DuplicateStatus.DISMISSED,
                "source": "curator",
            },
        )
        previous[candidate.pk] = None if created else candidate.status
        if not created and candidate.status != DuplicateStatus.DISMISSED:
            candidate.status = DuplicateStatus.DISMISSED
            candidate.save(update_fields=["status", "updated_at"])
    return audit_record(
        context=access.context,
        actor=access.user,
        action="duplicates_dismiss",
        target_type="entity",
        target_id=ids[0],
        summary=f"marked entities {ids} as not duplicates",
        undo={"op": "duplicates_reopen", "previous": {str(k): v for k, v in previous.items()}},
    )


def duplicates_reopen(*, access: ContextAccess, undo: dict[str, object]) -> None:
    previous = undo["previous"]
    assert isinstance(previous, dict)
    for pk, status in previous.items():
        rows = DuplicateCandidate.objects.filter(pk=int(pk), context=access.context)
        if status is None:
            rows.delete()
        else:
            rows.update(status=status)
