"""The facts a curator browses: a filtered list paged by keyset (no OFFSET, so page 2,000
costs what page 1 does), and one fact with its provenance and history.

Every read is limited to the caller's read grants; a fact whose source (its turn, run
or document) lies in a scope the reader cannot see shows "source hidden" instead of it.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from django.db.models import Q, QuerySet
from django.utils.dateparse import parse_datetime

from memory.domain.access import ContextAccess
from memory.domain.namespaces import ITEM_REF_PREFIX
from memory.domain.predicate_names import predicate_normalize
from memory.kernel.errors import NotFound, ValidationFailed
from memory.models import AuditEvent, Conflict, Document, Entity, Fact, Item, Run, Turn
from memory.search.bm25 import bm25_rank, corpus_visible_sql
from memory.search.models import Target
from memory.selectors.entities import entity_list
from memory.selectors.entity_lookup import resolve_entity_name
from memory.selectors.facts import fact_get, facts_visible
from memory.selectors.item_pages import item_of_turn
from memory.selectors.predicates import predicate_canonicalize

# Only orders an index walks (``fact_recent``): a confidence order over a million facts
# would sort them all, and "confidence below" finds the doubtful ones instead.
Sort = Literal["newest", "oldest"]
SORTS: tuple[Sort, ...] = ("newest", "oldest")
PAGE_SIZE = 50
# A name that names no entity reads through at most this many whose names start so.
NAME_MATCHES = 200
NOTE_NAMES = 10  # of those, named in the page's note
# Free text keeps the facts among the search index's best matches for its words.
TEXT_MATCHES = 1000


@dataclass(frozen=True)
class FactFilters:
    predicate: str = ""
    subject: str = ""  # an entity id or name (resolve_entity_name), or the start of names
    object: str = ""
    kind: str = ""
    status: str = ""
    source_kind: str = ""
    run: int | None = None
    thread: str = ""
    confidence_below: float | None = None
    since: datetime | None = None
    text: str = ""


@dataclass
class FactsPage:
    facts: list[Fact]
    next_cursor: str | None
    # Notes on how the filters were read ("works_at, read through its inverse employs").
    notes: list[str] = field(default_factory=list)


def _entity_ids(access: ContextAccess, end: str, ref: str) -> tuple[list[int], list[str]]:
    """The entities a ``subject``/``object`` filter reads, and notes saying which: the one
    entity the text means (an id, or a name by ``resolve_entity_name``, the rule the API's
    ``facts?subject=`` reads it by), naming the others it matched; a text that names no
    entity reads as the start of names' words ("acm corp"), and every entity it matched
    is named."""
    ref = ref.strip()
    try:
        found = resolve_entity_name(access=access, ref=int(ref) if ref.isdigit() else ref)
    except NotFound:
        if ref.isdigit():
            return [], [f"{end} {ref}: no entity you can see has this id"]
        matched = list(entity_list(access=access, q=ref).only("pk", "name")[:NAME_MATCHES])
        return [e.pk for e in matched], [_words_note(end, ref, matched)]
    entity = found.entity
    notes = []
    if found.other_matches:
        others = ", ".join(f"{e.name} ({e.type}, {e.scope}, #{e.pk})" for e in found.other_matches)
        notes.append(
            f"{end} {ref!r} is {entity.name} ({entity.type}, {entity.scope}, #{entity.pk}); "
            f"it also matches {others}: give an id to read one of those"
        )
    return [entity.pk], notes


def _words_note(end: str, ref: str, matched: list[Entity]) -> str:
    if not matched:
        return f"{end} {ref!r}: no entity you can see is named so, nor has names starting so"
    shown = ", ".join(f"{e.name} (#{e.pk})" for e in matched[:NOTE_NAMES])
    more = f" and {len(matched) - NOTE_NAMES} more" if len(matched) > NOTE_NAMES else ""
    return f"no entity is named {ref!r}: {end} reads as the start of names, matching {shown}{more}"


def facts_filtered(
    *, access: ContextAccess, filters: FactFilters
) -> tuple[QuerySet[Fact], list[str]]:
    """The visible facts matching ``filters`` (unordered), and notes on how the filters
    were read. ``predicate`` in any form: an alias reads through to its predicate, an
    inverse alias also swaps the subject and object filters."""
    facts = facts_visible(access=access)
    notes: list[str] = []
    subject, object_ = filters.subject, filters.object
    if filters.predicate:
        resolved = predicate_canonicalize(context=access.context, name=filters.predicate)
        facts = facts.filter(predicate__name=resolved.canonical)
        if resolved.inverse:
            subject, object_ = object_, subject
            notes.append(
                f"{predicate_normalize(filters.predicate)} is the inverse of "
                f"{resolved.canonical}: subject and object read swapped"
            )
        elif resolved.canonical != predicate_normalize(filters.predicate):
            notes.append(f"{filters.predicate} reads as {resolved.canonical}")
    for end, ref, column in (("subject", subject, "subject_id"), ("object", object_, "object_id")):
        if ref:
            ids, said = _entity_ids(access, end, ref)
            facts = facts.filter(**{f"{column}__in": ids})
            notes += said
    if filters.kind:
        facts = facts.filter(kind=filters.kind)
    if filters.status:
        facts = facts.filter(status=filters.status)
    if filters.source_kind:
        facts = facts.filter(source_kind=filters.source_kind)
    if filters.run is not None:
        facts = facts.filter(run_id=filters.run)
    if filters.thread:
        turns = Turn.objects.filter(context=access.context, thread=filters.thread)
        facts = facts.filter(turn_id__in=turns.values("pk"))
    if filters.confidence_below is not None:
        facts = facts.filter(confidence__lt=filters.confidence_below)
    if filters.since is not None:
        facts = facts.filter(recorded_at__gte=filters.since)
    if filters.text.strip():
        hits = bm25_rank(
            context_id=access.context.pk,
            target=Target.FACT,
            query=filters.text,
            visible_sql=corpus_visible_sql(access.grants.read_q()),
            limit=TEXT_MATCHES,
        )
        facts = facts.filter(pk__in=[hit.ref_id for hit in hits])
        if len(hits) == TEXT_MATCHES:
            notes.append(f"the words keep the {TEXT_MATCHES:,} best-matching facts")
    return facts, notes


def _cursor_encode(values: list[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(values).encode()).decode().rstrip("=")


def _cursor_decode(cursor: str) -> tuple[datetime, int]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        raw, pk = json.loads(base64.urlsafe_b64decode(padded.encode()))
        key = parse_datetime(raw)
        if key is None:
            raise ValueError(cursor)
        return key, int(pk)
    except (ValueError, TypeError, binascii.Error, json.JSONDecodeError):
        raise ValidationFailed(
            "this page link is not valid any more: start from the first page",
            code="invalid_cursor",
        ) from None


def facts_page(
    *,
    access: ContextAccess,
    filters: FactFilters,
    sort: Sort = "newest",
    cursor: str = "",
    limit: int = PAGE_SIZE,
) -> FactsPage:
    """One page of facts after ``cursor`` (the last row of the page before): the keyset
    ``(recorded_at, id)`` walks the index ``fact_recent`` instead of counting off every
    row before the page."""
    facts, notes = facts_filtered(access=access, filters=filters)
    if cursor:
        key, pk = _cursor_decode(cursor)
        if sort == "newest":
            facts = facts.filter(Q(recorded_at__lt=key) | Q(recorded_at=key, pk__lt=pk))
        else:
            facts = facts.filter(Q(recorded_at__gt=key) | Q(recorded_at=key, pk__gt=pk))
    order = ("-recorded_at", "-id") if sort == "newest" else ("recorded_at", "id")
    # The list shows names, not the entities' vectors: their columns stay unread.
    rows = list(
        facts.select_related("subject", "object", "predicate")
        .defer("subject__embedding", "object__embedding")
        .order_by(*order)[: limit + 1]
    )
    next_cursor = None
    if len(rows) > limit:
        rows = rows[:limit]
        last = rows[-1]
        next_cursor = _cursor_encode([last.recorded_at.isoformat(), last.pk])
    return FactsPage(facts=rows, next_cursor=next_cursor, notes=notes)


# --- one fact --------------------------------------------------------------------------


@dataclass
class Provenance:
    """Where a fact came from, as far as the reader may see it."""

    kind: str  # the fact's source_kind
    ref: str
    hidden: bool = False  # its turn, run or document lies in a scope the reader cannot see
    turn: Turn | None = None
    run: Run | None = None
    document: Document | None = None
    seeded_by: str = ""  # the user whose token or seeding wrote it
    # The item whose put extracted it (its turn names the item), while the item holds
    # the value it was extracted from; ``item_gone`` when it was overwritten or deleted.
    item: Item | None = None
    item_gone: bool = False


@dataclass
class FactDetail:
    fact: Fact
    provenance: Provenance
    supersedes: Fact | None
    superseded_by: list[Fact]
    conflicts: list[Conflict]
    events: list[AuditEvent]


def fact_detail(*, access: ContextAccess, fact_id: int) -> FactDetail:
    """A fact with its provenance and history: what it superseded, what superseded it,
    its conflicts and the audit events about it. Linked facts outside the reader's grants
    are left out."""
    fact = fact_get(access=access, fact_id=fact_id)
    visible = facts_visible(access=access).select_related("subject", "object", "predicate")
    supersedes = visible.filter(pk=fact.supersedes_id).first() if fact.supersedes_id else None
    conflicts = list(
        Conflict.objects.filter(context=access.context)
        .filter(Q(current_fact=fact) | Q(contested_fact=fact))
        .order_by("-created_at")[:20]
    )
    return FactDetail(
        fact=fact,
        provenance=_provenance(access, fact),
        supersedes=supersedes,
        superseded_by=list(visible.filter(supersedes=fact).order_by("recorded_at")[:20]),
        conflicts=conflicts,
        events=fact_audit_events(access=access, fact=fact),
    )


def _provenance(access: ContextAccess, fact: Fact) -> Provenance:
    found = Provenance(kind=fact.source_kind, ref=fact.source_ref)
    grants = access.grants
    if fact.created_by is not None:
        found.seeded_by = fact.created_by.get_username()
    if fact.turn_id is not None:
        turn = Turn.objects.defer("embedding").filter(pk=fact.turn_id).first()
        if turn is not None and not grants.can_read(turn.scope):
            found.hidden = True
        else:
            found.turn = turn
            if turn is not None and turn.ref.startswith(ITEM_REF_PREFIX):
                found.item = item_of_turn(access=access, turn_id=turn.pk)
                found.item_gone = found.item is None
    if fact.run_id is not None:
        run = Run.objects.filter(pk=fact.run_id).defer("input_payload").first()
        if run is not None and not grants.can_read(run.scope):
            found.hidden = True
        elif run is not None:
            found.run = run
    if fact.document_id is not None:
        document = Document.objects.filter(pk=fact.document_id).first()
        if document is not None and not grants.can_read(document.scope):
            found.hidden = True
        else:
            found.document = document
    if found.hidden:
        found.turn = found.run = found.document = found.item = None
        found.item_gone = False
    return found


def fact_audit_events(*, access: ContextAccess, fact: Fact) -> list[AuditEvent]:
    """The audit events about one fact, newest first: its own, the many-fact retractions
    that list it, and the correction that wrote it."""
    return list(
        AuditEvent.objects.filter(context=access.context)
        .filter(
            Q(target_type="fact", target_id=str(fact.pk))
            | Q(action="fact_retract", after__ids__contains=[fact.pk])
            | Q(action="fact_correct", after__id=fact.pk)
        )
        .order_by("-created_at", "-id")[:50]
    )
