"""Document and keyword reads, limited to the caller's read grants.

A keyword is visible when at least one of its links is (links carry their document's
scope); its ``document_count`` in these reads is the number of documents *the caller
can see* that have it — the stored count (all documents of the context) would reveal
documents outside the caller's grants.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias, TypedDict

from django.db.models import Count, Max, Prefetch, Q, QuerySet
from pgvector.django import CosineDistance

from memory.domain.access import ContextAccess
from memory.infra.embeddings import embed_for_request
from memory.kernel.errors import NotFound, ValidationFailed
from memory.models import Chunk, Document, Keyword, KeywordLink
from memory.search.keywords import keyphrase_words

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


class _VisibleCount(TypedDict):
    visible_count: int


# A Keyword annotated with visible_count.
CountedKeyword: TypeAlias = "WithAnnotations[Keyword, _VisibleCount]"

KEYWORD_SORTS = ("-document_count", "document_count", "text", "-text")
MAX_KEYWORD_SEARCH_K = 100


def documents_visible(*, access: ContextAccess) -> QuerySet[Document]:
    return Document.objects.filter(access.grants.read_q(), context=access.context)


def document_list(
    *, access: ContextAccess, scope: str | None = None, title: str | None = None
) -> QuerySet[Document]:
    """Visible documents, newest first; ``scope`` exact, ``title`` a case-blind substring."""
    documents = documents_visible(access=access).defer("text", "metadata")
    if scope:
        documents = documents.filter(scope=scope)
    if title:
        documents = documents.filter(title__icontains=title)
    return documents.annotate(chunk_count=Count("chunks")).order_by("-created_at", "-id")


def document_get(*, access: ContextAccess, document_id: int) -> Document:
    chunks = Chunk.objects.defer("embedding").order_by("ordinal")
    document = (
        documents_visible(access=access)
        .prefetch_related(Prefetch("chunks", queryset=chunks))
        .filter(pk=document_id)
        .first()
    )
    if document is None:
        raise NotFound(f"document {document_id} not found", code="document_not_found")
    return document


def _visible_count(access: ContextAccess) -> Count:
    return Count("links__document", filter=access.grants.read_q("links__scope"), distinct=True)


def keywords_visible(*, access: ContextAccess) -> QuerySet[CountedKeyword]:
    """Keywords with at least one visible link, annotated with ``visible_count``."""
    return (
        Keyword.objects.filter(context=access.context)
        .defer("embedding")
        .annotate(visible_count=_visible_count(access))
        .filter(visible_count__gt=0)
    )


def keyword_list(
    *, access: ContextAccess, min_document_count: int = 1, sort: str = "-document_count"
) -> QuerySet[CountedKeyword]:
    if sort not in KEYWORD_SORTS:
        raise ValidationFailed(
            f"sort must be one of {', '.join(KEYWORD_SORTS)}", code="invalid_sort"
        )
    keywords = keywords_visible(access=access)
    if min_document_count > 1:
        # a dict: the annotation is not visible to the type checker past keywords_visible
        keywords = keywords.filter(**{"visible_count__gte": min_document_count})
    field = sort.replace("document_count", "visible_count")
    return keywords.order_by(field, "text" if "count" in sort else "pk")


def keyword_get(*, access: ContextAccess, text: str) -> CountedKeyword:
    """A keyword by its text (in any case and spacing)."""
    keyword = keywords_visible(access=access).filter(text=keyphrase_words(text)).first()
    if keyword is None:
        raise NotFound(f"keyword {text[:100]!r} not found", code="keyword_not_found")
    return keyword


def keyword_documents(*, access: ContextAccess, keyword: Keyword) -> QuerySet[Document]:
    """The visible documents that have ``keyword``, best RAKE score first."""
    return (
        documents_visible(access=access)
        .filter(keyword_links__keyword=keyword)
        .defer("text", "metadata")
        .annotate(keyword_score=Max("keyword_links__score"))
        .order_by("-keyword_score", "-id")
    )


def document_chunks(*, access: ContextAccess, document: Document) -> QuerySet[Chunk]:
    """A visible document's chunks in reading order (without their vectors)."""
    access.require_read(document.scope)
    return Chunk.objects.filter(document=document).defer("embedding").order_by("ordinal")


@dataclass(frozen=True)
class DocumentKeyword:
    text: str
    score: float
    document_count: int


def document_keywords(*, access: ContextAccess, document: Document) -> list[DocumentKeyword]:
    """The document's keywords, best first, with their visible document counts."""
    scores = dict(
        KeywordLink.objects.filter(document=document)
        .values("keyword_id")
        .annotate(best=Max("score"))
        .values_list("keyword_id", "best")
    )
    keywords = keywords_visible(access=access).filter(pk__in=scores)
    found = [
        DocumentKeyword(text=k.text, score=scores[k.pk], document_count=k.visible_count)
        for k in keywords
    ]
    return sorted(found, key=lambda k: (-k.score, k.text))


@dataclass(frozen=True)
class KeywordMatch:
    keyword: CountedKeyword
    similarity: float


def keyword_search(*, access: ContextAccess, q: str, k: int = 10) -> list[KeywordMatch]:
    """Visible keywords nearest to ``q`` by embedding (cosine), nearest first.

    Raises ServiceUnavailable (``embedder_unavailable``) when ``q`` cannot be embedded."""
    if not q.strip() or len(q) > 500:
        raise ValidationFailed("q must have 1 to 500 characters", code="invalid_query")
    if not 1 <= k <= MAX_KEYWORD_SEARCH_K:
        raise ValidationFailed(f"k must be between 1 and {MAX_KEYWORD_SEARCH_K}", code="invalid_k")
    embedding = embed_for_request(
        [q.strip()], hint="keywords can still be listed and read by their text"
    )[0]
    visible = Q(pk__in=KeywordLink.objects.filter(access.grants.read_q()).values("keyword_id"))
    nearest = (
        Keyword.objects.filter(visible, context=access.context, embedding__isnull=False)
        .defer("embedding")
        .annotate(distance=CosineDistance("embedding", embedding))
        .order_by("distance", "pk")[:k]
    )
    ids = {kw.pk: 1.0 - kw.distance for kw in nearest}
    counted = {kw.pk: kw for kw in keywords_visible(access=access).filter(pk__in=ids)}
    return [KeywordMatch(keyword=counted[pk], similarity=sim) for pk, sim in ids.items()]
