"""Entities: filter and search; an entity's page with aliases, identifiers, ranked
current facts, the timeline of what was superseded, and its neighbourhood as a picture."""

from __future__ import annotations

import json
from collections.abc import Sequence

from django.contrib import messages
from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from curation.forms import EntityEditForm, EntityFilterForm
from curation.selectors import (
    entity_fact_counts,
    entity_incoming,
    entity_outgoing,
    entity_timeline,
)
from curation.svg import neighbourhood_svg, neighbours_collect
from curation.views.access import (
    HtmxHttpRequest,
    _get_context_for_user,
    dashboard_view,
    render_screen,
)
from memory.access import ContextAccess
from memory.errors import Conflict, ValidationFailed
from memory.models import Entity, Role
from memory.selectors.entities import entity_audit_events, entity_get, entity_list
from memory.selectors.facts import entity_facts_ranked
from memory.services.entities import entity_delete, entity_update

PAGE_SIZE = 50
TIMELINE = 100
OUTGOING = 50  # the picture shows 16 neighbours; more edges only tell "50+"
INCOMING = 25


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


def _detail_page(
    request: HtmxHttpRequest,
    access: ContextAccess,
    entity: Entity,
    *,
    form: EntityEditForm | None = None,
    status: int = 200,
) -> HttpResponse:
    """Queries: ranked facts (the best 50, picked in SQL); timeline (newest 100) and their
    successors; out- and in-edges (newest 50 and 25); audit events (+ the entity and its
    identifiers, loaded by the caller). Bounded however many facts an entity has."""
    ranked = entity_facts_ranked(access=access, entity=entity)
    timeline = entity_timeline(access=access, entity=entity, limit=TIMELINE)
    incoming = entity_incoming(access=access, entity=entity, limit=INCOMING)
    outgoing = entity_outgoing(access=access, entity=entity, limit=OUTGOING)
    neighbours = neighbours_collect(
        centre_id=entity.pk,
        outgoing=[
            (f.object.pk, f.object.name, f.object.type, f.predicate.name)
            for f in outgoing
            if f.object is not None
        ],
        incoming=[
            (f.subject_id, f.subject.name, f.subject.type, f.predicate.name) for f in incoming
        ],
    )
    slug = access.context.slug
    svg = neighbourhood_svg(
        name=entity.name,
        type=entity.type,
        neighbours=neighbours,
        href=lambda pk: reverse("entity", args=[slug, pk]),
    )
    initial = {
        "name": entity.name,
        "type": entity.type,
        "aliases": "\n".join(entity.aliases),
        "attributes": json.dumps(entity.attributes, indent=1) if entity.attributes else "",
    }
    context = {
        "entity": entity,
        "identifiers": list(entity.identifiers.all()),
        "attributes": sorted(entity.attributes.items()),
        "ranked": ranked,
        "timeline": timeline,
        "incoming": incoming,
        "neighbours": neighbours,
        # The edges were cut at their limits: "n+" connected entities, not n.
        "neighbours_more": len(outgoing) == OUTGOING or len(incoming) == INCOMING,
        "graph": svg,
        "events": list(entity_audit_events(access=access, entity=entity)[:20]),
        "form": form or EntityEditForm(initial=initial),
    }
    return render_screen(
        request, "curation/entity.html", access, context, section="entities", status=status
    )


@require_safe
@dashboard_view
def entity_detail(request: HtmxHttpRequest, ctx: str, entity_id: int) -> HttpResponse:
    access = _get_context_for_user(request, ctx)
    return _detail_page(request, access, entity_get(access=access, entity_id=entity_id))


@require_POST
@dashboard_view
def entity_edit(request: HtmxHttpRequest, ctx: str, entity_id: int) -> HttpResponse:
    """A curator's edit (SPEC §7: curators fix what extraction fragmented; the registry,
    seeding and members are an admin's)."""
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    entity = entity_get(access=access, entity_id=entity_id)
    form = EntityEditForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
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
            messages.success(request, f"Saved {data['name']} (undo from the audit log).")
            return redirect("entity", access.context.slug, entity.pk)
    return _detail_page(request, access, entity, form=form, status=400)


@require_POST
@dashboard_view
def entity_delete_view(request: HtmxHttpRequest, ctx: str, entity_id: int) -> HttpResponse:
    access = _get_context_for_user(request, ctx, role=Role.CURATOR)
    entity = entity_get(access=access, entity_id=entity_id)
    count = entity_delete(access=access, entity=entity)
    messages.success(request, f"Deleted {entity.name} and {count} facts about it.")
    return redirect("entities", access.context.slug)
