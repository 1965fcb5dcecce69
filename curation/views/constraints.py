"""Constraints: the violations of the registry's constraints by predicate and type, and
the fixes in place — retract a fact, correct it, or make its entity an exception — each
a POST that comes back to the same row with an Undo; by keyboard as the review queue
(j/k move, r retract, c correct, x exception, u undo)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from curation.forms.facts import FactCorrectForm
from curation.views.access import (
    HtmxHttpRequest,
    _get_context_for_user,
    audit_mark,
    dashboard_view,
    error_response,
    render_screen,
    undo_tag,
)
from memory.domain.access import ContextAccess
from memory.domain.constraints import CONSTRAINT_STATUSES, CONSTRAINT_TYPES
from memory.kernel.errors import NotFound, ValidationFailed
from memory.models import Fact, Role
from memory.selectors.constraints import Violation, constraint_violations
from memory.selectors.entities import entity_get
from memory.selectors.entity_lookup import resolve_entity_name
from memory.selectors.facts import fact_get
from memory.selectors.predicates import predicate_get
from memory.services.facts.corrections import fact_correct
from memory.services.facts.retraction import facts_retract
from memory.services.registry.constraint_exceptions import constraint_exception_add
from memory.services.registry.predicates import predicate_update

TEMPLATE = "curation/constraints.html"
PAGE_ROWS = 50
FILTERS = ("predicate", "type", "status")


@require_safe
@dashboard_view
def constraints(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    """Queries: the constrained predicates; the report (one statement: counts and the
    page); the page's facts with their entities."""
    access = _get_context_for_user(request, ctx)
    filters = _filters(request.GET)
    predicate = (
        predicate_get(context=access.context, name=filters["predicate"])
        if filters.get("predicate")
        else None
    )
    report = constraint_violations(
        access=access,
        predicate=predicate,
        constraint=filters.get("type") or None,
        status=filters.get("status") or None,
        after=request.GET.get("after") or None,
        limit=PAGE_ROWS,
    )
    facts = _facts(access, report.results)
    here = reverse("constraints", args=[access.context.slug])
    query = urlencode({k: v for k, v in filters.items() if v})
    focus = request.GET.get("focus", "0")
    context: dict[str, Any] = {
        "rows": [
            {"violation": v, "facts": [facts[i] for i in v.fact_ids if i in facts]}
            for v in report.results
        ],
        "counts": report.counts,
        "total": report.total,
        "filters": filters,
        "types": CONSTRAINT_TYPES,
        "statuses": CONSTRAINT_STATUSES,
        "next_url": f"{here}?{query}&after={report.next_cursor}" if report.next_cursor else None,
        "first_url": f"{here}?{query}" if request.GET.get("after") else None,
        "here": request.get_full_path(),
        "focus": int(focus) if focus.isdigit() and len(focus) < 5 else 0,
        "can_fix": access.has_role(Role.CURATOR),
    }
    return render_screen(request, TEMPLATE, access, context, section="constraints")


def _filters(data: Any) -> dict[str, str]:
    values = {name: str(data.get(name, ""))[:100] for name in FILTERS}
    if values["type"] and values["type"] not in CONSTRAINT_TYPES:
        raise ValidationFailed(f"no constraint type {values['type']!r}")
    if values["status"] and values["status"] not in CONSTRAINT_STATUSES:
        raise ValidationFailed("status is mandatory or suggestion")
    return values


def _facts(access: ContextAccess, rows: list[Violation]) -> dict[int, Fact]:
    ids = {i for v in rows for i in v.fact_ids}
    found = Fact.objects.filter(access.grants.read_q(), context=access.context, pk__in=ids)
    return {f.pk: f for f in found.select_related("subject", "object", "predicate")}


def _back(request: HtmxHttpRequest, access: ContextAccess) -> HttpResponse:
    """The page the fix was made from (its filters and the focused row)."""
    default = reverse("constraints", args=[access.context.slug])
    target = request.POST.get("next", "")
    if not target.startswith(default):
        target = default
    focus = request.POST.get("focus", "")
    if focus.isdigit() and len(focus) < 5:
        target = _with_focus(target, focus)
    return redirect(target)


