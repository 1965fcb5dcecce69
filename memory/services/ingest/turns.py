"""Turns: the text of every accepted memory, kept searchable with its speaker, time,
conversation (``thread``) and the caller's id for it (``ref``).

``run_create`` calls ``turn_fields_clean`` before it accepts a memory and ``turn_create``
in the same transaction as the run, so a turn exists exactly when its run does; a retry
moves the turn to the new run (``turn_move_to_run``). The BM25 postings are written with
the row; its vector comes from the embedding worker (``memory.services.vectors``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from memory.domain.screening import text_screen
from memory.infra.queueing import embeddings_drain_enqueue
from memory.kernel.errors import ValidationFailed
from memory.models import Context, Run, Turn
from memory.models.turn import MAX_REF_CHARS, MAX_SPEAKER_CHARS, MAX_THREAD_CHARS
from memory.search.analyzer import analyze
from memory.search.bm25 import IndexItem, postings_replace
from memory.search.models import Target
from memory.search.texts import turn_index_text


@dataclass(frozen=True)
class TurnFields:
    """Who said a turn, when, in which conversation, and the caller's id for it."""

    speaker: str = ""
    said_at: dt.datetime | None = None
    thread: str = ""
    ref: str = ""

    def as_payload(self) -> dict[str, str | None]:
        return {
            "speaker": self.speaker,
            "said_at": self.said_at.isoformat() if self.said_at else None,
            "thread": self.thread,
            "ref": self.ref,
        }


def _label(value: object, *, name: str, limit: int) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValidationFailed(f"{name} must be a string", code=f"invalid_{name}")
    cleaned = " ".join(value.split())
    if len(cleaned) > limit or "\x00" in cleaned:
        raise ValidationFailed(
            f"{name}: at most {limit} characters, no NUL",
            code=f"invalid_{name}",
            details={"max_chars": limit, "chars": len(cleaned)},
        )
    return cleaned


def said_at_parse(value: object) -> dt.datetime | None:
    """An ISO 8601 date-time (a plain date means its midnight; no zone means UTC)."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        parsed: dt.datetime | None = value
    elif isinstance(value, str):
        try:
            parsed = parse_datetime(value.strip())
            if parsed is None:
                day = dt.date.fromisoformat(value.strip())
                parsed = dt.datetime(day.year, day.month, day.day)
        except ValueError:
            parsed = None
    else:
        parsed = None
    if parsed is None:
        raise ValidationFailed(
            "said_at must be an ISO 8601 date-time, e.g. 2023-05-08T13:56:00Z",
            code="invalid_said_at",
        )
    if timezone.is_naive(parsed):
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed


def turn_fields_clean(
    *, speaker: object = "", said_at: object = None, thread: object = "", ref: object = ""
) -> TurnFields:
    """Validate a memory's turn fields (ValidationFailed with an ``invalid_*`` code)."""
    return TurnFields(
        speaker=_label(speaker, name="speaker", limit=MAX_SPEAKER_CHARS),
        said_at=said_at_parse(said_at),
        thread=_label(thread, name="thread", limit=MAX_THREAD_CHARS),
        ref=_label(ref, name="ref", limit=MAX_REF_CHARS),
    )


def turn_create(*, context: Context, run: Run, scope: str, text: str, fields: TurnFields) -> Turn:
    """Keep ``text`` as a searchable turn of ``run`` (call inside the run's transaction).

    The turn keeps the text with its secrets redacted, and what made it suspicious
    (memory/domain/screening.py); the raw text stays on the run, for admins only."""
    screened = text_screen(text)
    text = screened.text
    turn = Turn.objects.create(
        context=context,
        scope=scope,
        run=run,
        text=text,
        flags=[flag.as_dict() for flag in screened.flags],
        speaker=fields.speaker,
        said_at=fields.said_at,
        thread=fields.thread,
        ref=fields.ref,
    )
    postings_replace(
        context_id=context.pk,
        target=Target.TURN,
        items=[
            IndexItem(
                ref_id=turn.pk,
                scope=scope,
                terms=analyze(
                    turn_index_text(text=text, speaker=fields.speaker, said_at=fields.said_at)
                ),
            )
        ],
    )
    embeddings_drain_enqueue()
    return turn


def turn_of_run(run: Run | None) -> Turn | None:
    if run is None:
        return None
    return Turn.objects.filter(run=run).first()


def turn_move_to_run(*, previous: Run, run: Run) -> None:
    """A retry executes the same turn: its facts will point back to it."""
    Turn.objects.filter(run=previous).update(run=run)
