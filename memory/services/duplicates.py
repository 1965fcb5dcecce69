"""Finding duplicate entities: as they are written, and by a full scan for backfill.

Blocking: every live entity keeps a few keys (``blocking_keys``: its words in any order,
its bigrams, its sounds, each word's sound, its identifiers, dates and codes among its
attributes) in DuplicateKey; two entities of one type sharing a key that few entities
have (at most MAX_BLOCK) are a blocked pair, as are embedding neighbours and, in the
full scan, neighbours in name order (edit distance). 100k entities never need 10^10
comparisons.

Scoring: each blocked pair is compared field by field and scored by the context's
Fellegi–Sunter model (``memory.services.duplicate_scoring``), whose weights EM estimates
from the context's own entities. A pair whose match probability reaches
MATCH_PROBABILITY is stored as an open DuplicateCandidate with its explanation; an open
pair the finder stored that falls below it (its evidence gone) is withdrawn. A dismissed
pair keeps its row and is never proposed again.

Incremental: ``duplicates_check(entity_ids)`` runs inside the transaction of every write
that creates or changes entities (ingest, POST entities, bulk and CSV seeding, merge
undo), once per batch: a handful of statements whatever the batch size.
"""

from __future__ import annotations

import itertools
import logging
import random
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import jellyfish
from django.db import connection, transaction
from django.db.models import Q
from rapidfuzz import fuzz

from memory.access import ContextAccess
from memory.errors import ValidationFailed
from memory.models import AuditEvent, Context, Entity, EntityIdentifier, Role
from memory.models.duplicate import (
    DuplicateCandidate,
    DuplicateKey,
    DuplicateModel,
    DuplicateStatus,
)
from memory.services.audit import audit_record
from memory.services.duplicate_scoring import (
    MATCH_PROBABILITY,
    Comparison,
    Model,
    Record,
    compare,
    fit,
    parse_date,
    sorted_tokens,
    sound_key,
)

logger = logging.getLogger(__name__)

# Sources of pairs this module stores (and may withdraw); others (an ingest run's
# embedding review band, a curator's dismissal) are left as they are.
FINDER_SOURCES = ("scan", "check")
MAX_BLOCK = 40  # a larger block is a common word, date or code, not a duplicate signal
# One word's sound is a weaker key than the whole name's: its blocks are kept smaller
# (at 100k planted entities, 40 would propose 440k pairs for 390 true ones).
MAX_WORD_BLOCK = 12
RARE_WORD = 20  # a word at most this many entities of a type have tells names apart
NEIGHBOURS = 5  # embedding neighbours asked per entity
EDIT_DISTANCE_MIN = 88.0  # rapidfuzz ratio, 0–100, for the scan's name-order window
WINDOW = 6  # that window
FIT_SAMPLE = 3_000  # entities whose blocked pairs an incremental re-estimate reads
RANDOM_PAIRS = 20_000  # random pairs u is counted on
AUTO_FIT_UP_TO = 50_000  # above this many entities only the full scan re-estimates
MIN_FIT_ENTITIES = 100
# Which blocking key found a pair, by its prefix (listed as the pair's methods).
KEY_METHODS = {
    "w": "fingerprint",
    "g": "ngram",
    "s": "phonetic",
    "t": "word_sound",
    "i": "identifier",
    "d": "date",
    "c": "code",
}


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
    refitted: bool = False


Pair = tuple[int, int]


def _pair(a: int, b: int) -> Pair:
    return (a, b) if a < b else (b, a)


# --- blocking keys ------------------------------------------------------------------------


def _ngram_fingerprint(key: str, n: int = 2) -> str:
    compact = key.replace(" ", "")
    return "".join(sorted({compact[i : i + n] for i in range(max(len(compact) - n + 1, 1))}))


def blocking_keys(record: Record) -> set[str]:
    """The keys an entity is filed under (each at most 200 characters)."""
    keys: set[str] = set()
    for name in (record.key, *record.alias_keys):
        if not name:
            continue
        keys.add("w:" + sorted_tokens(name))
        if len(name.replace(" ", "")) >= 5:  # short names share bigrams by chance
            keys.add("g:" + _ngram_fingerprint(name))
        keys.add("s:" + sound_key(name))
        for token in set(name.split()):
            if len(token) >= 3:
                keys.add("t:" + jellyfish.metaphone(token))
    for kind, values in record.identifiers.items():
        keys.update(f"i:{kind}:{value}" for value in values)
    for attr, value in record.attributes.items():
        text = str(value).strip() if isinstance(value, (str, int)) else ""
        if parse_date(text) is not None:
            keys.add("d:" + parse_date(text).isoformat())  # type: ignore[union-attr]
        elif 3 <= len(text) <= 20 and text.isdigit():
            keys.add(f"c:{attr[:60]}:{text}")
    return {k[:200] for k in keys}


