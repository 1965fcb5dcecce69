"""The audit log: every curator and admin change, each undoable where it can be."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.functional import cached_property
from django.views.decorators.http import require_POST, require_safe

from curation.forms.audit import AuditFilterForm
from curation.views.access import (
    HtmxHttpRequest,
    _get_context_for_user,
    dashboard_view,
    next_url,
    render_screen,
)
from memory.domain.access import ContextAccess
from memory.kernel.errors import Conflict
from memory.models import AuditEvent, Role
from memory.selectors.audit import ACTION_LABELS, audit_rows
from memory.selectors.curation import audit_list
from memory.services.undo import audit_undo

PAGE_SIZE = 50


class CappedPaginator(Paginator):  # type: ignore[type-arg]
    """Counts at most CAP events: a long log says "more than 5,000" (pages go that far;
    the action filter finds older ones) instead of checking every event's visibility."""

    cap = 5_000

    def __init__(self, events: QuerySet[AuditEvent], per_page: int) -> None:
        super().__init__(events, per_page)
        self.events = events

    @cached_property
    def count(self) -> int:
        return self.events[: self.cap + 1].count()

    @property
    def capped(self) -> bool:
        return self.count > self.cap


def _page(request: HtmxHttpRequest, access: ContextAccess, *, status: int = 200) -> HttpResponse:
    """Queries: count (up to CappedPaginator.cap); one page of events."""
    form = AuditFilterForm(request.GET)
    action = form.cleaned_data.get("action") if form.is_valid() else None
    events = audit_list(access=access, action=action or None)
    page = CappedPaginator(events, PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "rows": audit_rows(access=access, events=page.object_list),
        "action": action or "",
        "actions": list(ACTION_LABELS.items()),
        "action_query": urlencode({"action": action}) if action else "",
    }
    return render_screen(
        request,
        "curation/audit.html",
        access,
        context,
        section="audit",
        partial="rows",
        status=status,
    )


@require_safe
@dashboard_view
def audit(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    return _page(request, _get_context_for_user(request, ctx))


@require_POST
@dashboard_view
def audit_undo_view(request: HtmxHttpRequest, ctx: str, event_id: int) -> HttpResponse:
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    try:
        event = audit_undo(access=access, event_id=event_id)
    except Conflict as exc:
        messages.error(request, f"Could not undo: {exc.message}")
        return _page(request, access, status=409)
    messages.success(request, f"Undone: {event.summary}.")
    if request.htmx and not request.POST.get("next"):
        return _page(request, access)
    return redirect(next_url(request, reverse("audit", args=[access.context.slug])))
