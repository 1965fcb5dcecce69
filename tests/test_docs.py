"""The documents an adopter reads: their links resolve, they name no machine's folders and
no text the repository does not ship, the benchmark goals fit a line, the decision records
share one shape and their index lists them all."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted(
    [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *(ROOT / "docs").rglob("*.md")]
)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# Folders of a development machine, and the product contract kept outside the repository.
FOREIGN = re.compile(r"/work/|/home/|/Users/|\.\./shared|SPEC §|\bthe SPEC\b")
DECISIONS = ROOT / "docs" / "decisions"


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("doc", DOCS, ids=_name)
def test_relative_links_resolve(doc: Path) -> None:
    broken = []
    for target in LINK.findall(doc.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a URL or an anchor on the same page
        path = (doc.parent / target.split("#", 1)[0]).resolve()
        if not path.exists() or ROOT not in path.parents:
            broken.append(target)
    assert broken == []


@pytest.mark.parametrize("doc", DOCS, ids=_name)
def test_no_machine_paths_or_unshipped_references(doc: Path) -> None:
    lines = [line for line in doc.read_text().splitlines() if FOREIGN.search(line)]
    assert lines == []


def test_benchmark_goals_fit_a_line_each() -> None:
    text = (ROOT / "docs" / "BENCHMARKS.md").read_text()
    goals = text.split("\n## Goals\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in goals.splitlines() if line.startswith("|")]
    assert len(rows) > 10
    assert [row for row in rows if len(row) > 160] == []
    assert all(row.count("|") == 5 for row in rows)  # goal, latest, met?, command


def test_decision_records_share_one_heading_shape() -> None:
    for record in sorted(DECISIONS.glob("[0-9][0-9][0-9][0-9]-*.md")):
        lines = record.read_text().splitlines()
        assert re.fullmatch(rf"# {record.name[:4]} — \S.*", lines[0]), record.name
        assert lines[1] == "" and lines[2].startswith("Status: "), record.name


def test_decision_index_lists_every_record() -> None:
    index = (DECISIONS / "README.md").read_text()
    listed = set(re.findall(r"\]\((\d{4}-[^)]+\.md)\)", index))
    assert listed == {p.name for p in DECISIONS.glob("[0-9][0-9][0-9][0-9]-*.md")}
