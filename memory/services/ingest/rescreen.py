"""Screening stored text again after the screening improved: every turn and every chunk
whose text the current rules would redact or flag differently is rewritten — its text
(secrets redacted), a turn's flags, the postings, and the vector (cleared, so the
embedding worker embeds the redacted text). A document's own text is redacted with its
chunks. Runs keep the raw input text for admins only (memory/services/ingest/turns.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction

from memory.domain.screening import text_redact, text_screen
from memory.infra.queueing import embeddings_drain_enqueue
from memory.models import Chunk, Context, Document, Turn
from memory.search.analyzer import analyze
from memory.search.bm25 import IndexItem, postings_replace
from memory.search.models import Target
from memory.search.texts import chunk_index_text, turn_index_text


@dataclass
class Rescreened:
    turns_redacted: list[int] = field(default_factory=list)
    turns_flagged: list[int] = field(default_factory=list)  # flags changed, text did not
    chunks_redacted: list[int] = field(default_factory=list)
    documents_redacted: list[int] = field(default_factory=list)
    secrets: int = 0  # secrets taken out, over every row


def stored_text_rescreen(*, context: Context | None = None, dry_run: bool = False) -> Rescreened:
    """Screen every stored turn and chunk (of ``context``, or all) again; rewrite the rows
    the current screening changes unless ``dry_run``; answer what it changed."""
    out = Rescreened()
    turns = Turn.objects.order_by("pk")
    chunks = Chunk.objects.select_related("document").order_by("pk")
    documents = Document.objects.order_by("pk")
    if context is not None:
        turns, chunks = turns.filter(context=context), chunks.filter(context=context)
        documents = documents.filter(context=context)
    for turn in turns.iterator(chunk_size=500):
        screened = text_screen(turn.text)
        flags = [f.as_dict() for f in screened.flags]
        if screened.text != turn.text:
            out.turns_redacted.append(turn.pk)
            out.secrets += len(screened.secret_values)
        elif flags != turn.flags and any(f not in turn.flags for f in flags):
            out.turns_flagged.append(turn.pk)
        else:
            continue
        if not dry_run:
            _turn_rewrite(turn, screened.text, flags)
    for chunk in chunks.iterator(chunk_size=500):
        redacted = text_redact(chunk.text)
        if redacted == chunk.text:
            continue
        out.chunks_redacted.append(chunk.pk)
        out.secrets += 1
        if not dry_run:
            _chunk_rewrite(chunk, redacted)
    for document in documents.iterator(chunk_size=100):
        redacted = text_redact(document.text)
        if redacted != document.text:
            out.documents_redacted.append(document.pk)
            if not dry_run:
                Document.objects.filter(pk=document.pk).update(text=redacted)
    if not dry_run and (out.turns_redacted or out.chunks_redacted):
        embeddings_drain_enqueue()
    return out


@transaction.atomic
def _turn_rewrite(turn: Turn, text: str, flags: list[dict[str, str | int]]) -> None:
    changed = text != turn.text
    turn.text, turn.flags = text, flags
    if not changed:
        turn.save(update_fields=["flags"])
        return
    turn.embedding, turn.embedding_model = None, ""
    turn.save(update_fields=["text", "flags", "embedding", "embedding_model"])
    terms = analyze(turn_index_text(text=text, speaker=turn.speaker, said_at=turn.said_at))
    postings_replace(
        context_id=turn.context_id,
        target=Target.TURN,
        items=[IndexItem(ref_id=turn.pk, scope=turn.scope, terms=terms)],
    )


@transaction.atomic
def _chunk_rewrite(chunk: Chunk, text: str) -> None:
    terms = analyze(chunk_index_text(title=chunk.document.title, text=text))
    chunk.text, chunk.embedding, chunk.embedding_model = text, None, ""
    chunk.token_count = len(terms)
    chunk.save(update_fields=["text", "embedding", "embedding_model", "token_count"])
    postings_replace(
        context_id=chunk.context_id,
        target=Target.CHUNK,
        items=[IndexItem(ref_id=chunk.pk, scope=chunk.scope, terms=terms)],
    )
