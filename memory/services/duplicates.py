"""Finding duplicate entities.

Several cheap methods propose pairs inside small blocks, so 100k entities never need
10^10 comparisons: exact keys and fingerprints group by hash; edit distance compares
neighbours in key order (a sorted-neighbourhood window); embeddings ask the HNSW index
for each entity's nearest same-type neighbours. Pairs are stored as DuplicateCandidate
rows; a dismissed pair keeps its row and is never proposed again.
"""

from __future__ import annotations

import itertools
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import jellyfish
from django.db import connection, transaction
from rapidfuzz import fuzz

from memory.access import ContextAccess
from memory.errors import ValidationFailed
from memory.models import AuditEvent, Context, Entity, EntityIdentifier, Role
from memory.models.duplicate import DuplicateCandidate, DuplicateStatus
from memory.services.audit import audit_record

# Base confidence of each method when it fires alone.
METHOD_SCORES = {
    "identifier": 0.98,
    "key": 0.95,
    "alias": 0.92,
    "fingerprint": 0.9,
    "ngram": 0.85,
    "phonetic": 0.8,
}
EDIT_DISTANCE_MIN = 88.0  # rapidfuzz ratio, 0–100
WINDOW = 6  # sorted-neighbourhood window for edit distance
MAX_BLOCK = 40  # a larger hash block is a common word, not a duplicate signal
NEIGHBOURS = 5  # embedding neighbours asked per entity
MULTI_METHOD_BONUS = 0.03
ATTRIBUTE_AGREEMENT_BONUS = 0.03


@dataclass(frozen=True)
class _Row:
    id: int
    type: str
    scope: str
    name: str
    key: str
    alias_keys: tuple[str, ...]
    attributes: dict[str, object]


@dataclass
class ScanReport:
    entities: int = 0
    pairs: int = 0
    new: int = 0
    seconds: float = 0.0
    by_method: dict[str, int] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)


def _fingerprint(key: str) -> str:
    return " ".join(sorted(set(key.split())))


def _ngram_fingerprint(key: str, n: int = 2) -> str:
    compact = key.replace(" ", "")
    return "".join(sorted({compact[i : i + n] for i in range(max(len(compact) - n + 1, 1))}))


def _phonetic(key: str) -> str:
    return " ".join(jellyfish.metaphone(token) for token in key.split() if token)


def _pairs_in_blocks(blocks: dict[tuple[str, str], list[int]]) -> Iterator[tuple[int, int]]:
    for members in blocks.values():
        if 1 < len(members) <= MAX_BLOCK:
            yield from itertools.combinations(sorted(members), 2)


def _hash_methods(rows: list[_Row]) -> dict[str, Iterable[tuple[int, int]]]:
    keyed: dict[str, dict[tuple[str, str], list[int]]] = {
        m: defaultdict(list) for m in ("key", "fingerprint", "ngram", "phonetic")
    }
    by_key: dict[tuple[str, str], list[int]] = defaultdict(list)
    for row in rows:
        keyed["key"][(row.type, row.key)].append(row.id)
        keyed["fingerprint"][(row.type, _fingerprint(row.key))].append(row.id)
        if len(row.key.replace(" ", "")) >= 5:  # short names share bigrams by chance
            keyed["ngram"][(row.type, _ngram_fingerprint(row.key))].append(row.id)
        keyed["phonetic"][(row.type, _phonetic(row.key))].append(row.id)
        by_key[(row.type, row.key)].append(row.id)
    methods: dict[str, Iterable[tuple[int, int]]] = {
        m: list(_pairs_in_blocks(blocks)) for m, blocks in keyed.items()
    }
    methods["alias"] = [
        (min(row.id, other), max(row.id, other))
        for row in rows
        for alias in row.alias_keys
        for other in by_key.get((row.type, alias), [])[:MAX_BLOCK]
        if other != row.id
    ]
    return methods


def _edit_distance_pairs(rows: list[_Row]) -> dict[tuple[int, int], float]:
    found: dict[tuple[int, int], float] = {}
    by_type: dict[str, list[_Row]] = defaultdict(list)
    for row in rows:
        by_type[row.type].append(row)
    for typed in by_type.values():
        # Two orders (the key and the key reversed) catch typos at either end.
        for order in (lambda r: r.key, lambda r: r.key[::-1]):
            ranked = sorted(typed, key=order)
            for i, row in enumerate(ranked):
                for other in ranked[i + 1 : i + 1 + WINDOW]:
                    if row.key == other.key:
                        continue
                    ratio = fuzz.ratio(row.key, other.key)
                    if ratio >= EDIT_DISTANCE_MIN:
                        pair = (min(row.id, other.id), max(row.id, other.id))
                        found[pair] = max(found.get(pair, 0.0), ratio / 100.0 * 0.9)
    return found


