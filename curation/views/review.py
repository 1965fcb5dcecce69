"""The review queue: pending facts by turn; accept, reject or edit each, or a turn's at
once, by mouse or keyboard (j/k move, a accept, r reject, e edit, u undo)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from curation.views.access import (
    HtmxHttpRequest,
    _get_context_for_user,
    audit_mark,
    dashboard_view,
    next_url,
    render_screen,
    undo_tag,
)
from memory.kernel.errors import Conflict, NotFound, ValidationFailed
from memory.models import FactReview, Role
from memory.selectors.review import pending_count, review_queue
from memory.services.contexts import context_update
from memory.services.facts.review import REVIEW_ACTIONS, facts_review

TEMPLATE = "curation/review.html"
REASONS = {
    "untrusted_writer": "written through an untrusted token",
    "suspicious_turn": "from a suspicious turn",
    "review_all": "this context reviews every extracted claim",
}


@require_safe
@dashboard_view
def review(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    """Queries: the count; the pending facts with what they name and their turn; the values
    they would replace."""
    access = _get_context_for_user(request, ctx)
    focus = request.GET.get("focus", "0")
    return render_screen(
        request,
        TEMPLATE,
        access,
        {
            "groups": review_queue(access=access),
            "pending": pending_count(access=access),
            "reasons": REASONS,
            "focus": int(focus) if focus.isdigit() else 0,
            "policies": FactReview.choices,
        },
        section="review",
    )


@require_POST
@dashboard_view
def review_decide(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    """Accept or reject one fact or a turn's facts (``fact`` repeated)."""
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    action = request.POST.get("action", "")
    ids = [int(v) for v in request.POST.getlist("fact") if v.isdigit()]
    focus = request.POST.get("focus", "0")
    back = next_url(
        request,
        reverse("review", args=[access.context.slug])
        + (f"?focus={focus}" if focus.isdigit() else ""),
    )
    if action not in REVIEW_ACTIONS or not ids:
        messages.error(request, "Choose accept or reject for at least one fact.")
        return redirect(back)
    since = audit_mark(access)
    try:
        reviewed = facts_review(
            access=access, fact_ids=ids, action=action, note=request.POST.get("note", "")[:500]
        )
    except (ValidationFailed, Conflict, NotFound) as exc:
        messages.error(request, exc.message)
        return redirect(back)
    words = "accepted" if action == "accept" else "rejected"
    what = f"fact {reviewed[0].fact.pk}" if len(reviewed) == 1 else f"{len(reviewed)} facts"
    messages.success(request, f"{words.capitalize()} {what}.", extra_tags=undo_tag(access, since))
    return redirect(back)


@require_POST
@dashboard_view
def review_policy(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    """An admin sets which new facts wait for review (the context's ``fact_review``)."""
    access = _get_context_for_user(request, ctx, role=Role.ADMIN)
    policy = request.POST.get("fact_review", "")
    if policy not in FactReview.values:
        messages.error(request, f"Fact review must be one of {', '.join(FactReview.values)}.")
        return redirect("review", access.context.slug)
    since = audit_mark(access)
    context_update(access=access, fact_review=policy)
    messages.success(
        request,
        f"Fact review is now “{FactReview(policy).label}”.",
        extra_tags=undo_tag(access, since),
    )
    return redirect("review", access.context.slug)
