"""Conflicts: two values of a single-valued predicate side by side; keep one, keep both,
or type the right value."""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST, require_safe

from curation.forms.conflicts import ConflictResolveForm
from curation.views.access import (
    HtmxHttpRequest,
    _get_context_for_user,
    audit_mark,
    dashboard_view,
    form_problems,
    render_screen,
    undo_tag,
)
from memory.domain.access import ContextAccess
from memory.kernel.errors import Conflict, ValidationFailed
from memory.models import Role
from memory.selectors.curation import conflict_get, conflict_rows
from memory.services.facts.conflicts import conflict_resolve

TEMPLATE = "curation/conflicts.html"
PAGE_SIZE = 25
STATUSES = ("open", "resolved", "all")
OUTCOMES = {
    "keep_current": "kept the current value",
    "keep_new": "made the new value current",
    "keep_both": "kept both (the new value as history)",
    "edit": "wrote the corrected value",
}


def _page(
    request: HtmxHttpRequest,
    access: ContextAccess,
    *,
    errors: dict[int, str] | None = None,
    status: int = 200,
) -> HttpResponse:
    """One page of conflicts (queries: count; conflicts with subject, predicate, both facts
    and their objects joined)."""
    shown = request.GET.get("status", "open")
    shown = shown if shown in STATUSES else "open"
    conflicts = conflict_rows(access=access, status=None if shown == "all" else shown)
    page = Paginator(conflicts, PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "shown": shown,
        "statuses": STATUSES,
        "errors": errors or {},
    }
    return render_screen(
        request, TEMPLATE, access, context, section="conflicts", partial="rows", status=status
    )


@require_safe
@dashboard_view
def conflicts(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    return _page(request, _get_context_for_user(request, ctx))


@require_POST
@dashboard_view
def conflict_resolve_view(request: HtmxHttpRequest, ctx: str, conflict_id: int) -> HttpResponse:
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    conflict = conflict_get(access=access, conflict_id=conflict_id)
    form = ConflictResolveForm(request.POST)
    if not form.is_valid():
        message = "; ".join(form_problems(form))
        return _page(request, access, errors={conflict.pk: message}, status=400)
    action = form.cleaned_data["action"]
    since = audit_mark(access)
    try:
        conflict_resolve(
            access=access,
            conflict=conflict,
            action=action,
            value=form.cleaned_data["value"] if action == "edit" else None,
        )
    except ValidationFailed as exc:
        return _page(request, access, errors={conflict.pk: exc.message}, status=400)
    except Conflict as exc:
        return _page(request, access, errors={conflict.pk: exc.message}, status=409)
    messages.success(
        request,
        f"{conflict.predicate.name} of {conflict.subject.name}: {OUTCOMES[action]}.",
        extra_tags=undo_tag(access, since),
    )
    if request.htmx:
        return _page(request, access)
    return redirect("conflicts", access.context.slug)