def _with_focus(url: str, focus: str) -> str:
    base, _, query = url.partition("?")
    kept = [p for p in query.split("&") if p and not p.startswith("focus=")]
    return f"{base}?{'&'.join([*kept, f'focus={focus}'])}"


def _fact_id(request: HtmxHttpRequest) -> int | None:
    raw = request.POST.get("fact", "")
    return int(raw) if raw.isdigit() and len(raw) < 19 else None


@require_POST
@dashboard_view
def constraint_retract(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    fact_id = _fact_id(request)
    if fact_id is None:
        return error_response(request, 400, "Choose the fact to retract.")
    done = facts_retract(
        access=access, fact_ids=[fact_id], reason="breaks a constraint (constraints page)"
    )
    tags = f"undo:{done.audit_event_id}" if done.audit_event_id else ""
    messages.success(request, done.summary[:1].upper() + done.summary[1:] + ".", extra_tags=tags)
    return _back(request, access)


@require_POST
@dashboard_view
def constraint_correct(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    fact_id = _fact_id(request)
    form = FactCorrectForm(request.POST)
    if fact_id is None or not form.is_valid():
        return error_response(request, 400, "Give the fact and its correct value or entity.")
    fact = fact_get(access=access, fact_id=fact_id)
    data = form.cleaned_data
    named = data["object"].strip()
    target = (
        resolve_entity_name(access=access, ref=named, prefer_scope=fact.scope).entity
        if named
        else None
    )
    correction = fact_correct(
        access=access,
        fact=fact,
        value=(data["value"] or None) if target is None else None,
        object=target,
        reason=data["reason"] or "breaks a constraint (constraints page)",
    )
    new = correction.new
    shown = new.object.name if new.object is not None else new.value_text
    messages.success(
        request,
        f"Corrected {fact.predicate.name} of {fact.subject.name} to {shown}.",
        extra_tags=f"undo:{correction.audit_event_id}",
    )
    return _back(request, access)


@require_POST
@dashboard_view
def constraint_except(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    raw_entity = request.POST.get("entity", "")
    constraint = request.POST.get("constraint", "")
    if not raw_entity.isdigit() or len(raw_entity) > 18 or constraint not in CONSTRAINT_TYPES:
        return error_response(request, 400, "Choose the entity and the constraint.")
    predicate = predicate_get(context=access.context, name=request.POST.get("predicate", "")[:100])
    try:
        entity = entity_get(access=access, entity_id=int(raw_entity))
    except NotFound:
        return error_response(request, 404, "No such entity.")
    since = audit_mark(access)
    constraint_exception_add(
        access=access, predicate=predicate, constraint=constraint, entity=entity
    )
    messages.success(
        request,
        f"{entity.name} is an exception to the {constraint} constraint of {predicate.name}.",
        extra_tags=undo_tag(access, since),
    )
    return _back(request, access)


@require_POST
@dashboard_view
def predicate_constraints_edit(request: HtmxHttpRequest, ctx: str, name: str) -> HttpResponse:
    """The registry page's constraints, as JSON (admins): refused with the reason shown
    on the page, nothing saved."""
    access = _get_context_for_user(request, ctx, role=Role.ADMIN)
    predicate = predicate_get(context=access.context, name=name)
    back = reverse("predicate", args=[access.context.slug, predicate.name])
    try:
        rules = json.loads(request.POST.get("constraints", "")[:200_000] or "[]")
    except ValueError:
        messages.error(request, "The constraints are not valid JSON.")
        return redirect(back)
    since = audit_mark(access)
    try:
        predicate_update(access=access, predicate=predicate, constraints=rules)
    except ValidationFailed as exc:
        messages.error(request, exc.message)
        return redirect(back)
    messages.success(
        request, f"Saved the constraints of {predicate.name}.", extra_tags=undo_tag(access, since)
    )
    return redirect(back)
