"""Overview: counts, vocabulary health, open work, recent runs and drift over time."""

from __future__ import annotations

from django.http import HttpResponse
from django.views.decorators.http import require_safe

from curation.selectors import drift_series, overview_read
from curation.svg import drift_chart_svg
from curation.views.access import (
    HtmxHttpRequest,
    _get_context_for_user,
    dashboard_view,
    render_screen,
    wants_partial,
)
from memory.selectors.runs import run_list
from memory.services.vectors import embedding_backlog

CHART_RANGES = (7, 30, 90)
RECENT_RUNS = 5


@require_safe
@dashboard_view
def overview(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    access = _get_context_for_user(request, ctx)
    asked = request.GET.get("days", "")
    days = int(asked) if asked in {str(r) for r in CHART_RANGES} else 30
    series = drift_series(access=access, days=days)
    chart = {
        "days": days,
        "ranges": CHART_RANGES,
        "svg": drift_chart_svg(series),
        "new": sum(d.new for d in series),
        "resolved": sum(d.resolved for d in series),
    }
    if wants_partial(request):  # only the chart changes with the range
        return render_screen(
            request,
            "curation/overview.html",
            access,
            {"chart": chart},
            section="overview",
            partial="chart",
        )
    counts, health = overview_read(access=access)
    runs = list(run_list(access=access)[:RECENT_RUNS])
    # Until these are 0, vector and hybrid search miss those rows.
    waiting = embedding_backlog(context=access.context, visible=access.grants.read_q())
    backlog = {"total": sum(waiting.values()), "targets": [(t, n) for t, n in waiting.items() if n]}
    return render_screen(
        request,
        "curation/overview.html",
        access,
        {"counts": counts, "health": health, "runs": runs, "chart": chart, "backlog": backlog},
        section="overview",
    )
