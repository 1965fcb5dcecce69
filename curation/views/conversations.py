"""Conversations: the threads agents wrote turns in, and one thread's turns in order with
the facts each produced; retract everything one turn produced (preview, then Undo)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from curation.views.access import (
    HtmxHttpRequest,
    _get_context_for_user,
    dashboard_view,
    error_response,
    next_url,
    render_screen,
)
from memory.models import Role
from memory.models.turn import MAX_THREAD_CHARS
from memory.selectors.conversations import (
    THREADS_PAGE,
    conversation_get,
    thread_list,
    turn_fact_ids,
    turn_facts,
    turn_get,
    unthreaded_groups,
)
from memory.services.facts.retraction import facts_retract

MAX_PAGE = 10_000


def _page_number(raw: str) -> int:
    return min(int(raw), MAX_PAGE) if raw.isdigit() and int(raw) > 0 else 1


@require_safe
@dashboard_view
def conversations(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    """Threads, the most recently active first; turns without a thread by run and day."""
    access = _get_context_for_user(request, ctx)
    number = _page_number(request.GET.get("page", ""))
    rows = thread_list(access=access, offset=(number - 1) * THREADS_PAGE, limit=THREADS_PAGE + 1)
    here = reverse("conversations", args=[access.context.slug])
    context = {
        "threads": rows[:THREADS_PAGE],
        "unthreaded": unthreaded_groups(access=access) if number == 1 else [],
        "previous_url": f"{here}?page={number - 1}" if number > 1 else None,
        "next_url": f"{here}?page={number + 1}" if len(rows) > THREADS_PAGE else None,
    }
    return render_screen(
        request, "curation/conversations.html", access, context, section="conversations"
    )


@require_safe
@dashboard_view
def conversation(request: HtmxHttpRequest, ctx: str, thread: str) -> HttpResponse:
    """Two queries: the page of turns (with their runs), and their visible facts."""
    access = _get_context_for_user(request, ctx)
    if len(thread) > MAX_THREAD_CHARS:
        return error_response(request, 400, f"A thread has at most {MAX_THREAD_CHARS} characters.")
    after = request.GET.get("after", "")
    after_id = int(after) if after.isdigit() and len(after) < 19 else None
    found = conversation_get(access=access, thread=thread, after=after_id)
    here = reverse("conversation", args=[access.context.slug, thread])
    slug = access.context.slug
    context = {
        "conversation": found,
        # Row links are "<prefix><id>/": one reverse() per kind, not one per row.
        "entities_url": reverse("entities", args=[slug]),
        "facts_url": reverse("facts", args=[slug]),
        "runs_url": reverse("runs", args=[slug]),
        "turns_url": reverse("overview", args=[slug]) + "turns/",
        "here": request.get_full_path(),
        "next_url": f"{here}?after={found.next_after}" if found.next_after else None,
        "first_url": here if after else None,
        "can_change": access.has_role(Role.CURATOR),
    }
    return render_screen(
        request, "curation/conversation.html", access, context, section="conversations"
    )


@require_POST
@dashboard_view
def turn_retract_view(request: HtmxHttpRequest, ctx: str, turn_id: int) -> HttpResponse:
    """``preview=1``: the facts the turn produced that would be retracted (htmx: the
    preview partial); otherwise retract them all in one action, with an Undo."""
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    turn = turn_get(access=access, turn_id=turn_id)
    back = next_url(
        request,
        reverse("conversation", args=[access.context.slug, turn.thread])
        if turn.thread
        else reverse("conversations", args=[access.context.slug]),
    )
    if request.POST.get("preview"):
        context = {
            "turn": turn,
            "facts": turn_facts(access=access, turn=turn),
            "back": back,
        }
        return render_screen(
            request,
            "curation/turn_retract.html",
            access,
            context,
            section="conversations",
            partial="preview",
        )
    ids = turn_fact_ids(access=access, turn=turn)
    if not ids:
        return error_response(request, 409, f"Turn {turn.pk} has no facts left to retract.")
    done = facts_retract(access=access, fact_ids=ids, what=f"turn {turn.pk}")
    messages.success(
        request,
        done.summary[:1].upper() + done.summary[1:] + ".",
        extra_tags=f"undo:{done.audit_event_id}" if done.audit_event_id else "",
    )
    return redirect(back)