def _block_limit(key: str) -> int:
    return MAX_WORD_BLOCK if key.startswith("t:") else MAX_BLOCK


def _records(context: Context, ids: Iterable[int] | None) -> dict[int, Record]:
    """Live entities as the comparators read them (all of the context when ``ids`` is
    None): two statements."""
    rows = Entity.objects.filter(context=context, merged_into__isnull=True)
    idents = EntityIdentifier.objects.filter(context=context, entity__merged_into__isnull=True)
    if ids is not None:
        wanted = sorted(set(ids))
        rows, idents = rows.filter(pk__in=wanted), idents.filter(entity_id__in=wanted)
    by_entity: dict[int, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for entity_id, kind, value in idents.values_list("entity_id", "kind", "value"):
        by_entity[entity_id][kind].add(value)
    return {
        pk: Record(
            id=pk,
            type=type_,
            scope=scope,
            key=key,
            alias_keys=tuple(alias_keys),
            attributes=attributes if isinstance(attributes, dict) else {},
            identifiers={k: frozenset(v) for k, v in by_entity.get(pk, {}).items()},
        )
        for pk, type_, scope, key, alias_keys, attributes in rows.values_list(
            "pk", "type", "scope", "normalized_key", "alias_keys", "attributes"
        )
    }


def _write_keys(context: Context, records: dict[int, Record], *, replace: bool) -> None:
    if replace and records:
        DuplicateKey.objects.filter(entity_id__in=list(records)).delete()
    DuplicateKey.objects.bulk_create(
        [
            DuplicateKey(context=context, entity_id=r.id, type=r.type, key=k)
            for r in records.values()
            for k in blocking_keys(r)
        ],
        batch_size=5_000,
    )


Rare = dict[str, set[str]]  # type → the sounds of words at most RARE_WORD entities have


def _blocked_neighbours(
    context: Context, records: dict[int, Record]
) -> tuple[dict[Pair, set[str]], Rare]:
    """Pairs of each given entity with the entities sharing an uncommon key, and which of
    their words are rare (one statement: each key's holders, at most MAX_BLOCK + 1)."""
    wanted = sorted({(r.type, k) for r in records.values() for k in blocking_keys(r)})
    if not wanted:
        return {}, {}
    sql = """
        SELECT q.type, q.key, h.entity_id
        FROM unnest(%s::text[], %s::text[]) AS q(type, key)
        CROSS JOIN LATERAL (
            SELECT k.entity_id FROM memory_duplicatekey k
            WHERE k.context_id = %s AND k.type = q.type AND k.key = q.key
            LIMIT %s
        ) h
    """
    holders: dict[tuple[str, str], list[int]] = defaultdict(list)
    with connection.cursor() as cursor:
        cursor.execute(
            sql, [[t for t, _ in wanted], [k for _, k in wanted], context.pk, MAX_BLOCK + 1]
        )
        for type_, key, entity_id in cursor.fetchall():
            holders[(type_, key)].append(entity_id)
    found: dict[Pair, set[str]] = defaultdict(set)
    rare: Rare = defaultdict(set)
    for (type_, key), members in holders.items():
        if key.startswith("t:") and len(members) <= RARE_WORD:
            rare[type_].add(key[2:])
    for record in records.values():
        for key in blocking_keys(record):
            members = holders.get((record.type, key), [])
            if len(members) > _block_limit(key):
                continue
            for other in members:
                if other != record.id:
                    found[_pair(record.id, other)].add(KEY_METHODS[key[0]])
    return found, rare


def _embedding_neighbours(context: Context, ids: list[int] | None) -> dict[Pair, float]:
    """Each entity's nearest same-type neighbours through the HNSW index (all live
    entities of the context when ``ids`` is None)."""
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
          AND (%s::bigint[] IS NULL OR e.id = ANY(%s::bigint[]))
    """
    params: list[Any] = [NEIGHBOURS, context.pk, ids, ids]
    found: dict[Pair, float] = {}
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL hnsw.ef_search = 64")
        cursor.execute(sql, params)
        for a, b, similarity in cursor.fetchall():
            found[_pair(a, b)] = float(similarity)
    return found


def _cosines(pairs: list[Pair]) -> dict[Pair, float]:
    """Cosine similarity of each pair whose two entities both have a vector."""
    out: dict[Pair, float] = {}
    with connection.cursor() as cursor:
        for start in range(0, len(pairs), 20_000):
            chunk = pairs[start : start + 20_000]
            cursor.execute(
                """
                SELECT p.a, p.b, 1 - (x.embedding <=> y.embedding)
                FROM unnest(%s::bigint[], %s::bigint[]) AS p(a, b)
                JOIN memory_entity x ON x.id = p.a
                JOIN memory_entity y ON y.id = p.b
                WHERE x.embedding IS NOT NULL AND y.embedding IS NOT NULL
                """,
                [[a for a, _ in chunk], [b for _, b in chunk]],
            )
            out.update({(a, b): float(c) for a, b, c in cursor.fetchall()})
    return out


def _edit_distance_pairs(records: Iterable[Record]) -> set[Pair]:
    """Neighbours in name order (and reversed-name order, for slips at either end)."""
    found: set[Pair] = set()
    by_type: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        by_type[record.type].append(record)
    for typed in by_type.values():
        for order in (lambda r: r.key, lambda r: r.key[::-1]):
            ranked = sorted(typed, key=order)
            for i, record in enumerate(ranked):
                for other in ranked[i + 1 : i + 1 + WINDOW]:
                    if fuzz.ratio(record.key, other.key) >= EDIT_DISTANCE_MIN:
                        found.add(_pair(record.id, other.id))
    return found


# --- the model ----------------------------------------------------------------------------


def duplicate_model(context: Context) -> Model:
    row = DuplicateModel.objects.filter(context=context).only("params").first()
    return Model.from_json(row.params if row else None)


def _save_model(context: Context, model: Model, entities: int) -> None:
    DuplicateModel.objects.update_or_create(
        context=context, defaults={"params": model.to_json(), "entities": entities}
    )


def _random_pairs(records: list[Record], count: int, seed: int) -> Iterator[list[Comparison]]:
    """Comparisons of random same-type pairs: almost all two things, so u."""
    rng = random.Random(seed)
    by_type: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        by_type[record.type].append(record)
    typed = [group for group in by_type.values() if len(group) > 1]
    if not typed:
        return
    weights = [len(g) for g in typed]
    for group in rng.choices(typed, weights=weights, k=count):
        a, b = rng.sample(group, 2)
        yield compare(a, b)


def _fit_on(
    records: dict[int, Record],
    blocked: dict[Pair, set[str]],
    cosines: dict[Pair, float],
    rare: Rare,
) -> Model:
    comparisons = [
        compare(
            records[a],
            records[b],
            cosine=cosines.get((a, b)),
            rare=rare.get(records[a].type, set()),
        )
        for a, b in blocked
        if a in records and b in records
    ]
    return fit(comparisons, _random_pairs(list(records.values()), RANDOM_PAIRS, seed=17))


def _live_count(context: Context) -> int:
    return Entity.objects.filter(context=context, merged_into__isnull=True).count()


def _refit_if_grown(context: Context, model: Model) -> Model | None:
    """Re-estimate the weights from a sample of the context when it has doubled since the
    last estimate (and is small enough not to wait for a scan): the sampled entities'
    blocked pairs are a fair sample of all blocked pairs. Then re-score the open pairs.
    Returns the new model, or None when nothing was due."""
    row = DuplicateModel.objects.filter(context=context).only("entities").first()
    fitted_on = row.entities if row else 0
    if fitted_on >= AUTO_FIT_UP_TO:
        return None
    count = _live_count(context)
    if count < max(MIN_FIT_ENTITIES, 2 * fitted_on):
        return None
    ids = list(
        Entity.objects.filter(context=context, merged_into__isnull=True)
        .order_by("?")
        .values_list("pk", flat=True)[:FIT_SAMPLE]
    )
    sample = _records(context, ids)
    blocked, rare = _blocked_neighbours(context, sample)
    records = sample | _records(context, {x for pair in blocked for x in pair} - set(sample))
    new = _fit_on(records, blocked, _cosines(sorted(blocked)), rare)
    new = new if new.fitted_pairs else model
    _save_model(context, new, count)
    _rescore_open(context, new)
    return new


def _rescore_open(context: Context, model: Model) -> None:
    """Score the finder's open pairs again with ``model``; withdraw those now below."""
    open_pairs = {
        (a, b): pk
        for pk, a, b in DuplicateCandidate.objects.filter(
            context=context, status=DuplicateStatus.OPEN, source__in=FINDER_SOURCES
        ).values_list("pk", "entity_a_id", "entity_b_id")
    }
    if not open_pairs:
        return
    records = _records(context, {x for pair in open_pairs for x in pair})
    cosines = _cosines(sorted(open_pairs))
    _, rare = _blocked_neighbours(context, records)
    updates, gone = [], []
    for (a, b), pk in open_pairs.items():
        if a not in records or b not in records:
            continue
        probability, explain = model.score(
            compare(
                records[a],
                records[b],
                cosine=cosines.get((a, b)),
                rare=rare.get(records[a].type, set()),
            )
        )
        if probability < MATCH_PROBABILITY:
            gone.append(pk)
        else:
            updates.append(DuplicateCandidate(pk=pk, score=round(probability, 4), explain=explain))
    DuplicateCandidate.objects.bulk_update(updates, ["score", "explain"], batch_size=2_000)
    DuplicateCandidate.objects.filter(pk__in=gone).delete()


# --- storing ------------------------------------------------------------------------------


@dataclass
class _Scored:
    probability: float
    methods: list[str]
    explain: list[dict[str, Any]]


def _score_pairs(
    model: Model,
    records: dict[int, Record],
    proposed: dict[Pair, set[str]],
    cosines: dict[Pair, float],
    rare: Rare,
) -> dict[Pair, _Scored]:
    out = {}
    for (a, b), methods in proposed.items():
        if a not in records or b not in records or records[a].type != records[b].type:
            continue
        x, y = records[a], records[b]
        comparisons = compare(x, y, cosine=cosines.get((a, b)), rare=rare.get(x.type, set()))
        probability, explain = model.score(comparisons)
        found = set(methods)
        if x.key == y.key:
            found.add("key")
        elif y.key in x.alias_keys or x.key in y.alias_keys:
            found.add("alias")
        if any(f["field"].startswith("attr:") and f["agrees"] for f in explain):
            found.add("attributes")
        out[(a, b)] = _Scored(probability, sorted(found), explain)
    return out


def _store(
    context: Context,
    scored: dict[Pair, _Scored],
    existing: dict[Pair, tuple[int, str, str]],
    *,
    source: str,
    withdraw: Iterable[Pair],
) -> tuple[int, int, int]:
    """Create or update the pairs at or above the match probability; delete the
    finder's open pairs in ``withdraw`` that are not. Returns (stored, new, withdrawn)."""
    new_rows, updates = [], []
    stored = 0
    for (a, b), s in scored.items():
        if s.probability < MATCH_PROBABILITY:
            continue
        stored += 1
        score = round(s.probability, 4)
        known = existing.get((a, b))
        if known is None:
            new_rows.append(
                DuplicateCandidate(
                    context=context,
                    entity_a_id=a,
                    entity_b_id=b,
                    score=score,
                    methods=s.methods,
                    explain=s.explain,
                    source=source,
                )
            )
        elif known[1] == DuplicateStatus.OPEN and known[2] in FINDER_SOURCES:
            updates.append(
                DuplicateCandidate(pk=known[0], score=score, methods=s.methods, explain=s.explain)
            )
    DuplicateCandidate.objects.bulk_create(new_rows, batch_size=2_000, ignore_conflicts=True)
    DuplicateCandidate.objects.bulk_update(
        updates, ["score", "methods", "explain"], batch_size=2_000
    )
    stale = [
        existing[pair][0]
        for pair in withdraw
        if pair in existing
        and existing[pair][1] == DuplicateStatus.OPEN
        and existing[pair][2] in FINDER_SOURCES
        and (pair not in scored or scored[pair].probability < MATCH_PROBABILITY)
    ]
    for start in range(0, len(stale), 10_000):
        DuplicateCandidate.objects.filter(pk__in=stale[start : start + 10_000]).delete()
    return stored, len(new_rows), len(stale)


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
    """Check these entities (just created or changed) against the live entities of their
    type: refresh their blocking keys, score every blocked pair and every open pair they
    are in, store those at or above the match probability and withdraw the finder's open
    pairs that fell below. Runs in the caller's transaction; inside
    ``duplicates_check_batch`` it only collects. Returns None when it only collected."""
    ids = sorted(set(entity_ids))
    collecting = _collecting.get()
    if collecting is not None:
        collecting.update(ids)
        return None
    report = CheckReport()
    if not ids:
        return report
    context_ids = set(Entity.objects.filter(pk__in=ids).values_list("context_id", flat=True))
    for context in Context.objects.filter(pk__in=context_ids):
        _check_in(context, ids, report)
    return report


def _check_in(context: Context, ids: list[int], report: CheckReport) -> None:
    with transaction.atomic():
        mine = _records(context, ids)
        gone = set(ids) - set(mine)  # merged away or of another context
        DuplicateKey.objects.filter(context=context, entity_id__in=sorted(gone)).delete()
        if not mine:
            return
        _write_keys(context, mine, replace=True)
        proposed, rare = _blocked_neighbours(context, mine)
        for pair in _embedding_neighbours(context, list(mine)):
            proposed.setdefault(pair, set()).add("embedding")
        involved = Q(entity_a_id__in=list(mine)) | Q(entity_b_id__in=list(mine))
        existing = {
            (a, b): (pk, status, source)
            for pk, a, b, status, source in DuplicateCandidate.objects.filter(
                involved, context=context
            ).values_list("pk", "entity_a_id", "entity_b_id", "status", "source")
        }
        for pair, (_, status, source) in existing.items():
            if status == DuplicateStatus.OPEN and source in FINDER_SOURCES:
                proposed.setdefault(pair, set())  # re-scored, kept or withdrawn
        records = mine | _records(context, {x for p in proposed for x in p} - set(mine))
        current = duplicate_model(context)
        model = _refit_if_grown(context, current) or current
        scored = _score_pairs(model, records, proposed, _cosines(sorted(proposed)), rare)
        stored, new, withdrawn = _store(
            context, scored, existing, source="check", withdraw=list(existing)
        )
    report.entities += len(mine)
    report.compared += len(scored)
    report.stored += stored
    report.new += new
    report.withdrawn += withdrawn


# --- the full scan --------------------------------------------------------------------------


@transaction.atomic
def duplicates_scan(*, context: Context, use_embeddings: bool = True) -> ScanReport:
    """Rebuild the context's blocking keys, re-estimate its weights by EM on all blocked
    pairs, score them and store the candidates (dismissed pairs stay; the finder's open
    pairs below the match probability now go). ``report.phases`` says where the time went."""
    clock = _PhaseClock()
    records = _records(context, None)
    clock.lap("read")
    DuplicateKey.objects.filter(context=context).delete()
    _write_keys(context, records, replace=False)
    clock.lap("keys_written")
    blocks: dict[tuple[str, str], list[int]] = defaultdict(list)
    for record in records.values():
        for key in blocking_keys(record):
            blocks[(record.type, key)].append(record.id)
    proposed: dict[Pair, set[str]] = defaultdict(set)
    rare: Rare = defaultdict(set)
    for (type_, key), members in blocks.items():
        if key.startswith("t:") and len(members) <= RARE_WORD:
            rare[type_].add(key[2:])
        if 1 < len(members) <= _block_limit(key):
            for pair in itertools.combinations(sorted(members), 2):
                proposed[pair].add(KEY_METHODS[key[0]])
    clock.lap("blocks")
    for pair in _edit_distance_pairs(records.values()):
        proposed[pair].add("edit_distance")
    clock.lap("edit_distance")
    if use_embeddings:
        for pair in _embedding_neighbours(context, None):
            proposed[pair].add("embedding")
        clock.lap("embeddings")
    cosines = _cosines(sorted(proposed)) if use_embeddings else {}
    clock.lap("cosines")
    model = _fit_on(records, proposed, cosines, rare)
    if not model.fitted_pairs:  # too few pairs to learn from: keep what there was
        model = duplicate_model(context)
    _save_model(context, model, len(records))
    clock.lap("fit")
    scored = _score_pairs(model, records, proposed, cosines, rare)
    clock.lap("score")
    existing = {
        (a, b): (pk, status, source)
        for pk, a, b, status, source in DuplicateCandidate.objects.filter(
            context=context
        ).values_list("pk", "entity_a_id", "entity_b_id", "status", "source")
    }
    stored, new, withdrawn = _store(context, scored, existing, source="scan", withdraw=existing)
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
