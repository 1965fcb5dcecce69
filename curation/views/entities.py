"""Entities: filter and search; an entity's page with aliases, identifiers, ranked
current facts, the timeline of what was superseded, and its neighbourhood as a picture."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from curation.forms.entities import EntityEditForm, EntityFilterForm
from curation.svg import neighbourhood_svg, neighbours_collect
from curation.views.access import (
    HtmxHttpRequest,
    _get_context_for_user,
    audit_mark,
    dashboard_view,
    render_screen,
    undo_tag,
    wants_partial,
)
from memory.domain.access import ContextAccess
from memory.kernel.errors import Conflict, ValidationFailed
from memory.kernel.wording import counted
from memory.models import Entity, Role
from memory.selectors.entities import entity_audit_events, entity_get, entity_list
from memory.selectors.entity_pages import (
    entity_edges,
    entity_fact_counts,
    entity_incoming,
    entity_timeline,
)
from memory.selectors.facts import entity_facts_ranked
from memory.services.entities.writes import entity_delete, entity_update

PAGE_SIZE = 50
# Rows per page of each section of an entity's page: a hub's 170 rendered facts were most
# of its time (docs/BENCHMARKS.md); the rest are a pager click away.
RANKED = 20
TIMELINE = 20
INCOMING = 10
OUT_EDGES = 60  # the picture shows 50 neighbours; more edges only tell "60+"
IN_EDGES = 25
MAX_PAGE = 10_000
# The id a section's pager targets → the partial of entity.html that answers it.
SECTIONS = {"entity-facts": "ranked", "entity-timeline": "timeline", "entity-incoming": "incoming"}


@require_safe
@dashboard_view
def entities(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    """Queries: count; one page of entities; their visible current fact counts."""
    access = _get_context_for_user(request, ctx)
    form = EntityFilterForm(request.GET)
    valid = form.is_valid()
    entities: Sequence[Entity] | QuerySet[Entity] = (
        entity_list(access=access, **form.filters()) if valid else []
    )
    page: Page[Entity] = Paginator(entities, PAGE_SIZE).get_page(request.GET.get("page"))
    counts = entity_fact_counts(access=access, entity_ids=[e.pk for e in page])
    rows = [(entity, counts.get(entity.pk, 0)) for entity in page]
    query = request.GET.copy()
    query.pop("page", None)
    return render_screen(
        request,
        "curation/entities.html",
        access,
        {"form": form, "page": page, "rows": rows, "query": query.urlencode()},
        section="entities",
        partial="results",
        status=200 if valid else 400,
    )


@dataclass(frozen=True)
class Section:
    """One page of a section of the entity page: its rows, where they start, and the
    links to the pages around it (None at either end)."""

    rows: list[Any]
    start: int  # 1-based position of the first row
    previous_url: str | None
    next_url: str | None

    @property
    def end(self) -> int:
        return self.start + len(self.rows) - 1


def _section(
    request: HtmxHttpRequest,
    here: str,
    param: str,
    size: int,
    read: Callable[[int, int], list[Any]],
) -> Section:
    """The page ``?<param>=n`` of a section of the page at ``here``, read as
    ``read(offset, limit)``; one row more than shown tells whether a next page exists, so
    nothing is counted. Links keep the other sections' pages."""
    asked = request.GET.get(param, "")
    # Anything but a page number is page 1; the cap keeps OFFSET a small bigint.
    number = min(int(asked), MAX_PAGE) if asked.isdigit() and int(asked) > 0 else 1
    rows = read((number - 1) * size, size + 1)

    def url(n: int) -> str:
        query = request.GET.copy()
        query[param] = str(n)
        return f"{here}?{query.urlencode()}"

    return Section(
        rows=rows[:size],
        start=(number - 1) * size + 1,
        previous_url=url(number - 1) if number > 1 else None,
        next_url=url(number + 1) if len(rows) > size else None,
    )


