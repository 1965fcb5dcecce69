"""Finding duplicate entities.

Several cheap methods propose pairs inside small blocks, so 100k entities never need
10^10 comparisons: exact keys and fingerprints group by hash; edit distance compares
neighbours in key order (a sorted-neighbourhood window); embeddings ask the HNSW index
for each entity's nearest same-type neighbours. A pair that only spelling or sound
proposed (phonetic key, edit distance) is kept only when a second signal backs it
(``_second_signals``). Pairs are stored as DuplicateCandidate rows; a dismissed pair keeps
its row and is never proposed again.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import jellyfish
from django.db import connection, transaction
from rapidfuzz import fuzz
from rapidfuzz.distance import OSA

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
    # Below every precise method, also with a second signal's bonus (docs/DECISIONS.md:
    # "A duplicate pair found by spelling or sound needs a second signal").
    "phonetic": 0.75,
}
EDIT_DISTANCE_MIN = 88.0  # rapidfuzz ratio, 0–100
EDIT_DISTANCE_WEIGHT = 0.75  # its score: ratio × this, 0.66–0.75
# Spelling and sound alone: names made of few sounds collide often (at 100k entities 98%
# of these pairs were two different things), so such a pair needs a second signal.
WEAK_METHODS = frozenset({"phonetic", "edit_distance"})
LONG_WORD = 7  # one slip in a shorter word more often spells another name ("kamo"/"kama")
RARE_WORD = 20  # a word that at most this many entities of a type have tells them apart
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
    unconfirmed: int = 0  # pairs only spelling or sound proposed, without a second signal
    withdrawn: int = 0  # such open pairs an earlier scan had stored, deleted
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
                        score = ratio / 100.0 * EDIT_DISTANCE_WEIGHT
                        found[pair] = max(found.get(pair, 0.0), score)
    return found


def _identifiers(context: Context) -> tuple[list[tuple[int, int]], dict[int, set[str]]]:
    """Pairs that share an identifier; and each entity's identifier domains (of an e-mail
    address, a url or a domain) that a few entities share (at most MAX_BLOCK: not a mail
    provider's)."""
    shared: dict[tuple[str, str], list[int]] = defaultdict(list)
    holders: dict[str, set[int]] = defaultdict(set)
    for kind, value, entity_id in EntityIdentifier.objects.filter(
        context=context, entity__merged_into__isnull=True
    ).values_list("kind", "value", "entity_id"):
        shared[(kind, value)].append(entity_id)
        if domain := _domain(kind, value):
            holders[domain].add(entity_id)
    domains: dict[int, set[str]] = defaultdict(set)
    for domain, ids in holders.items():
        if 1 < len(ids) <= MAX_BLOCK:
            for entity_id in ids:
                domains[entity_id].add(domain)
    return list(_pairs_in_blocks(shared)), domains


def _domain(kind: str, value: str) -> str:
    """The host of an identifier, as ``identifier_normalize`` leaves it; "" if none."""
    if kind == "email":
        return value.rpartition("@")[2]
    if kind == "domain":
        return value
    if kind == "url":
        return value.partition("://")[2].partition("/")[0]
    return ""


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


def _second_signals(
    scores: dict[tuple[int, int], dict[str, float]],
    by_id: dict[int, _Row],
    *,
    domains: dict[int, set[str]],
) -> int:
    """Keep a pair that only spelling or sound proposed when a second signal backs it:
    its attributes agree, its entities share an uncommon identifier domain ("domain"), or
    its names are one word apart ("spelling", ``_one_word_apart``); drop the others and
    return how many. Embeddings are no such signal: an entity's vector encodes its name,
    and for two spellings of similar sounds it is about as close whether or not they are
    one thing (docs/DECISIONS.md, "… needs a second signal")."""
    words = Counter((row.type, word) for row in by_id.values() for word in set(row.key.split()))
    weak = [pair for pair, methods in scores.items() if methods.keys() <= WEAK_METHODS]
    dropped = 0
    for pair in weak:
        a, b = by_id[pair[0]], by_id[pair[1]]
        if domains.get(a.id, set()) & domains.get(b.id, set()):
            scores[pair]["domain"] = 0.0  # listed with the methods; adds the multi-method bonus
        elif _one_word_apart(a, b, words):
            scores[pair]["spelling"] = 0.0
        elif not _attributes_agree(a, b):  # _store lists "attributes" when they do
            del scores[pair]
            dropped += 1
    return dropped


def _one_word_apart(a: _Row, b: _Row, words: Counter[tuple[str, str]]) -> bool:
    """The keys differ in one word, spelled one slip apart (a letter inserted, dropped or
    replaced, two swapped) or with the same sounds, and that word is not all there is to
    tell them apart: it is long, or they share a word few entities of their type have.
    "Jon Smith" / "John Smith" and "Kubernetes" / "Kubernets" are; "Kamo Freight" /
    "Kama Freight" is not (a short word, and many companies are a "Freight")."""
    mine, theirs = Counter(a.key.split()), Counter(b.key.split())
    only_mine, only_theirs = list((mine - theirs).elements()), list((theirs - mine).elements())
    if len(only_mine) != 1 or len(only_theirs) != 1:
        return False
    x, y = only_mine[0], only_theirs[0]
    if OSA.distance(x, y, score_cutoff=1) > 1 and jellyfish.metaphone(x) != jellyfish.metaphone(y):
        return False
    shared = (mine & theirs).keys()
    return min(len(x), len(y)) >= LONG_WORD or any(words[(a.type, w)] <= RARE_WORD for w in shared)


@transaction.atomic
def duplicates_scan(*, context: Context, use_embeddings: bool = True) -> ScanReport:
    """Find candidate pairs across the context and store them (dismissed pairs stay; open
    pairs an earlier scan stored on spelling or sound alone go when no second signal backs
    them now). ``report.phases`` says where the time went (seconds per phase)."""
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
    identifier_pairs, domains = _identifiers(context)
    for pair in identifier_pairs:
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
    unconfirmed = _second_signals(scores, by_id, domains=domains)
    clock.lap("second_signals")
    report = ScanReport(entities=len(rows), pairs=len(scores), unconfirmed=unconfirmed)
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
        (a, b): (pk, status, source, methods)
        for pk, a, b, status, source, methods in DuplicateCandidate.objects.filter(
            context=context
        ).values_list("pk", "entity_a_id", "entity_b_id", "status", "source", "methods")
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
    # Open pairs an earlier scan stored on spelling or sound alone that no second signal
    # backs now (stored before that rule, or their names have changed) are withdrawn.
    stale = [
        pk
        for pair, (pk, status, source, methods) in existing.items()
        if status == DuplicateStatus.OPEN
        and source == "scan"
        and pair not in scores
        and set(methods) <= WEAK_METHODS
    ]
    for start in range(0, len(stale), 10_000):
        DuplicateCandidate.objects.filter(pk__in=stale[start : start + 10_000]).delete()
    report.withdrawn = len(stale)
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
