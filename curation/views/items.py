"""Items: the namespace tree with its counts and one namespace's items a page at a time;
an item's page (its JSON as stored, its lifetime, the facts it extracted); a curator's
delete with an Undo; an admin's choice whether item puts extract by default."""

from __future__ import annotations

from urllib.parse import parse_qs, urlencode, urlsplit

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from curation.views.access import (
    HtmxHttpRequest,
    _get_context_for_user,
    audit_mark,
    dashboard_view,
    error_response,
    render_screen,
    undo_tag,
)
from memory.domain.namespaces import (
    Namespace,
    NamespaceError,
    namespace_scope,
    namespace_validate,
)
from memory.models import Role
from memory.selectors.item_pages import (
    item_page,
    namespace_items,
    namespace_nearest_held,
    namespace_tree,
    value_preview,
)
from memory.services.contexts import context_update
from memory.services.items.delete import item_delete

PAGE_SIZE = 50


def namespace_query(namespace: Namespace) -> str:
    """The query string that selects ``namespace`` on the items page."""
    return urlencode([("namespace", label) for label in namespace])


def _crumbs(namespace: Namespace) -> list[tuple[str, str]]:
    """Each label of ``namespace`` with the query that selects the namespace up to it."""
    return [(label, namespace_query(namespace[: i + 1])) for i, label in enumerate(namespace)]


@require_safe
@dashboard_view
def items(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    """Queries: the tree's namespaces with their counts; with a namespace chosen, the
    count and one page of its items."""
    access = _get_context_for_user(request, ctx)
    selected = namespace_validate(request.GET.getlist("namespace"), allow_empty=True)
    tree = namespace_tree(access=access, selected=selected)
    page, previews = None, []
    if selected:
        page = Paginator(namespace_items(access=access, namespace=selected), PAGE_SIZE).get_page(
            request.GET.get("page")
        )
        previews = [(item, value_preview(item)) for item in page]
    here = reverse("items", args=[access.context.slug])
    # Each node shown, its link, and whether it is on the way to the chosen one.
    rows = [
        (node, namespace_query(node.namespace), selected[: node.depth] == node.namespace)
        for node in tree.shown
    ]
    context = {
        "tree": tree,
        "selected": selected,
        "selected_scope": namespace_scope(selected) if selected else "",
        "crumbs": _crumbs(selected),
        "page": page,
        "previews": previews,
        # The list, and row links as "<base><id>/": one reverse() per kind, not one per row.
        "base": here,
        "query": namespace_query(selected),
        "rows": rows,
        # The chosen namespace's children, offered where it holds no items itself.
        "below": [
            (node, query) for node, query, _ in rows if selected and node.namespace[:-1] == selected
        ],
    }
    return render_screen(
        request, "curation/items.html", access, context, section="items", partial="browser"
    )


@require_safe
@dashboard_view
def item_detail(request: HtmxHttpRequest, ctx: str, item_id: int) -> HttpResponse:
    """Queries: the item; its turn and run; the facts it extracted."""
    access = _get_context_for_user(request, ctx)
    found = item_page(access=access, item_id=item_id)
    item = found.item
    context = {
        "found": found,
        "item": item,
        "namespace_link": namespace_query(tuple(item.namespace)),
        "crumbs": _crumbs(tuple(item.namespace)),
        "can_delete": access.has_role(Role.CURATOR) and access.grants.can_write(item.scope),
    }
    return render_screen(request, "curation/item.html", access, context, section="items")


@require_POST
@dashboard_view
def item_delete_view(request: HtmxHttpRequest, ctx: str, item_id: int) -> HttpResponse:
    """A curator's delete (curator role and a write grant on the item's namespace): what
    the item extracted is retracted with it, and the message offers the Undo."""
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    deleted = item_delete(access=access, item_id=item_id)
    messages.success(
        request,
        deleted.summary[:1].upper() + deleted.summary[1:] + ".",
        extra_tags=f"undo:{deleted.audit_event_id}",
    )
    # Back to its namespace, or the nearest one above that still holds items.
    left = namespace_nearest_held(access=access, namespace=deleted.namespace)
    back = reverse("items", args=[access.context.slug])
    return redirect(f"{back}?{namespace_query(left)}" if left else back)


@require_POST
@dashboard_view
def items_extract_setting(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    """An admin sets whether item puts extract facts by default (``item_extract``)."""
    access = _get_context_for_user(request, ctx, role=Role.ADMIN)
    choice = request.POST.get("item_extract", "")
    if choice not in ("on", "off"):
        return error_response(request, 400, "Choose whether item puts extract facts: on or off.")
    wanted = choice == "on"
    if access.context.item_extract == wanted:
        words = "already extract facts" if wanted else "already keep the item only"
        messages.info(request, f"Item puts {words} unless they say otherwise.")
    else:
        since = audit_mark(access)
        context_update(access=access, item_extract=wanted)
        words = "extract facts" if wanted else "no longer extract facts"
        messages.success(
            request,
            f"Item puts {words} unless they say otherwise.",
            extra_tags=undo_tag(access, since),
        )
    here = reverse("items", args=[access.context.slug])
    shown = _namespace_shown(request, here)
    return redirect(f"{here}?{namespace_query(shown)}" if shown else here)


def _namespace_shown(request: HtmxHttpRequest, here: str) -> Namespace:
    """The namespace the page showed when its form was sent: the page's address, which
    htmx pushes as the tree is browsed, so that saving the setting keeps it open. Nothing
    when the form came from elsewhere or the address holds no valid namespace."""
    referer = urlsplit(request.headers.get("Referer", ""))
    if referer.path != here:
        return ()
    try:
        return namespace_validate(parse_qs(referer.query).get("namespace", []), allow_empty=True)
    except NamespaceError:
        return ()
