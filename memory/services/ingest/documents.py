"""Document writes: chunks, BM25 postings and keyphrases in one transaction.

A document is split into chunks (``memory.search.chunking``), each chunk's postings are
written with it, and its RAKE keyphrases become ``Keyword`` nodes (one per context and
text, with a document count) linked to the document and to the chunks that contain
them. Vectors for the chunks and for new keywords are computed after commit: by the
task worker, or by the writer itself (``embed_later`` then ``document_embed_now``,
``documents_embed``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, transaction

from memory.domain.access import ContextAccess
from memory.domain.screening import text_redact
from memory.infra.embeddings import embedder_unavailable
from memory.infra.queueing import embeddings_drain_enqueue
from memory.kernel.errors import ValidationFailed
from memory.kernel.scopes import scope_validate
from memory.models import Chunk, Document, Keyword, KeywordLink
from memory.search.analyzer import analyze
from memory.search.bm25 import IndexItem, postings_replace
from memory.search.chunking import chunk_text
from memory.search.keywords import keyphrase_words, keyphrases_extract
from memory.search.models import Target
from memory.search.texts import chunk_index_text
from memory.services.audit import audit_record
from memory.services.vectors import vectors_compute

MAX_TITLE_CHARS = 500
MAX_SOURCE_CHARS = 300


class DocumentTooLarge(ValidationFailed):
    status = 413
    code = "text_too_large"


@dataclass(frozen=True)
class _LinkedKeyword:
    keyword_id: int
    text: str
    needs_embedding: bool


def _clean_text(text: str) -> str:
    limit = settings.MEMORY_MAX_TEXT_BYTES
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > limit:
        raise DocumentTooLarge(
            f"a document's text can be at most {limit} bytes (UTF-8); this one has {size}",
            details={"max_bytes": limit, "bytes": size},
        )
    if "\x00" in text:
        raise ValidationFailed("text must not contain NUL characters", code="invalid_text")
    cleaned = text.strip()
    if not cleaned:
        raise ValidationFailed("a document needs some text", code="empty_text")
    return cleaned


def _clean_title(title: str) -> str:
    cleaned = " ".join(title.split())
    if len(cleaned) > MAX_TITLE_CHARS or "\x00" in cleaned:
        raise ValidationFailed(
            f"title: at most {MAX_TITLE_CHARS} characters, no NUL", code="invalid_title"
        )
    return cleaned


@transaction.atomic
def document_create(
    *,
    access: ContextAccess,
    title: str,
    text: str,
    scope: str,
    source: str = "",
    metadata: dict[str, Any] | None = None,
    embed_later: bool = False,
) -> Document:
    """Store a document with its chunks, postings and keyphrases.

    Needs a write grant on ``scope``. Chunk and keyword vectors: by the task worker; with
    ``embed_later``, not queued — the caller computes them once this has committed
    (``document_embed_now`` for one, ``documents_embed`` for a bulk import's many).
    """
    scope = scope_validate(scope)
    access.require_write(scope)
    # Secrets are redacted before the text is kept: the document, its chunks, their
    # postings and the texts behind their embeddings never hold one.
    text = text_redact(_clean_text(text))
    title = _clean_title(title)
    if len(source) > MAX_SOURCE_CHARS:
        raise ValidationFailed(f"source: at most {MAX_SOURCE_CHARS} characters", code="invalid")
    document = Document.objects.create(
        context=access.context,
        scope=scope,
        title=title,
        text=text,
        source=source,
        metadata=metadata or {},
    )
    pieces = chunk_text(text)
    bags = [analyze(chunk_index_text(title=title, text=piece)) for piece in pieces]
    chunks = Chunk.objects.bulk_create(
        [
            Chunk(
                context=access.context,
                document=document,
                scope=scope,
                ordinal=ordinal,
                text=piece,
                token_count=len(terms),
            )
            for ordinal, (piece, terms) in enumerate(zip(pieces, bags, strict=True))
        ]
    )
    postings_replace(
        context_id=access.context.pk,
        target=Target.CHUNK,
        items=[
            IndexItem(ref_id=chunk.pk, scope=scope, terms=terms)
            for chunk, terms in zip(chunks, bags, strict=True)
        ],
    )
    _keywords_link(document=document, chunks=chunks)
    if not embed_later:
        embeddings_drain_enqueue()  # the chunks and the new keywords have no vector yet
    return document


def document_embed_now(*, document: Document) -> str:
    """Compute the vectors of a document written with ``embed_later`` (after its commit:
    an embedder call never holds a transaction open): its chunks' and those of its
    keywords still without one.

    Returns "" when they are in. When the embedder fails (down, hanging past its
    timeout), the missing ones are queued for the task worker instead — the document
    stays stored and searchable by BM25 — and the reason is returned.
    """
    try:
        documents_embed(document_ids=[document.pk])
    except DatabaseError:
        raise
    except Exception as exc:
        problem = embedder_unavailable(
            exc, hint="the document is stored and its vectors are queued for the task worker"
        )
        embeddings_drain_enqueue()  # the rows without a vector stay the backlog
        return problem.message
    return ""


def documents_embed(
    *, document_ids: list[int], on_progress: Callable[[int, int], None] | None = None
) -> int:
    """Embed the chunks of these documents and every keyword still without a vector.

    Returns the number of chunk vectors written; ``on_progress(done, total)`` counts chunks.
    """
    chunk_ids = list(
        Chunk.objects.filter(document_id__in=document_ids)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    done = 0

    def progress(batch: int) -> None:
        nonlocal done
        done += batch
        if on_progress is not None:
            on_progress(done, len(chunk_ids))

    written = vectors_compute("chunks", chunk_ids, on_progress=progress)
    keyword_ids = Keyword.objects.filter(
        links__document_id__in=document_ids, embedding__isnull=True
    ).values_list("pk", flat=True)
    vectors_compute("keywords", sorted(set(keyword_ids)))
    return written


def _keywords_link(*, document: Document, chunks: list[Chunk]) -> list[_LinkedKeyword]:
    """Upsert the document's keyphrases (counting it once each) and link them."""
    phrases = keyphrases_extract(f"{document.title}\n\n{document.text}")
    if not phrases:
        return []
    scores = {p.text: p.score for p in phrases}
    with connection.cursor() as cursor:
        # Sorted, so two writers sharing keyphrases lock the rows in the same order.
        cursor.execute(
            """
            INSERT INTO memory_keyword AS k (context_id, text, document_count)
            SELECT %s, unnest(%s::text[]), 1
            ON CONFLICT (context_id, text)
            DO UPDATE SET document_count = k.document_count + 1
            RETURNING k.id, k.text, k.embedding IS NULL
            """,
            [document.context_id, sorted(scores)],
        )
        linked = [_LinkedKeyword(*row) for row in cursor.fetchall()]
    chunk_words = [f" {keyphrase_words(chunk.text)} " for chunk in chunks]
    links: list[KeywordLink] = []
    for keyword in linked:
        holders: list[Chunk | None] = [
            c for c, words in zip(chunks, chunk_words, strict=True) if f" {keyword.text} " in words
        ]
        for chunk in holders or [None]:  # a phrase from the title only: no chunk
            links.append(
                KeywordLink(
                    keyword_id=keyword.keyword_id,
                    document=document,
                    chunk=chunk,
                    scope=document.scope,
                    score=scores[keyword.text],
                )
            )
    KeywordLink.objects.bulk_create(links)
    return linked


@transaction.atomic
def document_delete(*, access: ContextAccess, document: Document) -> None:
    """Delete a document with its chunks, postings and keyword links.

    Keywords lose this document from their count; a keyword no document uses any more
    is deleted. Facts sourced from the document stay (their ``document`` becomes null).
    """
    access.require_write(document.scope)
    document = Document.objects.select_for_update().get(pk=document.pk)
    keyword_ids = sorted(
        set(KeywordLink.objects.filter(document=document).values_list("keyword_id", flat=True))
    )
    # Enough to write the document again (its chunks and keyphrases are derived).
    summary = {
        "id": document.pk,
        "title": document.title,
        "text": document.text,
        "scope": document.scope,
        "source": document.source,
        "metadata": document.metadata,
    }
    # The cascade removes chunks, their SearchDoc rows (the trigger drops the postings
    # and updates the statistics) and the keyword links.
    document.delete()
    if keyword_ids:
        with connection.cursor() as cursor:
            cursor.execute(
                """
                UPDATE memory_keyword k SET document_count = k.document_count - 1
                FROM (SELECT id FROM memory_keyword WHERE id = ANY(%s) ORDER BY id FOR UPDATE) l
                WHERE k.id = l.id
                """,
                [keyword_ids],
            )
        Keyword.objects.filter(pk__in=keyword_ids, document_count__lte=0).delete()
    audit_record(
        context=access.context,
        actor=access.user,
        action="document_delete",
        target_type="document",
        target_id=summary["id"],
        summary=f"deleted document {summary['title'] or summary['id']}",
        before=summary,
    )
