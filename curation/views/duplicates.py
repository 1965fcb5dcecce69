"""Duplicates: clusters of entities that look like one, with the methods that found them;
pick a survivor and a name, preview what moves, merge (undoable) or dismiss."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from curation.forms.duplicates import DuplicateClusterForm, cluster_key
from curation.views.access import (
    STOP_POLLING,
    HtmxHttpRequest,
    _get_context_for_user,
    dashboard_view,
    form_problems,
    next_url,
    render_screen,
    wants_partial,
)
from memory.domain.access import ContextAccess
from memory.infra.queueing import DUPLICATES_SCAN_TASK, task_enqueue_on_commit
from memory.kernel.errors import Conflict, NotFound, ValidationFailed
from memory.models import Entity, Role
from memory.selectors.duplicates import (
    DuplicateCluster,
    duplicate_cluster_page,
    duplicates_scan_pending,
)
from memory.selectors.entities import entities_visible
from memory.selectors.entity_pages import entity_fact_counts
from memory.services.duplicates.finder import duplicates_dismiss_recorded
from memory.services.merges.merge import entity_merge, entity_merge_preview, merge_undo
from memory.services.merges.plan import MergePlan

TEMPLATE = "curation/duplicates.html"
PAGE_SIZE = 25


@dataclass
class ClusterRow:
    cluster: DuplicateCluster
    key: str
    survivor_id: int
    name: str
    error: str = ""
    plan: MergePlan | None = None


@dataclass
class Posted:
    """What one cluster's form sent back, to show again with its outcome."""

    key: str
    survivor_id: int | None = None
    name: str = ""
    error: str = ""
    plan: MergePlan | None = None


SURVIVOR_RULE = (
    "a seeded (canonical) entity first, then the one with the most facts, then the most "
    "aliases, then the longest name, then the oldest"
)


def survivor_suggested(members: list[Entity], fact_counts: dict[int, int]) -> Entity:
    """The member pre-selected as survivor, by ``SURVIVOR_RULE``: the one the memory
    knows most about keeps its identity; between equals, the fuller name."""
    return min(
        members,
        key=lambda e: (
            not e.seeded,
            -fact_counts.get(e.pk, 0),
            -len(e.aliases),
            -len(e.name),
            e.pk,
        ),
    )


def _row(
    cluster: DuplicateCluster, posted: Posted | None, fact_counts: dict[int, int]
) -> ClusterRow:
    key = cluster_key(m.pk for m in cluster.members)
    survivor = survivor_suggested(cluster.members, fact_counts)
    row = ClusterRow(cluster, key, survivor.pk, survivor.name)
    if posted is not None and posted.key == key:
        row.survivor_id = posted.survivor_id or row.survivor_id
        row.name = posted.name or row.name
        row.error, row.plan = posted.error, posted.plan
    return row


def _page(
    request: HtmxHttpRequest,
    access: ContextAccess,
    *,
    posted: Posted | None = None,
    status: int = 200,
    scanning: bool | None = None,
) -> HttpResponse:
    """One page of clusters (queries: open pairs as ids; the page's entities and pairs;
    fact counts of the members)."""
    asked = request.GET.get("page", "1")
    number = int(asked) if asked.isdigit() and int(asked) > 0 else 1
    clusters, total = _clusters(access, number)
    page = Paginator(range(total), PAGE_SIZE).get_page(number)
    if page.number != number:  # past the end: the last page instead
        clusters, total = _clusters(access, page.number)
    counts = entity_fact_counts(
        access=access, entity_ids=[m.pk for c in clusters for m in c.members]
    )
    rows = [_row(c, posted, counts) for c in clusters]
    shown = {row.key for row in rows}
    context = {
        "rows": rows,
        "page": page,
        "total": total,
        # Actions come back to the page they were sent from.
        "here": f"?page={page.number}" if page.number > 1 else "",
        "fact_counts": counts,
        "survivor_rule": SURVIVOR_RULE,
        # A problem with a cluster that is no longer listed is shown above the list.
        "problem": posted.error if posted and posted.error and posted.key not in shown else "",
        # While a scan is queued or running the list polls itself (``?poll=1``).
        "scanning": duplicates_scan_pending(access.context.pk) if scanning is None else scanning,
    }
    if request.GET.get("poll") and not context["scanning"] and wants_partial(request):
        status = STOP_POLLING  # the scan is done: this answer is the last poll
    return render_screen(
        request, TEMPLATE, access, context, section="duplicates", partial="clusters", status=status
    )


def _clusters(access: ContextAccess, number: int) -> tuple[list[DuplicateCluster], int]:
    return duplicate_cluster_page(access=access, offset=(number - 1) * PAGE_SIZE, limit=PAGE_SIZE)


def _done(request: HtmxHttpRequest, access: ContextAccess) -> HttpResponse:
    if request.htmx:
        return _page(request, access)
    return redirect("duplicates", access.context.slug)


