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

MAX_NEIGHBOURS = 50
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


# Edge colours, one per predicate group (largest group first); later groups share grey.
GROUP_COLOURS = (
    "#2f5bd3", "#0f7b6c", "#c2185b", "#b8651b", "#8a4fd1",
    "#00838f", "#d84315", "#6d4c41", "#558b2f", "#37474f",
)  # fmt: skip
OTHER_COLOUR = "#b0b8c1"
LABEL_FONT = 11  # px, node labels
LABEL_CHARS = 24
LABEL_GAP = LABEL_FONT + 3  # the least vertical distance between two labels' baselines
CHAR_WIDTH = 0.62 * LABEL_FONT  # a generous average for the sans-serif label font


@dataclass(frozen=True)
class LabelBox:
    """Where a label's text sits (for the overlap check): left, top, right, bottom."""

    text: str
    left: float
    top: float
    right: float
    bottom: float

    def overlaps(self, other: LabelBox) -> bool:
        return not (
            self.right <= other.left
            or other.right <= self.left
            or self.bottom <= other.top
            or other.bottom <= self.top
        )


@dataclass(frozen=True)
class Group:
    """Neighbours joined to the centre by the same predicate in the same direction."""

    predicate: str
    direction: Literal["out", "in"]
    colour: str
    members: list[Neighbour]

    @property
    def legend(self) -> str:
        arrow = "→" if self.direction == "out" else "←"
        return f"{arrow} {self.predicate} ({len(self.members)})"


def neighbour_groups(neighbours: Sequence[Neighbour]) -> list[Group]:
    """Group by each neighbour's first predicate (out before in), largest group first."""
    by_key: dict[tuple[str, str], list[Neighbour]] = {}
    for node in neighbours:
        key = (node.out_labels[0], "out") if node.out_labels else (node.in_labels[0], "in")
        by_key.setdefault(key, []).append(node)
    ordered = sorted(by_key.items(), key=lambda item: (-len(item[1]), item[0]))
    return [
        Group(
            predicate=predicate,
            direction=direction,  # type: ignore[arg-type]
            colour=GROUP_COLOURS[i] if i < len(GROUP_COLOURS) else OTHER_COLOUR,
            members=members,
        )
        for i, ((predicate, direction), members) in enumerate(ordered)
    ]


def _spread(wanted: list[float], low: float, high: float) -> list[float]:
    """Baselines as close to ``wanted`` (ascending) as they can be, at least LABEL_GAP
    apart and within [low, high]: pushed down past each other, then back up from the end."""
    placed: list[float] = []
    for y in wanted:
        placed.append(max(y, low, placed[-1] + LABEL_GAP if placed else low))
    for i in range(len(placed) - 1, -1, -1):
        ceiling = high if i == len(placed) - 1 else placed[i + 1] - LABEL_GAP
        placed[i] = min(placed[i], ceiling)
    return placed


@dataclass
class _Placed:
    node: Neighbour
    group: Group
    x: float
    y: float
    label_x: float = 0.0
    label_y: float = 0.0
    right: bool = True


def neighbourhood_layout(
    neighbours: Sequence[Neighbour],
) -> tuple[list[_Placed], list[Group], float, float]:
    """Nodes on a circle, a predicate's neighbours side by side; each label in a column
    beside the circle (right half to the right, left half to the left), spread so no two
    overlap, with a leader line to its node. Returns the nodes, the groups, the circle's
    height and the picture's width."""
    shown = list(neighbours[:MAX_NEIGHBOURS])
    groups = neighbour_groups(shown)
    ordered = [(member, group) for group in groups for member in group.members]
    per_side = max(1, math.ceil(len(ordered) / 2))
    radius = max(150.0, min(230.0, per_side * LABEL_GAP / 2.2))
    label_width = LABEL_CHARS * CHAR_WIDTH
    width = 2 * (radius + 40 + label_width) + 20
    height = max(2 * radius + 90, per_side * LABEL_GAP + 60)
    cx, cy = width / 2, height / 2
    placed: list[_Placed] = []
    count = len(ordered)
    for index, (node, group) in enumerate(ordered):
        # Start at the top and go clockwise; a half step keeps nodes off the vertical axis.
        angle = -math.pi / 2 + 2 * math.pi * (index + 0.5) / count if count > 1 else 0.0
        placed.append(
            _Placed(node, group, cx + radius * math.cos(angle), cy + radius * math.sin(angle))
        )
    for right in (True, False):
        side = sorted((p for p in placed if (p.x >= cx) == right), key=lambda p: p.y)
        ys = _spread([p.y + LABEL_FONT / 3 for p in side], 20.0, height - 12)
        for item, y in zip(side, ys, strict=True):
            item.right = right
            item.label_y = y
            item.label_x = cx + radius + 34 if right else cx - radius - 34
    return placed, groups, height, width


def label_boxes(placed: Sequence[_Placed]) -> list[LabelBox]:
    """The boxes the neighbour labels occupy (estimated text widths)."""
    boxes = []
    for item in placed:
        text = _short(item.node.name, LABEL_CHARS)
        width = len(text) * CHAR_WIDTH
        left = item.label_x if item.right else item.label_x - width
        top = item.label_y - LABEL_FONT * 0.8
        boxes.append(LabelBox(text, left, top, left + width, top + LABEL_FONT))
    return boxes


