"""Drift: observed predicates with counts, examples and ranked suggestions; alias, promote
or reject them one at a time or in bulk. Every resolution is undoable from its message or
the audit log."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import redirect
from django.utils.html import format_html_join
from django.views.decorators.http import require_POST, require_safe

from curation.forms import DriftBulkForm, DriftResolveForm, PredicateDefinitionForm
from curation.views.access import (
    HtmxHttpRequest,
    _get_context_for_user,
    dashboard_view,
    form_problems,
    render_screen,
    wants_partial,
)
from memory.domain.access import ContextAccess
from memory.infra.embeddings import embedder_loading
from memory.kernel.errors import Conflict, NotFound, ServiceUnavailable, ValidationFailed
from memory.models import AuditEvent, FactKind, Role
from memory.selectors.drift import (
    DriftItem,
    drift_current_fact_counts,
    drift_examples_attach,
    drift_list,
    drift_suggestions_attach,
)
from memory.selectors.registry import registered_names
from memory.services.drift.alias import AliasPlan, AliasRequest, drift_alias, drift_alias_bulk
from memory.services.drift.resolve import drift_resolve

TEMPLATE = "curation/drift.html"
PAGE_SIZE = 20


@dataclass
class DriftRow:
    item: DriftItem
    # Only the item being promoted carries its form; the others load theirs on demand
    # (drift_definition): forty definition forms were most of the page's time.
    promote_form: PredicateDefinitionForm | None = None
    error: str = ""
    # Its current facts in every scope: what a reject retracts, said before it happens.
    current_facts: int = 0

    @property
    def name(self) -> str:
        return self.item.predicate.name

    @property
    def top_target(self) -> str:
        """The first suggestion when it is confident (``inverse:`` marks a backwards one);
        a weak one is never pre-selected nor applied in bulk."""
        top = self.item.suggestions[0] if self.item.suggestions else None
        if top is None or not top.confident:
            return ""
        return f"{INVERSE_PREFIX}{top.name}" if top.inverse else top.name


INVERSE_PREFIX = "inverse:"


def _target_of(value: str) -> tuple[str, bool]:
    """A target as the page sends it: ``works_at`` or ``inverse:works_at``."""
    if value.startswith(INVERSE_PREFIX):
        return value.removeprefix(INVERSE_PREFIX), True
    return value, False


def _promote_form(item: DriftItem) -> PredicateDefinitionForm:
    """A definition form guessing the kind from the examples (attribute facts → attribute)."""
    kinds = {f.kind for f in item.examples}
    kind = kinds.pop() if len(kinds) == 1 else FactKind.RELATION
    return PredicateDefinitionForm(
        initial={"kind": kind, "category": "general", "lifecycle": "stable"},
        auto_id=f"id_{item.predicate.name}_%s",
    )


def _page(
    request: HtmxHttpRequest,
    access: ContextAccess,
    *,
    errors: dict[str, str] | None = None,
    promote: tuple[str, PredicateDefinitionForm] | None = None,
    bulk_errors: list[str] | None = None,
    status: int = 200,
) -> HttpResponse:
    """One page of the drift list (queries: observed predicates with their example ids;
    their usage; the examples; registered predicates and their aliases for the page's
    suggestions; registered names for the target list). With the embedder down the page
    is shown without suggestions, and says why."""
    errors = errors or {}
    items = drift_list(access=access, with_suggestions=False, with_examples=False)
    focus = promote[0] if promote is not None else next(iter(errors), None)
    page = Paginator(items, PAGE_SIZE).get_page(_page_number(request, items, focus))
    shown: list[DriftItem] = list(page.object_list)
    drift_examples_attach(items=shown)
    suggestions_problem = ""
    if embedder_loading():
        # Ranking would wait for the model the server is still loading (10-20 s): the
        # list and every action work now, and the suggestions come with a reload.
        suggestions_problem = (
            "the embedding model is still loading; reload the page in a few seconds"
        )
    else:
        try:
            drift_suggestions_attach(access=access, items=shown)
        except ServiceUnavailable as exc:  # the list and every action work without them
            suggestions_problem = exc.message
    # What a reject would retract, for those who may reject (one query for the page).
    current = (
        drift_current_fact_counts(access=access, names=[item.predicate.name for item in shown])
        if access.has_role(Role.CURATOR)
        else {}
    )
    rows = []
    for item in shown:
        name = item.predicate.name
        form = promote[1] if promote is not None and promote[0] == name else None
        rows.append(DriftRow(item, form, errors.get(name, ""), current.get(name, 0)))
    context: dict[str, Any] = {
        "rows": rows,
        "page": page,
        "total": len(items),
        # Actions come back to the page they were sent from.
        "here": f"?page={page.number}" if page.number > 1 else "",
        # The same options under every item: rendered once, not once per item.
        "registered_options": format_html_join(
            "",
            '<option value="{}">{}</option>',
            ((n, n) for n in registered_names(context=access.context)),
        ),
        "bulk_errors": bulk_errors or [],
        "suggestions_problem": suggestions_problem,
    }
    response = render_screen(
        request, TEMPLATE, access, context, section="drift", partial="rows", status=status
    )
    if _from_card(request):  # an item's own form asked: the whole list answers
        response["HX-Retarget"] = "#drift-rows"
        response["HX-Reswap"] = "outerHTML"
    return response


def _from_card(request: HtmxHttpRequest) -> bool:
    """Whether an item's own form sent this through htmx (it targets the item's card)."""
    return bool(request.htmx) and request.POST.get("in_card") == "1"


def _page_number(request: HtmxHttpRequest, items: list[DriftItem], focus: str | None) -> int:
    """The page asked for; else the page of the item an error or a form is about."""
    asked = request.GET.get("page", "")
    if asked.isdigit():
        return int(asked)
    names = [item.predicate.name for item in items]
    return names.index(focus) // PAGE_SIZE + 1 if focus in names else 1


def _done(
    request: HtmxHttpRequest, access: ContextAccess, event: AuditEvent, *, name: str
) -> HttpResponse:
    """The outcome with its Undo: in place of the item's card when the card's own form
    asked (htmx), else on the list (or the page, without htmx)."""
    messages.success(request, event.summary.capitalize() + ".", extra_tags=f"undo:{event.pk}")
    if _from_card(request):
        open_items = len(drift_list(access=access, with_suggestions=False, with_examples=False))
        context = {"name": name, "total": open_items}
        return render_screen(
            request, TEMPLATE, access, context, section="drift", partial="resolved"
        )
    if request.htmx:
        return _page(request, access)
    return redirect("drift", access.context.slug)


@require_safe
@dashboard_view
def drift(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    return _page(request, _get_context_for_user(request, ctx))


@require_POST
@dashboard_view
def drift_resolve_view(request: HtmxHttpRequest, ctx: str, name: str) -> HttpResponse:
    """Alias (to ``target``) or reject one drift item."""
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    form = DriftResolveForm(request.POST)
    if not form.is_valid():
        return _page(request, access, errors={name: "; ".join(form_problems(form))}, status=400)
    target, inverse = _target_of(form.cleaned_data["target"] or "")
    try:
        event = drift_resolve(
            access=access,
            name=name,
            action=form.cleaned_data["action"],
            target=target or None,
            inverse=inverse and form.cleaned_data["action"] == "alias",
        )
    except (ValidationFailed, NotFound) as exc:
        return _page(request, access, errors={name: exc.message}, status=400)
    except Conflict as exc:
        if exc.code in ("kind_mismatch", "several_values"):  # about this item: shown on it
            return _page(request, access, errors={name: exc.message}, status=409)
        messages.error(request, exc.message)
        return _page(request, access, status=409)
    return _done(request, access, event, name=name)


@require_safe
@dashboard_view
def drift_definition(request: HtmxHttpRequest, ctx: str, name: str) -> HttpResponse:
    """The promote form of one drift item, guessed from its examples: the form alone for
    htmx (opening "Promote…" loads it), else the drift page with that form open."""
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    items = drift_list(access=access, with_suggestions=False)
    item = next((i for i in items if i.predicate.name == name), None)
    if item is None:
        raise NotFound(f"{name[:100]!r} is not open drift", code="not_drift")
    form = _promote_form(item)
    if wants_partial(request):
        context = {"name": name, "promote_form": form}
        return render_screen(request, TEMPLATE, access, context, section="drift", partial="promote")
    return _page(request, access, promote=(name, form))


@require_POST
@dashboard_view
def drift_promote(request: HtmxHttpRequest, ctx: str, name: str) -> HttpResponse:
    """Register a drift item with the definition from its form."""
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    form = PredicateDefinitionForm(request.POST, auto_id=f"id_{name}_%s")
    if not form.is_valid():
        return _page(request, access, promote=(name, form), status=400)
    try:
        event = drift_resolve(
            access=access, name=name, action="promote", definition=form.definition()
        )
    except ValidationFailed as exc:
        form.add_error(None, exc.message)
        return _page(request, access, promote=(name, form), status=400)
    except Conflict as exc:
        messages.error(request, exc.message)
        return _page(request, access, status=409)
    return _done(request, access, event, name=name)


@dataclass
class BulkAlias:
    """One line of the bulk alias confirmation: what it would do, or why it is left out."""

    name: str
    target: str  # as the page sends it (``inverse:works_at``)
    plan: AliasPlan | None = None
    problem: str = ""

    @property
    def target_name(self) -> str:
        return _target_of(self.target)[0]

    @property
    def inverse(self) -> bool:
        return _target_of(self.target)[1]


def _bulk_confirmation(
    request: HtmxHttpRequest, access: ContextAccess, names: list[str], targets: dict[str, str]
) -> HttpResponse:
    """Before any bulk alias: each ``name → target`` with the facts that move. Weak
    suggestions never came (no target); a preview that refuses, or a single-valued
    target the move would give several values, is left for one-by-one resolution."""
    lines: list[BulkAlias] = []
    skipped: list[str] = []
    for name in names:
        if not targets.get(name):
            skipped.append(name)
            continue
        line = BulkAlias(name, targets[name])
        try:
            plan = drift_alias(
                access=access,
                name=name,
                target=line.target_name,
                inverse=line.inverse,
                preview=True,
            )
        except (ValidationFailed, NotFound, Conflict) as exc:
            line.problem = exc.message
        else:
            assert isinstance(plan, AliasPlan)
            line.plan = plan
            if plan.subjects_with_several_values:
                count = plan.subjects_with_several_values
                line.problem = (
                    f"{plan.target} is single-valued and {count} subject"
                    f"{'s' if count != 1 else ''} would hold several values: resolve it on "
                    "its own (it records conflicts)"
                )
        lines.append(line)
    context = {
        "ready": [line for line in lines if not line.problem],
        "held": [line for line in lines if line.problem],
        "skipped": skipped,
        "confirming": True,
        "here": f"?page={request.GET['page']}" if request.GET.get("page", "").isdigit() else "",
    }
    return render_screen(request, TEMPLATE, access, context, section="drift", partial="confirm")


@require_POST
@dashboard_view
def drift_bulk(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    """Alias each selected item to its confident top suggestion — first a confirmation
    listing each ``name → target`` with the facts that move, then (``confirm``) the
    aliases, as one change with one undo — or reject them all, each its own change. An
    item that fails does not stop the others."""
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    form = DriftBulkForm(request.POST)
    if not form.is_valid():
        return _page(request, access, bulk_errors=form_problems(form), status=400)
    action, targets = form.cleaned_data["action"], form.targets()
    if action == "alias" and not request.POST.get("confirm"):
        return _bulk_confirmation(request, access, form.names_chosen(), targets)
    done: list[AuditEvent] = []
    failed: dict[str, str] = {}
    skipped = [n for n in form.names_chosen() if action == "alias" and not targets.get(n)]
    chosen = [n for n in form.names_chosen() if n not in skipped]
    event: AuditEvent | None = None
    if action == "alias":
        # One action with one undo, however many items it aliases.
        requests = [AliasRequest(n, *_target_of(targets[n])) for n in chosen]
        event, failed = drift_alias_bulk(access=access, requests=requests)
        if event is not None:
            messages.success(
                request, event.summary.capitalize() + ".", extra_tags=f"undo:{event.pk}"
            )
    for name in chosen if action != "alias" else []:
        try:
            done.append(drift_resolve(access=access, name=name, action=action))
        except (ValidationFailed, NotFound, Conflict) as exc:
            failed[name] = exc.message
    if done:
        messages.success(
            request,
            f"Rejected {len(done)} drift item{'s' if len(done) != 1 else ''}: "
            f"{', '.join(e.target_id for e in done)}. Each can be undone from the audit log.",
        )
    if skipped:
        messages.warning(
            request,
            f"Skipped {', '.join(skipped)}: no confident suggestion; choose a target for "
            f"{'each' if len(skipped) > 1 else 'it'} yourself.",
        )
    if failed:
        anything_done = bool(done) or event is not None
        return _page(request, access, errors=failed, status=200 if anything_done else 400)
    if request.htmx:
        return _page(request, access)
    return redirect("drift", access.context.slug)
