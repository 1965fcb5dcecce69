"""Documents: the list (filter by title and scope) with a form to add one, a document's
page with its chunks and keywords, and a curator's delete."""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib import messages
from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST, require_safe

from curation.forms.documents import DocumentAddForm, DocumentFilterForm
from curation.views.access import (
    HtmxHttpRequest,
    _get_context_for_user,
    dashboard_view,
    render_screen,
)
from memory.domain.access import ContextAccess
from memory.kernel.errors import ValidationFailed
from memory.kernel.wording import counted
from memory.models import Document, Role
from memory.selectors.documents import (
    document_chunks,
    document_get,
    document_keywords,
    document_list,
)
from memory.services.ingest.documents import document_create, document_delete

PAGE_SIZE = 50
CHUNKS_PER_PAGE = 30
KEYWORDS_SHOWN = 40


def _can_add(access: ContextAccess) -> bool:
    """Adding needs a write grant on the document's scope: offer the form to a member
    with any write grant (the service checks the scope chosen)."""
    return any(grant.access == "write" for grant in access.grants.items)


def _list_page(
    request: HtmxHttpRequest,
    access: ContextAccess,
    *,
    add_form: DocumentAddForm | None = None,
    status: int = 200,
) -> HttpResponse:
    form = DocumentFilterForm(request.GET)
    valid = form.is_valid()
    found: Sequence[Document] | QuerySet[Document] = (
        document_list(access=access, **form.filters()) if valid else []
    )
    page: Page[Document] = Paginator(found, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render_screen(
        request,
        "curation/documents.html",
        access,
        {
            "form": form,
            "page": page,
            "query": query.urlencode(),
            "can_add": _can_add(access),
            "add_form": add_form or DocumentAddForm(),
            "add_open": add_form is not None,
        },
        section="documents",
        partial="results",
        status=status if valid else 400,
    )


@require_safe
@dashboard_view
def documents(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    """Queries: count; one page of documents with their chunk counts."""
    return _list_page(request, _get_context_for_user(request, ctx))


@require_POST
@dashboard_view
def document_add(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    """Store a pasted or uploaded document through the documents service (a write grant
    on its scope); its chunk and keyword vectors follow from the task worker."""
    access = _get_context_for_user(request, ctx)
    form = DocumentAddForm(request.POST, request.FILES)
    if form.is_valid():
        data = form.cleaned_data
        try:
            document = document_create(
                access=access,
                title=data["title"],
                text=data["content"],
                scope=data["scope"],
                source=data["source"],
            )
        except ValidationFailed as exc:
            form.add_error(None, exc.message)
        else:
            chunks = counted(document.chunks.count(), "chunk")
            messages.success(
                request,
                f"Added {document.title}: {chunks}, "
                "searchable by its words now and by meaning once its vectors are computed.",
            )
            return redirect("document", access.context.slug, document.pk)
    return _list_page(request, access, add_form=form, status=400)


@require_safe
@dashboard_view
def document_detail(request: HtmxHttpRequest, ctx: str, document_id: int) -> HttpResponse:
    """Queries: the document; one page of its chunks (and their count); its keywords."""
    access = _get_context_for_user(request, ctx)
    document = document_get(access=access, document_id=document_id)
    chunks = Paginator(document_chunks(access=access, document=document), CHUNKS_PER_PAGE)
    keywords = document_keywords(access=access, document=document)
    return render_screen(
        request,
        "curation/document.html",
        access,
        {
            "document": document,
            "chunks": chunks.get_page(request.GET.get("page")),
            "keywords": keywords[:KEYWORDS_SHOWN],
            "keywords_more": max(0, len(keywords) - KEYWORDS_SHOWN),
            "can_delete": access.has_role(Role.CURATOR) and access.grants.can_write(document.scope),
        },
        section="documents",
    )


@require_POST
@dashboard_view
def document_delete_view(request: HtmxHttpRequest, ctx: str, document_id: int) -> HttpResponse:
    """A curator's delete, as through the API (curator role and a write grant)."""
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    document = document_get(access=access, document_id=document_id)
    title = document.title or f"document {document.pk}"
    document_delete(access=access, document=document)
    messages.success(request, f"Deleted {title} with its chunks and keyword links.")
    return redirect("documents", access.context.slug)