def _invalid(
    request: HtmxHttpRequest, access: ContextAccess, form: DuplicateClusterForm, message: str
) -> HttpResponse:
    name = str(form.data.get("name", ""))[:300]
    posted = Posted(form.key(), form.cleaned_data.get("survivor"), name, message)
    response = _page(request, access, posted=posted, status=400)
    if request.htmx:  # a preview targets its own box; the error belongs in the list
        response["HX-Retarget"] = "#duplicate-clusters"
        response["HX-Reswap"] = "outerHTML"
    return response


def _curator_form(
    request: HtmxHttpRequest, ctx: str, *, needs_survivor: bool = True
) -> tuple[ContextAccess, DuplicateClusterForm]:
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    return access, DuplicateClusterForm(request.POST, needs_survivor=needs_survivor)


@require_safe
@dashboard_view
def duplicates(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    return _page(request, _get_context_for_user(request, ctx))


@require_POST
@dashboard_view
def duplicates_preview(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    """What a merge would move, shown in the cluster (htmx: only the preview partial)."""
    access, form = _curator_form(request, ctx)
    if not form.is_valid():
        return _invalid(request, access, form, "; ".join(form_problems(form)))
    # Choosing another survivor previews its own name: the name box held the last one's.
    renamed = bool(request.POST.get("survivor_changed"))
    try:
        plan = entity_merge_preview(
            access=access,
            survivor_id=form.cleaned_data["survivor"],
            merged_ids=form.merged_ids(),
            name=None if renamed else form.cleaned_data["name"] or None,
        )
    except (ValidationFailed, NotFound, Conflict) as exc:
        return _invalid(request, access, form, exc.message)
    if request.htmx:
        shown = {"plan": plan, "key": form.key(), "renamed": renamed}
        return render_screen(
            request, TEMPLATE, access, shown, section="duplicates", partial="preview"
        )
    posted = Posted(form.key(), plan.survivor.pk, form.cleaned_data["name"], plan=plan)
    return _page(request, access, posted=posted)


@require_POST
@dashboard_view
def duplicates_merge(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    access, form = _curator_form(request, ctx)
    if not form.is_valid():
        return _invalid(request, access, form, "; ".join(form_problems(form)))
    try:
        merge = entity_merge(
            access=access,
            survivor_id=form.cleaned_data["survivor"],
            merged_ids=form.merged_ids(),
            name=form.cleaned_data["name"] or None,
        )
    except (ValidationFailed, NotFound, Conflict) as exc:
        return _invalid(request, access, form, exc.message)
    count = len(merge.merged_ids)
    messages.success(
        request,
        f"Merged {count} entit{'ies' if count != 1 else 'y'} into {merge.final_name}.",
        extra_tags=f"merge:{merge.pk}",
    )
    return _done(request, access)


@require_POST
@dashboard_view
def duplicates_dismiss_view(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    """Mark the cluster "not duplicates": its pairs are not proposed again."""
    access, form = _curator_form(request, ctx, needs_survivor=False)
    if not form.is_valid():
        return _invalid(request, access, form, "; ".join(form_problems(form)))
    try:
        event = duplicates_dismiss_recorded(access=access, entity_ids=form.cleaned_data["ids"])
    except (ValidationFailed, NotFound) as exc:
        return _invalid(request, access, form, exc.message)
    count = len(form.cleaned_data["ids"])
    messages.success(
        request,
        f"Marked {count} entities as not duplicates: they will not be proposed again.",
        extra_tags=f"undo:{event.pk}",
    )
    return _done(request, access)


@require_POST
@dashboard_view
def duplicates_scan_view(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    """Queue a scan of the whole context (minutes at 100k entities: never in a request)."""
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    count = entities_visible(access=access).filter(merged_into__isnull=True).count()
    task_enqueue_on_commit(DUPLICATES_SCAN_TASK, access.context.pk)
    messages.success(
        request,
        f"Scanning {count:,} entities in the background; new candidates appear here when "
        "it finishes (about a minute per 10,000 entities).",
    )
    if request.htmx:  # queued at commit: the list polls until the scan is done
        return _page(request, access, scanning=True)
    return redirect("duplicates", access.context.slug)


@require_POST
@dashboard_view
def merge_undo_view(request: HtmxHttpRequest, ctx: str, merge_id: int) -> HttpResponse:
    """Undo a merge (the Undo button of its message); back to where it was pressed."""
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    try:
        merge = merge_undo(access=access, merge_id=merge_id)
    except Conflict as exc:
        messages.error(request, exc.message)
        return redirect(next_url(request, _duplicates_url(access)))
    messages.success(request, f"Undid the merge into {merge.final_name}.")
    return redirect(next_url(request, _duplicates_url(access)))


def _duplicates_url(access: ContextAccess) -> str:
    return reverse("duplicates", args=[access.context.slug])
