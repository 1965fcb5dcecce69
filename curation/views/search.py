"""Search: active search as you type over everything (turns, chunks and facts, as the API
and MCP default to), or only chunks, conversation turns, facts or entities,
with a mode switch, a scope filter (and a thread filter for turns) and each result's
explanation (BM25, vector, fused, graph boost; for turns the window boost)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse
from django.urls import reverse
from django.views.decorators.http import require_safe

from curation.views.access import (
    HtmxHttpRequest,
    _get_context_for_user,
    dashboard_view,
    render_screen,
)
from curation.views.documents import CHUNKS_PER_PAGE
from memory.kernel.errors import DomainError, ValidationFailed
from memory.kernel.scopes import MAX_SCOPE_LENGTH
from memory.search.turn_fusion import WINDOW_WEIGHTS
from memory.selectors.search import (
    ALL_TARGET,
    MAX_QUERY_CHARS,
    MODES,
    TARGET_CHOICES,
    SearchResponse,
    search,
)

TEMPLATE = "curation/search.html"
RESULTS = 20
MAX_SCOPE_FILTERS = 50


def _scopes(raw: str) -> list[str] | None:
    """Scope patterns (``P`` or ``P/*``) separated by spaces or commas; none = all."""
    patterns = [p for p in raw.replace(",", " ").split() if p]
    if len(patterns) > MAX_SCOPE_FILTERS:
        raise ValidationFailed(f"at most {MAX_SCOPE_FILTERS} scope patterns", code="invalid_scope")
    if any(len(p) > MAX_SCOPE_LENGTH + 2 for p in patterns):
        raise ValidationFailed("a scope pattern is too long", code="invalid_scope")
    return patterns or None


def _document_links(slug: str, response: SearchResponse | None) -> dict[int, str]:
    """Each chunk result's place in its document's page (the page of chunks it is on)."""
    if response is None:
        return {}
    links = {}
    for result in response.results:
        document_id = result.meta.get("document_id")
        if result.type == "chunk" and document_id is not None:
            number = int(result.meta.get("ordinal", 0)) // CHUNKS_PER_PAGE + 1
            base = reverse("document", args=[slug, document_id])
            links[result.id] = f"{base}?page={number}#chunk-{result.id}"
    return links


@require_safe
@dashboard_view
def search_view(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    """The form, and results once there is a query. Bad input shows its message with a
    400 (an unknown mode, target or scope pattern, a query over the limit)."""
    access = _get_context_for_user(request, ctx)
    q = request.GET.get("q", "").strip()
    mode = request.GET.get("mode", "hybrid")
    target = request.GET.get("target", ALL_TARGET)
    scope = request.GET.get("scope", "").strip()
    thread = request.GET.get("thread", "").strip()
    response: SearchResponse | None = None
    error, status = "", 200
    if q or mode not in MODES or target not in TARGET_CHOICES:
        try:
            response = search(
                access=access,
                query=q or " ",  # an empty query with a bad mode reports the mode first
                mode=mode,
                k=RESULTS,
                scopes=_scopes(scope),
                target=target,
                vector_floor=settings.MEMORY_SEARCH_VECTOR_FLOOR or None,
                thread=thread if thread and target == "turns" else None,
            )
        except DomainError as exc:  # a bad query (400) or the embedder down (503)
            error, status = exc.message, exc.status
    context = {
        "links": _document_links(access.context.slug, response),
        "q": q,
        "mode": mode,
        "target": target,
        "scope": scope,
        "thread": thread,
        "modes": MODES,
        "targets": TARGET_CHOICES,
        "response": response,
        "error": error,
        "max_query": MAX_QUERY_CHARS,
        "vector_floor": settings.MEMORY_SEARCH_VECTOR_FLOOR,
        "window_weights": ", ".join(
            f"{distance} away ×{weight:g}" for distance, weight in enumerate(WINDOW_WEIGHTS, 1)
        ),
    }
    return render_screen(
        request, TEMPLATE, access, context, section="search", partial="results", status=status
    )