def neighbourhood_svg(
    *, name: str, type: str, neighbours: list[Neighbour], href: Callable[[int], str]
) -> SafeString:
    """The entity in the middle and up to MAX_NEIGHBOURS around it, a predicate's
    neighbours side by side with edges in its colour; a legend names the colours (with
    the direction and how many), labels sit in columns that never overlap, and a note
    counts the neighbours not drawn. Neighbours link to their page."""
    placed, groups, circle_height, width = neighbourhood_layout(neighbours)
    legend_columns = 3
    legend_rows = math.ceil(len(groups) / legend_columns)
    height = circle_height + (legend_rows * 20 + 24 if groups else 0) + 20
    cx, cy = width / 2, circle_height / 2
    parts = [
        # width and height: its size at 1:1, which a phone keeps (scrolling it sideways)
        # so the labels stay readable; a wider screen scales it to the card (CSS).
        f'<svg class="graph" viewBox="0 0 {_num(width)} {_num(height)}" '
        f'width="{_num(width)}" height="{_num(height)}" role="img" '
        f'xmlns="http://www.w3.org/2000/svg" aria-labelledby="graph-title">',
        f'<title id="graph-title">{escape(name)} and {len(neighbours)} neighbouring '
        f"entities</title>",
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" '
        'markerHeight="6" orient="auto-start-reverse"><path d="M0 0 L10 5 L0 10 z" '
        'fill="#7b8794"/></marker></defs>',
    ]
    small = len(placed) > 16
    node_radius = 7 if small else 12
    for item in placed:
        parts.append(_edge(cx, cy, item, node_radius))
    for item in placed:
        parts.append(_neighbour(item, href(item.node.id), node_radius))
    parts.append(_centre(cx, cy, name, type))
    if groups:
        top = circle_height + 14
        column_width = width / legend_columns
        parts.append('<g class="legend">')
        for index, group in enumerate(groups):
            x = 14 + (index % legend_columns) * column_width
            y = top + (index // legend_columns) * 20
            parts.append(
                f'<rect x="{_num(x)}" y="{_num(y)}" width="14" height="4" rx="2" '
                f'fill="{group.colour}"/><text x="{_num(x + 20)}" y="{_num(y + 6)}">'
                f"{escape(_short(group.legend, 34))}</text>"
            )
        parts.append("</g>")
    hidden = len(neighbours) - len(placed)
    if hidden > 0:
        parts.append(
            f'<text class="more" x="{_num(width - 12)}" y="{_num(height - 8)}" '
            f'text-anchor="end">{hidden} more not drawn</text>'
        )
    if not neighbours:
        parts.append(
            f'<text class="more" x="{_num(cx)}" y="{_num(cy + 60)}" text-anchor="middle">'
            "No relations to other entities yet</text>"
        )
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 — every text above is escaped


def _edge(cx: float, cy: float, item: _Placed, node_radius: int) -> str:
    # Stop the line at both circles' edges so the arrowheads stay visible.
    dx, dy = item.x - cx, item.y - cy
    length = math.hypot(dx, dy) or 1.0
    ux, uy = dx / length, dy / length
    x1, y1 = cx + ux * 24, cy + uy * 24
    x2, y2 = item.x - ux * (node_radius + 2), item.y - uy * (node_radius + 2)
    markers = {
        "out": 'marker-end="url(#arrow)"',
        "in": 'marker-start="url(#arrow)"',
        "both": 'marker-start="url(#arrow)" marker-end="url(#arrow)"',
    }[item.node.direction]
    return (
        f'<line class="edge" x1="{_num(x1)}" y1="{_num(y1)}" x2="{_num(x2)}" y2="{_num(y2)}" '
        f'stroke="{item.group.colour}" {markers}><title>{escape(item.node.label)}</title></line>'
    )


def _neighbour(item: _Placed, link: str, node_radius: int) -> str:
    colour = TYPE_COLOURS.get(item.node.type, TYPE_COLOURS["other"])
    anchor = "start" if item.right else "end"
    # The leader runs from the node to just before its label's text.
    end_x = item.label_x - 4 if item.right else item.label_x + 4
    start_x = item.x + (node_radius if item.right else -node_radius)
    return (
        f'<a class="node" href="{escape(link)}">'
        f'<polyline class="leader" points="{_num(start_x)},{_num(item.y)} '
        f"{_num(end_x - (10 if item.right else -10))},{_num(item.label_y - LABEL_FONT / 3)} "
        f'{_num(end_x)},{_num(item.label_y - LABEL_FONT / 3)}"/>'
        f'<circle cx="{_num(item.x)}" cy="{_num(item.y)}" r="{node_radius}" fill="{colour}"/>'
        f'<text class="node-label" x="{_num(item.label_x)}" y="{_num(item.label_y)}" '
        f'text-anchor="{anchor}">{escape(_short(item.node.name, LABEL_CHARS))}</text>'
        f"<title>{escape(item.node.name)} ({escape(item.node.type)}): "
        f"{escape(item.node.label)}</title></a>"
    )


def _centre(cx: float, cy: float, name: str, type_: str) -> str:
    colour = TYPE_COLOURS.get(type_, TYPE_COLOURS["other"])
    return (
        f'<g class="node centre"><circle cx="{_num(cx)}" cy="{_num(cy)}" r="20" '
        f'fill="{colour}"/><text class="node-label centre-label" x="{_num(cx)}" '
        f'y="{_num(cy + 36)}" text-anchor="middle">{escape(_short(name, 26))}</text>'
        f"<title>{escape(name)} ({escape(type_)})</title></g>"
    )


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
