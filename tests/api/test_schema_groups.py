"""Swagger UI groups the operations by resource, each with a one-line summary."""

from __future__ import annotations

from collections import Counter
from typing import Any

from memory.api.schema import resource_tag

METHODS = ("get", "post", "put", "patch", "delete")


def _operations(openapi: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, op)
        for path, item in openapi["paths"].items()
        for method, op in item.items()
        if method in METHODS
    ]


def test_every_operation_has_one_resource_tag_and_a_one_line_summary(
    openapi: dict[str, Any],
) -> None:
    operations = _operations(openapi)
    assert len(operations) > 40
    tags = Counter(op["tags"][0] for _, _, op in operations)
    assert len(tags) > 10, tags
    assert all(len(op["tags"]) == 1 for _, _, op in operations)
    declared = [tag["name"] for tag in openapi["tags"]]
    assert set(tags) <= set(declared), set(tags) - set(declared)  # each group described
    summaries = {(method, path): op.get("summary", "") for method, path, op in operations}
    missing = [key for key, summary in summaries.items() if not summary]
    assert missing == []
    assert all("\n" not in s and len(s) <= 80 for s in summaries.values()), summaries
    assert len(set(summaries.values())) == len(summaries)  # each says what it alone does


def test_an_operation_is_grouped_under_the_resource_its_path_names(
    openapi: dict[str, Any],
) -> None:
    facts = openapi["paths"]["/api/v1/contexts/{ctx}/facts/{fact_id}"]["delete"]
    assert facts["tags"] == ["facts"]
    assert facts["summary"] == "Retract a fact (kept in history)"
    undo = openapi["paths"]["/api/v1/contexts/{ctx}/merges/{merge_id}/undo"]["post"]
    assert undo["tags"] == ["entities"]  # a merge is undone where entities are merged
    assert resource_tag("/api/v1/contexts") == "contexts"
    assert resource_tag("/api/v1/contexts/{ctx}") == "contexts"
    assert resource_tag("/api/v1/health") == "health"
    assert resource_tag("/api/v1/contexts/{ctx}/runs/{run_id}/retry") == "runs"
