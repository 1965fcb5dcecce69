"""The merge preview through the services: the facts that move, and scope branches."""

from __future__ import annotations

from memory.domain.access import ContextAccess
from memory.services.entities.writes import entity_upsert
from memory.services.facts.write import fact_write
from memory.services.merges.merge import entity_merge_preview
from memory.services.merges.plan import scope_branches


def test_scopes_on_one_line_of_ancestry_are_one_branch() -> None:
    assert scope_branches(["org/a", "org/a/x", "org/a/x/y"]) == []
    assert scope_branches(["org/a", "org/a"]) == []
    assert scope_branches(["org/a/x", "org/a/y", "org/a"]) == ["org/a", "org/a/x", "org/a/y"]
    assert scope_branches(["org/ab", "org/a"]) == ["org/a", "org/ab"]  # a prefix, not a parent


def test_the_preview_names_each_moving_fact_and_the_branches(access: ContextAccess) -> None:
    keep = entity_upsert(access=access, name="Jo Park", type="person", scope="org/a").entity
    gone = entity_upsert(access=access, name="Jo Parke", type="person", scope="org/b").entity
    fact_write(access=access, subject=keep, predicate="current_title", value="CTO")
    fact_write(access=access, subject=gone, predicate="current_title", value="CEO", confidence=0.5)
    fact_write(access=access, subject=gone, predicate="knows", object=keep)
    plan = entity_merge_preview(access=access, survivor_id=keep.pk, merged_ids=[gone.pk])
    fates = {(f["predicate"], f["object"]): f["fate"] for f in plan.facts}
    assert fates[("knows", "Jo Park")].startswith("retracted")
    # Facts keep their scope: a value in org/b does not meet the survivor's in org/a.
    assert fates[("current_title", "CEO")] == "moves"
    assert plan.scope_branches == ["org/a", "org/b"]
