"""Facts: the list (filters, keyset pages, select many and retract them), a fact's page
(the statement, its provenance and history) and the per-fact actions — retract,
restore, correct, edit — each a POST that redirects back with an Undo."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from curation.forms.facts import FactCorrectForm, FactEditForm, FactFilterForm
from curation.views.access import (
    HtmxHttpRequest,
    _get_context_for_user,
    dashboard_view,
    error_response,
    next_url,
    render_screen,
)
from memory.domain.access import ContextAccess
from memory.kernel.errors import ValidationFailed
from memory.models import FactStatus, Role
from memory.selectors.entity_lookup import resolve_entity_name
from memory.selectors.fact_pages import FactsPage, fact_detail, facts_page
from memory.selectors.facts import fact_get
from memory.services.facts.corrections import fact_correct
from memory.services.facts.edit import fact_edit
from memory.services.facts.restore import fact_restore
from memory.services.facts.retraction import facts_retract

MAX_SELECTED = 500


def _said(summary: str) -> str:
    return summary[:1].upper() + summary[1:] + "."


@require_safe
@dashboard_view
def facts(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    """Queries: the filters' entity names and predicate (when given), one page of facts
    (keyset: ``?after=`` is the last row of the page before)."""
    access = _get_context_for_user(request, ctx)
    form = FactFilterForm(request.GET)
    valid = form.is_valid()
    page = FactsPage(facts=[], next_cursor=None)
    stale_cursor = False
    if valid:
        try:
            page = facts_page(
                access=access,
                filters=form.filters(),
                sort=form.sort_order(),
                cursor=request.GET.get("after", ""),
            )
        except ValidationFailed as exc:
            if exc.code != "invalid_cursor":
                raise
            stale_cursor, valid = True, False  # said on the page, with the link it asks for
    query = request.GET.copy()
    query.pop("after", None)
    slug = access.context.slug
    here = reverse("facts", args=[slug])
    context = {
        # Row links are "<prefix><id>/": one reverse() per kind, not one per row.
        "entities_url": reverse("entities", args=[slug]),
        "facts_url": here,
        "runs_url": reverse("runs", args=[slug]),
        "form": form,
        "page": page,
        "query": query.urlencode(),
        "first_url": f"{here}?{query.urlencode()}" if request.GET.get("after") else None,
        "here": request.get_full_path(),
        "max_selected": MAX_SELECTED,
        "stale_cursor": stale_cursor,
    }
    return render_screen(
        request,
        "curation/facts.html",
        access,
        context,
        section="facts",
        partial="results",
        status=200 if valid else 400,
    )


@require_safe
@dashboard_view
def fact_page(request: HtmxHttpRequest, ctx: str, fact_id: int) -> HttpResponse:
    access = _get_context_for_user(request, ctx)
    return _fact_page(request, access, fact_id)


def _fact_page(
    request: HtmxHttpRequest,
    access: ContextAccess,
    fact_id: int,
    *,
    correct: FactCorrectForm | None = None,
    edit: FactEditForm | None = None,
    status: int = 200,
) -> HttpResponse:
    detail = fact_detail(access=access, fact_id=fact_id)
    fact = detail.fact
    can_change = access.has_role(Role.CURATOR) and access.grants.can_write(fact.scope)
    context: dict[str, Any] = {
        "detail": detail,
        "fact": fact,
        "predicate_words": fact.predicate.name.replace("_", " "),
        "provenance": detail.provenance,
        "can_change": can_change,
        "is_current": fact.status == FactStatus.CURRENT,
        "is_retracted": fact.status == FactStatus.RETRACTED,
        "correct_form": correct or FactCorrectForm(),
        "edit_form": edit or FactEditForm.for_fact(fact),
        "here": request.get_full_path(),
        # A pending claim is reviewed where it is read, too (the review queue's actions).
        "review_choices": [("accept", "Accept"), ("reject", "Reject")],
    }
    return render_screen(
        request, "curation/fact.html", access, context, section="facts", status=status
    )


def _back(request: HtmxHttpRequest, access: ContextAccess, fact_id: int) -> HttpResponse:
    return redirect(next_url(request, reverse("fact", args=[access.context.slug, fact_id])))


@require_POST
@dashboard_view
def fact_retract_view(request: HtmxHttpRequest, ctx: str, fact_id: int) -> HttpResponse:
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    done = facts_retract(
        access=access, fact_ids=[fact_id], reason=request.POST.get("reason", "")[:300]
    )
    tags = f"undo:{done.audit_event_id}" if done.audit_event_id else ""
    messages.success(request, _said(done.summary), extra_tags=tags)
    return _back(request, access, fact_id)


@require_POST
@dashboard_view
def facts_retract_view(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    """The facts list's selection, retracted in one action (one Undo)."""
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    raw = request.POST.getlist("fact")
    ids = [int(v) for v in raw if v.isdigit() and len(v) < 19]
    if not ids or len(ids) != len(raw):
        return error_response(request, 400, "Select the facts to retract.")
    if len(ids) > MAX_SELECTED:
        return error_response(request, 400, f"Retract at most {MAX_SELECTED} facts at once.")
    done = facts_retract(access=access, fact_ids=ids, reason="selected on the facts page")
    tags = f"undo:{done.audit_event_id}" if done.audit_event_id else ""
    messages.success(request, _said(done.summary), extra_tags=tags)
    return redirect(next_url(request, reverse("facts", args=[access.context.slug])))