def _identifier_pairs(context: Context) -> list[tuple[int, int]]:
    shared: dict[tuple[str, str], list[int]] = defaultdict(list)
    for kind, value, entity_id in EntityIdentifier.objects.filter(
        context=context, entity__merged_into__isnull=True
    ).values_list("kind", "value", "entity_id"):
        shared[(kind, value)].append(entity_id)
    return list(_pairs_in_blocks(shared))


def _embedding_pairs(context: Context, threshold: float) -> dict[tuple[int, int], float]:
    """Each live entity's nearest same-type neighbours through the HNSW index."""
    sql = """
        SELECT e.id, n.id, 1 - (e.embedding <=> n.embedding)
        FROM memory_entity e
        CROSS JOIN LATERAL (
            SELECT c.id, c.embedding FROM memory_entity c
            WHERE c.context_id = e.context_id AND c.type = e.type AND c.id <> e.id
              AND c.merged_into_id IS NULL AND c.embedding IS NOT NULL
            ORDER BY c.embedding <=> e.embedding
            LIMIT %s
        ) n
        WHERE e.context_id = %s AND e.merged_into_id IS NULL AND e.embedding IS NOT NULL
    """
    found: dict[tuple[int, int], float] = {}
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL hnsw.ef_search = 64")
        cursor.execute(sql, [NEIGHBOURS, context.pk])
        for a, b, similarity in cursor.fetchall():
            if similarity >= threshold:
                pair = (min(a, b), max(a, b))
                found[pair] = max(found.get(pair, 0.0), float(similarity))
    return found


def _attributes_agree(a: _Row, b: _Row) -> bool:
    shared = set(a.attributes) & set(b.attributes)
    return bool(shared) and all(a.attributes[k] == b.attributes[k] for k in shared)


@transaction.atomic
def duplicates_scan(*, context: Context, use_embeddings: bool = True) -> ScanReport:
    """Find candidate pairs across the context and store them (dismissed pairs stay).
    ``report.phases`` says where the time went (seconds per phase)."""
    clock = _PhaseClock()
    rows = [
        _Row(pk, type_, scope, name, key, tuple(alias_keys), attributes)
        for pk, type_, scope, name, key, alias_keys, attributes in Entity.objects.filter(
            context=context, merged_into__isnull=True
        ).values_list("pk", "type", "scope", "name", "normalized_key", "alias_keys", "attributes")
    ]
    by_id = {row.id: row for row in rows}
    clock.lap("read")
    scores: dict[tuple[int, int], dict[str, float]] = defaultdict(dict)
    for method, pairs in _hash_methods(rows).items():
        for pair in pairs:
            scores[pair][method] = METHOD_SCORES[method]
    clock.lap("keys")
    for pair in _identifier_pairs(context):
        if pair[0] in by_id and pair[1] in by_id:
            scores[pair]["identifier"] = METHOD_SCORES["identifier"]
    clock.lap("identifiers")
    for pair, score in _edit_distance_pairs(rows).items():
        scores[pair]["edit_distance"] = score
    clock.lap("edit_distance")
    if use_embeddings:
        for pair, score in _embedding_pairs(context, context.review_threshold).items():
            scores[pair]["embedding"] = score
        clock.lap("embeddings")
    report = ScanReport(entities=len(rows), pairs=len(scores))
    report.new = _store(context, scores, by_id, report)
    clock.lap("store")
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


def _combined(methods: dict[str, float], agree: bool) -> float:
    score = max(methods.values()) + MULTI_METHOD_BONUS * (len(methods) - 1)
    return round(min(score + (ATTRIBUTE_AGREEMENT_BONUS if agree else 0.0), 0.99), 4)


def _store(
    context: Context,
    scores: dict[tuple[int, int], dict[str, float]],
    by_id: dict[int, _Row],
    report: ScanReport,
) -> int:
    existing = {
        (a, b): (pk, status)
        for pk, a, b, status in DuplicateCandidate.objects.filter(context=context).values_list(
            "pk", "entity_a_id", "entity_b_id", "status"
        )
    }
    new_rows, updates = [], []
    for (a, b), methods in scores.items():
        agree = _attributes_agree(by_id[a], by_id[b])
        names = sorted(methods) + (["attributes"] if agree else [])
        for name in names:
            report.by_method[name] = report.by_method.get(name, 0) + 1
        score = _combined(methods, agree)
        known = existing.get((a, b))
        if known is None:
            new_rows.append(
                DuplicateCandidate(
                    context=context,
                    entity_a_id=a,
                    entity_b_id=b,
                    score=score,
                    methods=names,
                    source="scan",
                )
            )
        elif known[1] == DuplicateStatus.OPEN:
            updates.append(DuplicateCandidate(pk=known[0], score=score, methods=names))
    DuplicateCandidate.objects.bulk_create(new_rows, batch_size=2000, ignore_conflicts=True)
    DuplicateCandidate.objects.bulk_update(updates, ["score", "methods"], batch_size=2000)
    return len(new_rows)


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
