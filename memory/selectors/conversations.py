"""Conversations: the turns agents wrote with a thread, and under each turn the facts it
produced. Turns and facts are limited to the caller's read grants."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

from django.contrib.postgres.aggregates import ArrayAgg
from django.db.models import Count, Max, Min, Q, QuerySet
from django.db.models.functions import Coalesce, TruncDate

from memory.domain.access import ContextAccess
from memory.kernel.errors import NotFound
from memory.models import Fact, FactStatus, Turn
from memory.selectors.facts import facts_visible

THREADS_PAGE = 50
TURNS_PAGE = 200  # a conversation's turns per page (all 500 of one cost ~0.2 s of CPU)
SPEAKERS_SHOWN = 6
# What a fact row under a turn shows: no entity vectors, no registry details.
FACT_ROW_FIELDS = (
    "status", "raw_predicate", "value_text", "turn_id", "subject__name", "object__name",
    "predicate__name", "scope", "trust",
)  # fmt: skip


def turns_visible(*, access: ContextAccess) -> QuerySet[Turn]:
    return Turn.objects.filter(access.grants.read_q(), context=access.context).defer("embedding")


@dataclass(frozen=True)
class ThreadSummary:
    thread: str
    speakers: list[str]
    first_said_at: datetime | None
    last_said_at: datetime | None
    turns: int
    facts: int
    scopes: list[str]


def thread_list(
    *, access: ContextAccess, offset: int = 0, limit: int = THREADS_PAGE
) -> list[ThreadSummary]:
    """Threads, the most recently active first (one grouped query over the index
    ``turn_thread``, then one count of their facts)."""
    rows = list(
        turns_visible(access=access)
        .exclude(thread="")
        .values("thread")
        .annotate(
            speakers=ArrayAgg("speaker", distinct=True, filter=~Q(speaker="")),
            scopes=ArrayAgg("scope", distinct=True),
            first=Min(Coalesce("said_at", "created_at")),
            last=Max(Coalesce("said_at", "created_at")),
            turns=Count("pk"),
        )
        .order_by("-last", "thread")[offset : offset + limit]
    )
    counts = _fact_counts(access, [r["thread"] for r in rows])
    return [
        ThreadSummary(
            thread=r["thread"],
            speakers=sorted(r["speakers"] or [])[:SPEAKERS_SHOWN],
            first_said_at=r["first"],
            last_said_at=r["last"],
            turns=r["turns"],
            facts=counts.get(r["thread"], 0),
            scopes=sorted(r["scopes"]),
        )
        for r in rows
    ]


def _fact_counts(access: ContextAccess, threads: list[str]) -> dict[str, int]:
    if not threads:
        return {}
    rows = (
        facts_visible(access=access)
        .filter(turn__thread__in=threads, turn__context=access.context)
        .values("turn__thread")
        .annotate(n=Count("pk"))
    )
    return {r["turn__thread"]: r["n"] for r in rows}


@dataclass(frozen=True)
class UnthreadedGroup:
    run_id: int | None
    day: date | None
    turns: int
    facts: int


def unthreaded_groups(*, access: ContextAccess, limit: int = THREADS_PAGE) -> list[UnthreadedGroup]:
    """Turns written without a thread, grouped by the run that executed them and the day
    they were said, newest first."""
    rows = list(
        turns_visible(access=access)
        .filter(thread="")
        .annotate(day=TruncDate(Coalesce("said_at", "created_at")))
        .values("run_id", "day")
        .annotate(turns=Count("pk", distinct=True), fact_count=Count("facts", distinct=True))
        .order_by("-day", "-run_id")[:limit]
    )
    return [
        UnthreadedGroup(run_id=r["run_id"], day=r["day"], turns=r["turns"], facts=r["fact_count"])
        for r in rows
    ]


@dataclass
class TurnWithFacts:
    turn: Turn
    facts: list[Fact]

    @property
    def retractable(self) -> bool:
        """Whether retracting the turn would still take a fact back."""
        return any(fact.status != FactStatus.RETRACTED for fact in self.facts)


@dataclass
class Conversation:
    thread: str
    turns: list[TurnWithFacts]
    next_after: int | None  # the id of the last turn shown, when more follow


def conversation_get(
    *, access: ContextAccess, thread: str, after: int | None = None, limit: int = TURNS_PAGE
) -> Conversation:
    """A thread's turns in the order they were said (then written), from the turn after
    ``after``, each with the visible facts it produced. Two queries."""
    turns = turns_visible(access=access).filter(thread=thread)
    ordered = turns.annotate(at=Coalesce("said_at", "created_at")).order_by("at", "id")
    if after is not None:
        anchor = ordered.filter(pk=after).values("at").first()
        if anchor is None:
            raise NotFound(f"turn {after} is not in conversation {thread!r}", code="not_found")
        ordered = ordered.filter(Q(at__gt=anchor["at"]) | Q(at=anchor["at"], pk__gt=after))
    rows = list(ordered[: limit + 1])
    if not rows and after is None:
        raise NotFound(f"conversation {thread[:100]!r} not found", code="thread_not_found")
    more = len(rows) > limit
    rows = rows[:limit]
    by_turn: dict[int, list[Fact]] = {t.pk: [] for t in rows}
    facts = (
        facts_visible(access=access)
        .filter(turn_id__in=list(by_turn))
        .select_related("subject", "object", "predicate")
        .only(*FACT_ROW_FIELDS)
        .order_by("pk")
    )
    for fact in facts:
        assert fact.turn_id is not None
        by_turn[fact.turn_id].append(fact)
    return Conversation(
        thread=thread,
        turns=[TurnWithFacts(turn=t, facts=by_turn[t.pk]) for t in rows],
        next_after=rows[-1].pk if more else None,
    )


def turn_get(*, access: ContextAccess, turn_id: int) -> Turn:
    turn = turns_visible(access=access).filter(pk=turn_id).first()
    if turn is None:
        raise NotFound(f"turn {turn_id} not found", code="turn_not_found")
    return turn


def turn_fact_ids(*, access: ContextAccess, turn: Turn) -> list[int]:
    """The visible facts a turn produced that are not retracted yet."""
    facts = facts_visible(access=access).filter(turn=turn).exclude(status=FactStatus.RETRACTED)
    return list(facts.order_by("pk").values_list("pk", flat=True))


def turn_facts(*, access: ContextAccess, turn: Turn) -> list[Fact]:
    """The visible facts a turn produced that a retraction of the turn would take back."""
    facts = facts_visible(access=access).filter(turn=turn).exclude(status=FactStatus.RETRACTED)
    return list(facts.select_related("subject", "object", "predicate").order_by("pk"))
