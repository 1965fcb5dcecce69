"""The items a curator browses: the namespace tree with its counts, one namespace's items
a page at a time, and one item with what it extracted.

Every read sees only live items whose namespace the caller's grants read (as the API's
reads, ``memory.selectors.items``); an item outside them, expired or deleted is not found.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import Count, QuerySet

from memory.domain.access import ContextAccess
from memory.domain.namespaces import Namespace, namespace_scope, scope_namespace
from memory.kernel.errors import NotFound
from memory.models import Fact, Item, Run, Turn
from memory.selectors.facts import facts_visible
from memory.selectors.items import items_visible, namespace_prefix_q

# The tree reads at most this many namespaces (in order); a context with more says so.
TREE_NAMESPACES = 2000
# An item's page lists at most this many of the facts it extracted.
EXTRACTED_SHOWN = 200
# The columns of a namespace's list of items (its values only as a preview).
_LIST_FIELDS = ("id", "namespace", "key", "value", "updated_at", "expires_at", "turn_id")


@dataclass
class NamespaceNode:
    """One namespace of the tree: the items in it and in every namespace below it."""

    namespace: Namespace
    items: int = 0
    total: int = 0
    children: list[Namespace] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.namespace[-1]

    @property
    def depth(self) -> int:
        return len(self.namespace)


@dataclass
class NamespaceTree:
    """The nodes to draw: the top namespaces, and the children of each namespace on the
    way to the selected one (its own included), depth first in label order."""

    shown: list[NamespaceNode]
    selected: NamespaceNode | None
    items: int  # live items the caller reads (of the namespaces read)
    namespaces: int  # namespaces holding items
    truncated: bool  # more namespaces hold items than the tree reads


def namespace_tree(*, access: ContextAccess, selected: Namespace = ()) -> NamespaceTree:
    """One query: the namespaces holding the caller's live items, with their counts.
    NotFound when ``selected`` holds no item the caller reads, in it or below it."""
    # Grouped by the scope, which spells the namespace one-to-one: a hash of short text
    # rather than a sort of arrays (half the time at 100k items).
    rows = list(
        items_visible(access)
        .values_list("scope")
        .annotate(n=Count("*"))  # count(*): no column the index lacks
        .order_by("scope")[: TREE_NAMESPACES + 1]
    )
    truncated = len(rows) > TREE_NAMESPACES
    nodes: dict[Namespace, NamespaceNode] = {(): NamespaceNode(())}
    children: dict[Namespace, set[Namespace]] = defaultdict(set)
    for scope, n in rows[:TREE_NAMESPACES]:
        namespace = scope_namespace(scope)
        for depth in range(len(namespace) + 1):
            prefix = namespace[:depth]
            node = nodes.setdefault(prefix, NamespaceNode(prefix))
            node.total += n
            if depth:
                children[namespace[: depth - 1]].add(prefix)
        nodes[namespace].items += n
    for prefix, below in children.items():
        nodes[prefix].children = sorted(below)
    chosen = nodes.get(selected) if selected else None
    if selected and chosen is None:
        chosen = _beyond_the_tree(access, selected) if truncated else None
        if chosen is None:
            raise NotFound(
                f"no items under the namespace {' / '.join(selected)[:200]!r}",
                code="namespace_not_found",
            )
    shown: list[NamespaceNode] = []
    _walk(nodes, (), selected, shown)
    return NamespaceTree(
        shown=shown,
        selected=chosen,
        items=nodes[()].total,
        namespaces=min(len(rows), TREE_NAMESPACES),
        truncated=truncated,
    )


def _walk(
    nodes: dict[Namespace, NamespaceNode],
    at: Namespace,
    selected: Namespace,
    shown: list[NamespaceNode],
) -> None:
    for child in nodes[at].children:
        shown.append(nodes[child])
        if selected[: len(child)] == child:
            _walk(nodes, child, selected, shown)


def _beyond_the_tree(access: ContextAccess, selected: Namespace) -> NamespaceNode | None:
    """A namespace past the tree's reach: counted on its own."""
    under = items_visible(access).filter(namespace_prefix_q(selected))
    total = under.count()
    if not total:
        return None
    return NamespaceNode(
        selected, items=under.filter(namespace=list(selected)).count(), total=total
    )


def namespace_nearest_held(*, access: ContextAccess, namespace: Namespace) -> Namespace:
    """``namespace`` if the caller reads items in it or below it, else the nearest
    namespace above it that holds some; () when none does."""
    for depth in range(len(namespace), 0, -1):
        if items_visible(access).filter(namespace_prefix_q(namespace[:depth])).exists():
            return namespace[:depth]
    return ()


def namespace_items(*, access: ContextAccess, namespace: Namespace) -> QuerySet[Item]:
    """The live items in ``namespace`` itself that the caller reads, by key."""
    return (
        items_visible(access)
        .filter(scope=namespace_scope(namespace), namespace=list(namespace))
        .only(*_LIST_FIELDS)
        .order_by("key", "id")
    )


def value_preview(item: Item, limit: int = 160) -> str:
    """The value as one line of JSON, cut to ``limit`` characters."""
    text = json.dumps(item.value, ensure_ascii=False, separators=(", ", ": "))
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class ItemPage:
    item: Item
    value_json: str  # the value pretty-printed, as stored
    turn: Turn | None
    run: Run | None
    facts: list[Fact]
    facts_total: int


def item_page(*, access: ContextAccess, item_id: int) -> ItemPage:
    """A live item the caller reads, with the turn, run and facts of its extraction;
    NotFound otherwise."""
    item = items_visible(access).defer("embedding").filter(pk=item_id).first()
    if item is None:
        raise NotFound(f"item {item_id} not found", code="item_not_found")
    turn = Turn.objects.defer("embedding").filter(pk=item.turn_id).first() if item.turn_id else None
    run_id = turn.run_id if turn is not None and turn.run_id else item.run_id
    run = Run.objects.defer("input_payload").filter(pk=run_id).first() if run_id else None
    facts: list[Fact] = []
    total = 0
    if turn is not None:
        extracted = facts_visible(access=access).filter(turn=turn)
        facts = list(
            extracted.select_related("subject", "object", "predicate")
            .defer("subject__embedding", "object__embedding")
            .order_by("pk")[:EXTRACTED_SHOWN]
        )
        total = len(facts) if len(facts) < EXTRACTED_SHOWN else extracted.count()
    return ItemPage(
        item=item,
        value_json=json.dumps(item.value, indent=2, ensure_ascii=False),
        turn=turn,
        run=run,
        facts=facts,
        facts_total=total,
    )


def item_of_turn(*, access: ContextAccess, turn_id: int) -> Item | None:
    """The live item the caller reads whose extraction read this turn, if any."""
    return (
        items_visible(access)
        .filter(turn_id=turn_id)
        .only("id", "namespace", "key", "scope", "turn_id")
        .first()
    )
