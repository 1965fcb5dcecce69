"""Duplicate clusters as a curator sees them: open pairs between live entities the
caller may read, joined into clusters whose members are pairwise candidates, best
first."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from memory.domain.access import ContextAccess
from memory.infra.queueing import DUPLICATES_SCAN_TASK
from memory.models import Entity
from memory.models.duplicate import DuplicateCandidate, DuplicateStatus


@dataclass
class DuplicateCluster:
    members: list[Entity]
    score: float
    methods: list[str]
    pairs: list[DuplicateCandidate] = field(default_factory=list)


@dataclass
class _Component:
    ids: set[int] = field(default_factory=set)
    pair_ids: list[int] = field(default_factory=list)
    score: float = 0.0


def duplicate_clusters(
    *, access: ContextAccess, min_score: float = 0.0, limit: int = 200
) -> list[DuplicateCluster]:
    return duplicate_cluster_page(access=access, min_score=min_score, limit=limit)[0]


def duplicate_cluster_page(
    *, access: ContextAccess, min_score: float = 0.0, offset: int = 0, limit: int = 200
) -> tuple[list[DuplicateCluster], int]:
    """Clusters ``offset`` to ``offset + limit`` of the ranking, and how many there are
    (queries: every open pair as plain numbers; the shown clusters' entities; their
    pairs, with the methods that found them and their explanations).

    A cluster never chains: it is offered only when every two of its members are an open
    pair (``_cliques``); a group linked through weak links is split into its strongest
    pairs. Clustering needs every open pair, but only as numbers: entities and pair rows
    are loaded for the clusters shown.
    """
    readable = access.grants.read_q("entity_a__scope") & access.grants.read_q("entity_b__scope")
    # Merged entities are few: excluding them by id (an anti-join on a short list) beats
    # joining both entities of every open pair to read merged_into.
    merged = Entity.objects.filter(context=access.context, merged_into__isnull=False).values("pk")
    pairs = (
        DuplicateCandidate.objects.filter(
            readable, context=access.context, status=DuplicateStatus.OPEN, score__gte=min_score
        )
        .exclude(entity_a_id__in=merged)
        .exclude(entity_b_id__in=merged)
        .values_list("pk", "entity_a_id", "entity_b_id", "score")
    )
    rows = list(pairs)
    if not rows:
        return [], 0
    table = np.array(rows, dtype=np.float64)  # ids stay exact below 2**53
    ids, ends = np.unique(table[:, 1:3].astype(np.int64), return_inverse=True)
    ends = ends.reshape(-1, 2)
    label = _components(ends[:, 0], ends[:, 1], len(ids))
    by_component: dict[int, list[tuple[int, int, int, float]]] = {}
    for (pk, a, b, score), root in zip(rows, label[ends[:, 0]].tolist(), strict=True):
        by_component.setdefault(root, []).append((pk, a, b, score))
    found = [clique for edges in by_component.values() for clique in _cliques(edges)]
    found.sort(key=lambda c: (-c.score, min(c.ids)))
    return _load(found[offset : offset + limit]), len(found)


def _cliques(edges: list[tuple[int, int, int, float]]) -> list[_Component]:
    """The group as one cluster when every two members are a pair; otherwise its
    strongest pairs, each grown by members paired with every member so far (strongest
    first): "a–b 0.9, b–c 0.8" offers a–b, not a–b–c."""
    members = {x for _, a, b, _ in edges for x in (a, b)}
    if len(edges) == len(members) * (len(members) - 1) // 2:
        return [_Component(members, [pk for pk, *_ in edges], max(s for *_, s in edges))]
    linked = {(a, b) for _, a, b, _ in edges} | {(b, a) for _, a, b, _ in edges}
    ordered = sorted(edges, key=lambda e: (-e[3], e[0]))
    home: dict[int, _Component] = {}
    out: list[_Component] = []
    for _pk, a, b, score in ordered:
        ca, cb = home.get(a), home.get(b)
        if ca is None and cb is None:
            component = _Component({a, b}, [], score)
            out.append(component)
            home[a] = home[b] = component
        elif (ca is None) != (cb is None):
            joined, newcomer = (ca, b) if ca is not None else (cb, a)
            assert joined is not None
            if all((newcomer, x) in linked for x in joined.ids):
                joined.ids.add(newcomer)
                home[newcomer] = joined
    for pk, a, b, _ in ordered:  # each cluster's pairs, strongest first
        if home.get(a) is not None and home.get(a) is home.get(b):
            home[a].pair_ids.append(pk)
    return out


def _components(
    a: npt.NDArray[np.int64], b: npt.NDArray[np.int64], n: int
) -> npt.NDArray[np.int64]:
    """Connected components of the graph with edges a[i]–b[i] over nodes 0..n-1: the
    smallest node of each component as its label (min-label hooking with pointer jumping,
    vectorized; rounds grow with the log of a cluster's diameter, not the edge count)."""
    label = np.arange(n)
    while True:
        low = np.minimum(label[a], label[b])
        hooked = label.copy()
        np.minimum.at(hooked, a, low)
        np.minimum.at(hooked, b, low)
        hooked = hooked[hooked]
        if np.array_equal(hooked, label):
            return label
        label = hooked


def _load(components: list[_Component]) -> list[DuplicateCluster]:
    entities = Entity.objects.defer("embedding").in_bulk([i for c in components for i in c.ids])
    candidates = DuplicateCandidate.objects.in_bulk([p for c in components for p in c.pair_ids])
    clusters = []
    for component in components:
        pairs = sorted(
            (candidates[p] for p in component.pair_ids if p in candidates),
            key=lambda pair: (-pair.score, pair.pk),
        )
        for pair in pairs:  # already loaded: no query per pair
            pair.entity_a = entities[pair.entity_a_id]
            pair.entity_b = entities[pair.entity_b_id]
        members = [entities[i] for i in component.ids if i in entities]
        # The entity most others point at first: the natural survivor suggestion.
        members.sort(key=lambda e: (not e.seeded, -len(e.aliases), e.pk))
        clusters.append(
            DuplicateCluster(
                members=members,
                score=component.score,
                methods=sorted({m for pair in pairs for m in pair.methods}),
                pairs=pairs,
            )
        )
    return clusters


def duplicates_scan_pending(context_id: int) -> bool:
    """Whether a scan of the context is queued or running (its task result is not
    finished; none with a backend that runs tasks at once)."""
    from django_tasks import TaskResultStatus
    from django_tasks_db.models import DBTaskResult

    return DBTaskResult.objects.filter(
        task_path=DUPLICATES_SCAN_TASK,
        status__in=[TaskResultStatus.READY, TaskResultStatus.RUNNING],
        args_kwargs__args=[context_id],
    ).exists()