@require_POST
@dashboard_view
def fact_restore_view(request: HtmxHttpRequest, ctx: str, fact_id: int) -> HttpResponse:
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    restored = fact_restore(access=access, fact_id=fact_id)
    level = messages.WARNING if restored.conflict is not None else messages.SUCCESS
    messages.add_message(
        request, level, _said(restored.summary), extra_tags=f"undo:{restored.audit_event_id}"
    )
    return _back(request, access, fact_id)


@require_POST
@dashboard_view
def fact_correct_view(request: HtmxHttpRequest, ctx: str, fact_id: int) -> HttpResponse:
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    form = FactCorrectForm(request.POST)
    if form.is_valid():
        fact = fact_get(access=access, fact_id=fact_id)
        data = form.cleaned_data
        try:
            named = data["object"]
            target = (
                resolve_entity_name(access=access, ref=named, prefer_scope=fact.scope).entity
                if named
                else None
            )
            correction = fact_correct(
                access=access,
                fact=fact,
                value=data["value"] or None,
                object=target,
                reason=data["reason"],
            )
        except ValidationFailed as exc:
            form.add_error(None, exc.message)
        else:
            new = correction.new
            shown = new.object.name if new.object is not None else new.value_text
            messages.success(
                request,
                f"Corrected {fact.predicate.name} of {fact.subject.name} to {shown}; the old "
                "value stays in its history.",
                extra_tags=f"undo:{correction.audit_event_id}",
            )
            return redirect("fact", access.context.slug, new.pk)
    return _fact_page(request, access, fact_id, correct=form, status=400)


@require_POST
@dashboard_view
def fact_edit_view(request: HtmxHttpRequest, ctx: str, fact_id: int) -> HttpResponse:
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    form = FactEditForm(request.POST)
    if form.is_valid():
        fact = fact_get(access=access, fact_id=fact_id)
        try:
            edited = fact_edit(access=access, fact_id=fact_id, edit=form.edit(fact))
        except ValidationFailed as exc:
            form.add_error(None, exc.message)
        else:
            level = messages.WARNING if edited.conflict is not None else messages.SUCCESS
            tags = f"undo:{edited.audit_event_id}" if edited.audit_event_id else ""
            messages.add_message(request, level, _said(edited.summary), extra_tags=tags)
            return redirect("fact", access.context.slug, fact_id)
    return _fact_page(request, access, fact_id, edit=form, status=400)
