"""The server-drawn pictures: deterministic, escaped, bounded."""

from __future__ import annotations

from datetime import date

from django.utils.html import escape

from curation.selectors import DriftDay
from curation.svg import (
    MAX_NEIGHBOURS,
    Neighbour,
    drift_chart_svg,
    label_boxes,
    neighbourhood_layout,
    neighbourhood_svg,
    neighbours_collect,
)


def _href(pk: int) -> str:
    return f"/e/{pk}/"


def test_neighbours_are_grouped_and_sorted_with_directions() -> None:
    neighbours = neighbours_collect(
        centre_id=1,
        outgoing=[(3, "Zed", "person", "knows"), (2, "Acme", "organisation", "works_at")],
        incoming=[(3, "Zed", "person", "manages"), (1, "Self", "person", "likes")],
    )

    assert [(n.name, n.direction, n.label) for n in neighbours] == [
        ("Acme", "out", "works_at"),
        ("Zed", "both", "knows, manages"),
    ]


def test_the_same_graph_is_drawn_the_same_way() -> None:
    edges = [(i, f"N{i}", "person", "knows") for i in range(2, 8)]
    first = neighbourhood_svg(
        name="C",
        type="person",
        neighbours=neighbours_collect(centre_id=1, outgoing=edges, incoming=[]),
        href=_href,
    )
    second = neighbourhood_svg(
        name="C",
        type="person",
        neighbours=neighbours_collect(centre_id=1, outgoing=list(reversed(edges)), incoming=[]),
        href=_href,
    )

    assert first == second
    assert first.count('<a class="node"') == 6


def test_text_is_escaped() -> None:
    neighbours = neighbours_collect(
        centre_id=1, outgoing=[(2, '<img src=x onerror="1">', "person", "a<b")], incoming=[]
    )

    svg = neighbourhood_svg(name="</svg><script>", type="person", neighbours=neighbours, href=_href)

    assert "<script>" not in svg and "<img" not in svg and "</svg><" not in svg[:-6]
    assert "&lt;/svg&gt;&lt;script&gt;" in svg and "a&lt;b" in svg


def test_many_neighbours_are_capped_with_a_note() -> None:
    edges = [(i, f"N{i:02}", "topic", "about") for i in range(2, 62)]
    neighbours = neighbours_collect(centre_id=1, outgoing=edges, incoming=[])

    svg = neighbourhood_svg(name="C", type="topic", neighbours=neighbours, href=_href)

    assert svg.count('<a class="node"') == MAX_NEIGHBOURS == 50
    assert "10 more not drawn" in svg


def _fifty() -> list[Neighbour]:
    predicates = ["works_with", "knows", "reports_to", "mentored", "member_of", "located_in"]
    outgoing = [
        (i, f"Colleague number {i} with a long name", "person", predicates[i % 6])
        for i in range(2, 40)
    ]
    incoming = [(i, f"Organisation {i}", "organisation", "employs") for i in range(40, 52)]
    return neighbours_collect(centre_id=1, outgoing=outgoing, incoming=incoming)


def test_fifty_neighbours_have_labels_that_never_overlap() -> None:
    placed, _, _, width = neighbourhood_layout(_fifty())
    boxes = label_boxes(placed)

    assert len(boxes) == 50
    for i, box in enumerate(boxes):
        assert box.left >= 0 and box.right <= width
        for other in boxes[i + 1 :]:
            assert not box.overlaps(other), (box, other)


def test_edges_are_grouped_by_predicate_with_a_legend() -> None:
    neighbours = _fifty()
    placed, groups, _, _ = neighbourhood_layout(neighbours)
    svg = neighbourhood_svg(name="C", type="person", neighbours=neighbours, href=_href)

    # A group's members sit next to each other round the circle.
    order = [item.group.predicate for item in placed]
    assert [g.predicate for g in groups] == list(dict.fromkeys(order))
    assert groups[0].legend == "← employs (12)"
    for group in groups:
        assert escape(group.legend) in svg
        assert svg.count(f'stroke="{group.colour}"') == len(group.members)
    assert '<g class="legend">' in svg


def test_an_entity_without_relations_says_so() -> None:
    svg = neighbourhood_svg(name="Alone", type="person", neighbours=[], href=_href)

    assert "No relations to other entities yet" in svg


def test_drift_chart_has_two_bars_per_day_scaled_to_the_peak() -> None:
    series = [DriftDay(date(2025, 1, d), new=d % 3, resolved=1) for d in range(1, 8)]

    svg = drift_chart_svg(series)

    assert svg.count('<rect class="new"') == 7 and svg.count('<rect class="resolved"') == 7
    assert "01 Jan" in svg and "07 Jan" in svg
    assert ">2</text>" in svg  # the peak labels the axis
