"""Pictures drawn on the server as inline SVG: no script, no external assets.

Every piece of text placed in the markup goes through ``escape``; numbers are formatted
by us. The functions return SafeString so templates can insert them as they are.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from memory.selectors.overview import DriftDay

MAX_NEIGHBOURS = 16
TYPE_COLOURS = {
    "person": "#2f5bd3",
    "organisation": "#0f7b6c",
    "project": "#8a4fd1",
    "location": "#b8651b",
    "topic": "#5f6b7a",
    "product": "#c2185b",
    "policy": "#6d4c41",
    "concept": "#00838f",
    "event": "#d84315",
    "agent": "#37474f",
    "service": "#455a64",
    "other": "#78909c",
}


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


# --- an entity's neighbourhood --------------------------------------------------------


@dataclass
class Neighbour:
    """One entity next to the centre, with the labels of the edges between them."""

    id: int
    name: str
    type: str
    out_labels: list[str] = field(default_factory=list)  # centre → neighbour
    in_labels: list[str] = field(default_factory=list)  # neighbour → centre

    @property
    def direction(self) -> Literal["out", "in", "both"]:
        if self.out_labels and self.in_labels:
            return "both"
        return "out" if self.out_labels else "in"

    @property
    def label(self) -> str:
        return ", ".join(dict.fromkeys([*self.out_labels, *self.in_labels]))


def neighbours_collect(
    *,
    centre_id: int,
    outgoing: Sequence[tuple[int, str, str, str]],
    incoming: Sequence[tuple[int, str, str, str]],
) -> list[Neighbour]:
    """Group edges ``(other_id, other_name, other_type, predicate)`` by neighbour, in a
    stable order (name, then id) so the same graph is always drawn the same way."""
    by_id: dict[int, Neighbour] = {}
    for edges, outward in ((outgoing, True), (incoming, False)):
        for other_id, name, type_, label in edges:
            if other_id == centre_id:
                continue  # a self-loop says nothing in a picture of neighbours
            node = by_id.setdefault(other_id, Neighbour(other_id, name, type_))
            (node.out_labels if outward else node.in_labels).append(label)
    return sorted(by_id.values(), key=lambda n: (n.name.lower(), n.id))


def neighbourhood_svg(
    *, name: str, type: str, neighbours: list[Neighbour], href: Callable[[int], str]
) -> SafeString:
    """The entity in the middle, up to MAX_NEIGHBOURS around it on a circle, each edge
    labelled with its predicates and arrowed by direction; neighbours link to their page."""
    width, height = 720, 460
    cx, cy = width / 2, height / 2
    shown = neighbours[:MAX_NEIGHBOURS]
    radius = 175.0 if len(shown) > 1 else 220.0
    parts = [
        f'<svg class="graph" viewBox="0 0 {width} {height}" role="img" '
        f'xmlns="http://www.w3.org/2000/svg" aria-labelledby="graph-title">',
        f'<title id="graph-title">{escape(name)} and {len(neighbours)} neighbouring '
        f"entities</title>",
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0 0 L10 5 L0 10 z" '
        'fill="#9aa5b1"/></marker></defs>',
    ]
    nodes: list[str] = []
    for index, node in enumerate(shown):
        angle = -math.pi / 2 + 2 * math.pi * index / len(shown) if len(shown) > 1 else 0.0
        x, y = cx + radius * math.cos(angle), cy + radius * math.sin(angle)
        parts.append(_edge(cx, cy, x, y, node))
        nodes.append(_node(x, y, node.name, node.type, href(node.id), radius=16))
    parts.extend(nodes)
    parts.append(_node(cx, cy, name, type, None, radius=26))
    if len(neighbours) > len(shown):
        parts.append(
            f'<text class="more" x="{width - 12}" y="{height - 12}" text-anchor="end">'
            f"+{len(neighbours) - len(shown)} more not drawn</text>"
        )
    if not neighbours:
        parts.append(
            f'<text class="more" x="{_num(cx)}" y="{_num(cy + 60)}" text-anchor="middle">'
            "No relations to other entities yet</text>"
        )
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 — every text above is escaped


def _edge(cx: float, cy: float, x: float, y: float, node: Neighbour) -> str:
    # Stop the line at both circles' edges so the arrowheads stay visible.
    dx, dy = x - cx, y - cy
    length = math.hypot(dx, dy) or 1.0
    ux, uy = dx / length, dy / length
    x1, y1 = cx + ux * 28, cy + uy * 28
    x2, y2 = x - ux * 18, y - uy * 18
    markers = {
        "out": 'marker-end="url(#arrow)"',
        "in": 'marker-start="url(#arrow)"',
        "both": 'marker-start="url(#arrow)" marker-end="url(#arrow)"',
    }[node.direction]
    label = escape(_short(node.label, 28))
    mx, my = (x1 + x2) / 2, (y1 + y2) / 2
    box = 6.4 * min(len(node.label), 28) + 10
    return (
        f'<g class="edge"><line x1="{_num(x1)}" y1="{_num(y1)}" x2="{_num(x2)}" '
        f'y2="{_num(y2)}" {markers}/>'
        f'<rect x="{_num(mx - box / 2)}" y="{_num(my - 9)}" width="{_num(box)}" height="18" '
        f'rx="4"/><text x="{_num(mx)}" y="{_num(my + 4)}" text-anchor="middle">{label}</text>'
        f"<title>{escape(node.label)}</title></g>"
    )


def _node(x: float, y: float, name: str, type_: str, link: str | None, *, radius: int) -> str:
    colour = TYPE_COLOURS.get(type_, TYPE_COLOURS["other"])
    below = y + radius + 15
    body = (
        f'<circle cx="{_num(x)}" cy="{_num(y)}" r="{radius}" fill="{colour}"/>'
        f'<text class="node-label" x="{_num(x)}" y="{_num(below)}" text-anchor="middle">'
        f"{escape(_short(name, 26))}</text>"
        f"<title>{escape(name)} ({escape(type_)})</title>"
    )
    if link is None:
        return f'<g class="node centre">{body}</g>'
    return f'<a class="node" href="{escape(link)}">{body}</a>'


# --- drift over time ------------------------------------------------------------------


def drift_chart_svg(series: list[DriftDay]) -> SafeString:
    """Paired bars per day: predicates first seen (new drift) and drift resolved."""
    width, height = 960, 170
    left, right, top, bottom = 36, 12, 12, 28
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max([1, *(d.new for d in series), *(d.resolved for d in series)])
    step = plot_w / max(len(series), 1)
    bar = max(step / 2 - 1.5, 1.0)
    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" '
        'xmlns="http://www.w3.org/2000/svg" aria-labelledby="chart-title">',
        f'<title id="chart-title">Drift per day over the last {len(series)} days</title>',
        f'<line class="axis" x1="{left}" y1="{top + plot_h}" x2="{width - right}" '
        f'y2="{top + plot_h}"/>',
        f'<text class="tick" x="{left - 6}" y="{top + 8}" text-anchor="end">{peak}</text>',
        f'<text class="tick" x="{left - 6}" y="{top + plot_h}" text-anchor="end">0</text>',
    ]
    for index, day in enumerate(series):
        x = left + index * step + 1
        for offset, value, css in ((0.0, day.new, "new"), (bar, day.resolved, "resolved")):
            h = plot_h * value / peak
            parts.append(
                f'<rect class="{css}" x="{_num(x + offset)}" y="{_num(top + plot_h - h)}" '
                f'width="{_num(bar)}" height="{_num(h)}"><title>{day.day:%d %b}: {value} '
                f"{'new' if css == 'new' else 'resolved'}</title></rect>"
            )
    if series:
        parts.append(
            f'<text class="tick" x="{left}" y="{height - 8}">{series[0].day:%d %b}</text>'
            f'<text class="tick" x="{width - right}" y="{height - 8}" text-anchor="end">'
            f"{series[-1].day:%d %b}</text>"
        )
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 — only numbers and dates are interpolated