def _detail_page(
    request: HtmxHttpRequest,
    access: ContextAccess,
    entity: Entity,
    *,
    form: EntityEditForm | None = None,
    status: int = 200,
) -> HttpResponse:
    """Queries: one page of ranked facts (picked in SQL); one page of the timeline and its
    successors; one page of in-edges; the newest out- and in-edges for the picture (one
    query); audit events (+ the entity and its identifiers, loaded by the caller). Bounded
    however many facts an entity has. A section's pager (htmx) gets only its partial."""
    partial = SECTIONS.get(request.htmx.target or "") if wants_partial(request) else None
    slug = access.context.slug
    # Links are "<entities>/<id>/" and "<registry>/<name>/": one reverse() for every row.
    entities_url = reverse("entities", args=[slug])
    here = f"{entities_url}{entity.pk}/"  # also when an edit's errors are shown
    context: dict[str, Any] = {
        "entity": entity,
        "entities_url": entities_url,
        "registry_url": reverse("registry", args=[slug]),
        "facts_url": reverse("facts", args=[slug]),
    }
    sections: dict[str, tuple[str, int, Callable[[int, int], list[Any]]]] = {
        "ranked": (
            "facts",
            RANKED,
            # The dashboard shows pending facts too, each with its badge.
            lambda offset, limit: entity_facts_ranked(
                access=access, entity=entity, offset=offset, limit=limit, include_pending=True
            ),
        ),
        "timeline": (
            "timeline",
            TIMELINE,
            lambda offset, limit: entity_timeline(
                access=access, entity=entity, offset=offset, limit=limit
            ),
        ),
        "incoming": (
            "incoming",
            INCOMING,
            lambda offset, limit: entity_incoming(
                access=access, entity=entity, offset=offset, limit=limit
            ),
        ),
    }
    for name, (param, size, read) in sections.items():
        if partial in (None, name):
            context[name] = _section(request, here, param, size, read)
    if partial is None:
        context |= _neighbourhood(access, entity, entities_url)
        initial = {
            "name": entity.name,
            "type": entity.type,
            "aliases": "\n".join(entity.aliases),
            "attributes": json.dumps(entity.attributes, indent=1) if entity.attributes else "",
        }
        context |= {
            "identifiers": list(entity.identifiers.all()),
            "attributes": sorted(entity.attributes.items()),
            "events": list(entity_audit_events(access=access, entity=entity)[:20]),
            "form": form or EntityEditForm(initial=initial),
        }
    return render_screen(
        request,
        "curation/entity.html",
        access,
        context,
        section="entities",
        partial=partial,
        status=status,
    )


def _neighbourhood(access: ContextAccess, entity: Entity, entities_url: str) -> dict[str, Any]:
    outgoing, incoming = entity_edges(
        access=access, entity=entity, outgoing=OUT_EDGES, incoming=IN_EDGES
    )
    neighbours = neighbours_collect(centre_id=entity.pk, outgoing=outgoing, incoming=incoming)
    return {
        "neighbours": neighbours,
        # The edges were cut at their limits: "n+" connected entities, not n.
        "neighbours_more": len(outgoing) == OUT_EDGES or len(incoming) == IN_EDGES,
        "graph": neighbourhood_svg(
            name=entity.name,
            type=entity.type,
            neighbours=neighbours,
            href=lambda pk: f"{entities_url}{pk}/",
        ),
    }


@require_safe
@dashboard_view
def entity_detail(request: HtmxHttpRequest, ctx: str, entity_id: int) -> HttpResponse:
    access = _get_context_for_user(request, ctx)
    return _detail_page(request, access, entity_get(access=access, entity_id=entity_id))


@require_POST
@dashboard_view
def entity_edit(request: HtmxHttpRequest, ctx: str, entity_id: int) -> HttpResponse:
    """A curator's edit (curators fix what extraction fragmented; the registry, seeding and
    members are an admin's)."""
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    entity = entity_get(access=access, entity_id=entity_id)
    form = EntityEditForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        since = audit_mark(access)
        try:
            entity_update(
                access=access,
                entity=entity,
                name=data["name"],
                type=data["type"],
                aliases=data["aliases"],
                attributes=data["attributes"],
                identifiers_add=data["identifiers_add"],
            )
        except (ValidationFailed, Conflict) as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(request, f"Saved {data['name']}.", extra_tags=undo_tag(access, since))
            return redirect("entity", access.context.slug, entity.pk)
    return _detail_page(request, access, entity, form=form, status=400)


@require_POST
@dashboard_view
def entity_delete_view(request: HtmxHttpRequest, ctx: str, entity_id: int) -> HttpResponse:
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    entity = entity_get(access=access, entity_id=entity_id)
    count = entity_delete(access=access, entity=entity)
    messages.success(request, f"Deleted {entity.name} and {counted(count, 'fact')} about it.")
    return redirect("entities", access.context.slug)
