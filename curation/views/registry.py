"""Registry: predicates by category; aliases (collisions shown inline), flags, edits,
and the registry as a JSON file out and in."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from django.contrib import messages
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpResponse
from django.shortcuts import redirect
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from curation.forms.registry import (
    AliasForm,
    FlagForm,
    PredicateDefinitionForm,
    RegistryFilterForm,
    RegistryImportForm,
)
from curation.templatetags.curation_tags import flags
from curation.views.access import (
    HtmxHttpRequest,
    _get_context_for_user,
    audit_mark,
    dashboard_view,
    render_screen,
    undo_tag,
)
from memory.domain.access import ContextAccess
from memory.kernel.errors import Conflict, NotFound, ValidationFailed
from memory.kernel.wording import counted
from memory.models import Predicate, PredicateStatus, Role
from memory.selectors.predicates import predicate_get
from memory.selectors.registry import (
    predicate_aliases,
    predicate_fact_count,
    predicate_facts,
    predicate_last_update,
    registry_categories,
    registry_export_data,
    registry_row,
    registry_rows,
    subjects_with_several_values,
)
from memory.services.registry.file import registry_import
from memory.services.registry.predicates import (
    predicate_alias_add,
    predicate_alias_remove,
    predicate_unregister,
    predicate_update,
)

TEMPLATE = "curation/registry.html"
DETAIL_TEMPLATE = "curation/predicate.html"
IMPORT_REPORT_KEY = "curation_registry_import"


def _list_page(
    request: HtmxHttpRequest,
    access: ContextAccess,
    *,
    import_form: RegistryImportForm | None = None,
    import_report: list[dict[str, Any]] | None = None,
    row_errors: dict[str, str] | None = None,
    status: int = 200,
) -> HttpResponse:
    """Registry rows (queries: categories; predicates with visible fact counts; aliases)."""
    filters = RegistryFilterForm(request.GET)
    filters.is_valid()
    shown = filters.cleaned_data.get("status") or PredicateStatus.REGISTERED
    category = filters.cleaned_data.get("category") or None
    predicates = registry_rows(
        access=access, status=None if shown == "all" else shown, category=category
    )
    context = {
        "predicates": predicates,
        "categories": registry_categories(context=access.context),
        "shown": shown,
        "category": category or "",
        "import_form": import_form or RegistryImportForm(),
        "row_errors": row_errors or {},
        "import_report": import_report
        if import_report is not None
        else request.session.pop(IMPORT_REPORT_KEY, None),
    }
    return render_screen(
        request, TEMPLATE, access, context, section="registry", partial="table", status=status
    )


def _row(
    request: HtmxHttpRequest,
    access: ContextAccess,
    predicate: Predicate,
    *,
    success: str = "",
    error: str = "",
    status: int = 200,
    since: int | None = None,
) -> HttpResponse:
    """After an alias or flag change: the row again (htmx, with the message and its Undo
    swapped into the flash area), or the page the form sits on."""
    if success:
        tag = undo_tag(access, since) if since is not None else ""
        messages.success(request, success, extra_tags=tag)
    if request.POST.get("view") == "detail":
        if error:
            return _detail_page(request, access, predicate, alias_error=error, status=status)
        return redirect("predicate", access.context.slug, predicate.name)
    if not request.htmx:
        if error:
            return _list_page(request, access, row_errors={predicate.name: error}, status=status)
        return redirect(f"{_registry_url(access)}#p-{predicate.name}")
    row = registry_row(access=access, predicate=predicate)
    response = render_screen(
        request,
        TEMPLATE,
        access,
        {"p": row, "row_errors": {predicate.name: error}},
        section="registry",
        partial="row",
        status=status,
    )
    if success:
        flash = render_to_string(
            "curation/_messages.html", {"oob": True, "ctx": access.context}, request=request
        )
        response.content += flash.encode()
    return response


def _registry_url(access: ContextAccess) -> str:
    return reverse("registry", args=[access.context.slug])


def _detail_page(
    request: HtmxHttpRequest,
    access: ContextAccess,
    predicate: Predicate,
    *,
    edit_form: PredicateDefinitionForm | None = None,
    alias_error: str = "",
    status: int = 200,
) -> HttpResponse:
    initial = PredicateDefinitionForm.initial_for(predicate)
    context = {
        "predicate": predicate,
        "aliases": predicate_aliases(predicate=predicate),
        "facts": predicate_facts(access=access, predicate=predicate),
        "fact_count": predicate_fact_count(access=access, predicate=predicate),
        "edit_form": edit_form or PredicateDefinitionForm(initial=initial),
        "alias_error": alias_error,
    }
    return render_screen(
        request, DETAIL_TEMPLATE, access, context, section="registry", status=status
    )


@require_safe
@dashboard_view
def registry(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    return _list_page(request, _get_context_for_user(request, ctx))


@require_safe
@dashboard_view
def predicate_detail(request: HtmxHttpRequest, ctx: str, name: str) -> HttpResponse:
    access = _get_context_for_user(request, ctx)
    return _detail_page(request, access, predicate_get(context=access.context, name=name))


@require_POST
@dashboard_view
def predicate_edit(request: HtmxHttpRequest, ctx: str, name: str) -> HttpResponse:
    access = _get_context_for_user(request, ctx, role=Role.ADMIN)
    predicate = predicate_get(context=access.context, name=name)
    form = PredicateDefinitionForm(request.POST)
    if form.is_valid():
        since = audit_mark(access)
        try:
            predicate_update(access=access, predicate=predicate, **form.definition())
        except ValidationFailed as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(
                request, f"Saved {predicate.name}.", extra_tags=undo_tag(access, since)
            )
            return redirect("predicate", access.context.slug, predicate.name)
    return _detail_page(request, access, predicate, edit_form=form, status=400)


@require_POST
@dashboard_view
def predicate_alias_add_view(request: HtmxHttpRequest, ctx: str, name: str) -> HttpResponse:
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    predicate = predicate_get(context=access.context, name=name)
    form = AliasForm(request.POST)
    if not form.is_valid():
        return _row(request, access, predicate, error="type an alias", status=400)
    since = audit_mark(access)
    try:
        alias = predicate_alias_add(
            access=access, predicate=predicate, alias=form.cleaned_data["alias"]
        )
    except (ValidationFailed, Conflict) as exc:
        return _row(request, access, predicate, error=exc.message, status=400)
    return _row(
        request,
        access,
        predicate,
        success=f"{alias.alias} is now an alias of {name}.",
        since=since,
    )


@require_POST
@dashboard_view
def predicate_alias_remove_view(request: HtmxHttpRequest, ctx: str, name: str) -> HttpResponse:
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    predicate = predicate_get(context=access.context, name=name)
    form = AliasForm(request.POST)
    if not form.is_valid():
        return _row(request, access, predicate, error="which alias?", status=400)
    since = audit_mark(access)
    try:
        predicate_alias_remove(access=access, predicate=predicate, alias=form.cleaned_data["alias"])
    except (ValidationFailed, NotFound) as exc:
        return _row(request, access, predicate, error=exc.message, status=400)
    removed = form.cleaned_data["alias"]
    return _row(
        request, access, predicate, success=f"Removed alias {removed} of {name}.", since=since
    )


@require_POST
@dashboard_view
def predicate_flag(request: HtmxHttpRequest, ctx: str, name: str) -> HttpResponse:
    access = _get_context_for_user(request, ctx, role=Role.ADMIN)
    predicate = predicate_get(context=access.context, name=name)
    form = FlagForm(request.POST)
    if not form.is_valid():
        return _row(request, access, predicate, error="unknown flag", status=400)
    flag, value = form.cleaned_data["flag"], form.cleaned_data["value"]
    try:
        updated = predicate_update(access=access, predicate=predicate, **{flag: value})
    except ValidationFailed as exc:
        return _row(request, access, predicate, error=exc.message, status=400)
    label = dict((f, lbl) for f, lbl, _ in flags(updated))[flag]
    event = predicate_last_update(access=access, predicate=updated)
    messages.success(
        request,
        f"{updated.name}: {label} is now {'on' if value else 'off'}.",
        extra_tags=f"undo:{event.pk}" if event and event.undo else "",
    )
    if flag == "single_valued" and value:
        several = subjects_with_several_values(access=access, predicate=updated)
        if several:
            messages.warning(
                request,
                f"{several:,} subject{'s' if several != 1 else ''} already hold"
                f"{'s' if several == 1 else ''} several current {updated.name} values. The flag "
                "applies to new writes; resolve the existing ones on the Facts page "
                f"(predicate {updated.name}, status current): retract or correct the wrong "
                "values there (or undo this).",
            )
    # A full page, so the message and its Undo are shown (a row swap has no room for it).
    if request.POST.get("view") == "detail":
        return redirect("predicate", access.context.slug, updated.name)
    return redirect(f"{_registry_url(access)}#p-{updated.name}")


@require_POST
@dashboard_view
def predicate_unregister_view(request: HtmxHttpRequest, ctx: str, name: str) -> HttpResponse:
    access = _get_context_for_user(request, ctx, role=Role.ADMIN)
    predicate = predicate_get(context=access.context, name=name)
    since = audit_mark(access)
    predicate_unregister(access=access, predicate=predicate)
    messages.success(
        request,
        f"Removed {predicate.name} from the registry.",
        extra_tags=undo_tag(access, since),
    )
    return redirect("registry", access.context.slug)


@require_safe
@dashboard_view
def registry_export(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    access = _get_context_for_user(request, ctx, role=Role.ADMIN)
    data = registry_export_data(context=access.context)
    response = HttpResponse(
        json.dumps(data, indent=2, cls=DjangoJSONEncoder), content_type="application/json"
    )
    filename = f"{access.context.slug}-registry.json"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@require_POST
@dashboard_view
def registry_import_view(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    access = _get_context_for_user(request, ctx, role=Role.ADMIN)
    form = RegistryImportForm(request.POST, request.FILES)
    if not form.is_valid():
        return _list_page(request, access, import_form=form, status=400)
    result = registry_import(access=access, entries=form.cleaned_data["file"])
    report = [asdict(o) for o in result.outcomes]
    if not result.applied:
        form.add_error(None, "Nothing was imported: fix the predicates marked below.")
        return _list_page(request, access, import_form=form, import_report=report, status=400)
    request.session[IMPORT_REPORT_KEY] = report
    messages.success(request, f"Imported {counted(len(report), 'predicate')}.")
    return redirect("registry", access.context.slug)
