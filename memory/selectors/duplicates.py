"""Duplicate clusters as a curator sees them: open pairs between live entities the
caller may read, joined into clusters (connected components), best first."""

from __future__ import annotations

from dataclasses import dataclass, field

from memory.access import ContextAccess
from memory.models import Entity
from memory.models.duplicate import DuplicateCandidate, DuplicateStatus


@dataclass
class DuplicateCluster:
    members: list[Entity]
    score: float
    methods: list[str]
    pairs: list[DuplicateCandidate] = field(default_factory=list)


def duplicate_clusters(
    *, access: ContextAccess, min_score: float = 0.0, limit: int = 200
) -> list[DuplicateCluster]:
    readable = access.grants.read_q("entity_a__scope") & access.grants.read_q("entity_b__scope")
    pairs = list(
        DuplicateCandidate.objects.filter(
            readable,
            context=access.context,
            status=DuplicateStatus.OPEN,
            score__gte=min_score,
            entity_a__merged_into__isnull=True,
            entity_b__merged_into__isnull=True,
        )
        .select_related("entity_a", "entity_b")
        .defer("entity_a__embedding", "entity_b__embedding")
        .order_by("-score", "pk")
    )
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for pair in pairs:
        parent[find(pair.entity_a_id)] = find(pair.entity_b_id)
    clusters: dict[int, DuplicateCluster] = {}
    for pair in pairs:
        root = find(pair.entity_a_id)
        cluster = clusters.setdefault(root, DuplicateCluster(members=[], score=0.0, methods=[]))
        for entity in (pair.entity_a, pair.entity_b):
            if all(m.pk != entity.pk for m in cluster.members):
                cluster.members.append(entity)
        cluster.score = max(cluster.score, pair.score)
        cluster.methods = sorted(set(cluster.methods) | set(pair.methods))
        cluster.pairs.append(pair)
    ranked = sorted(clusters.values(), key=lambda c: (-c.score, min(m.pk for m in c.members)))
    for cluster in ranked:
        # The entity most others point at first: the natural survivor suggestion.
        cluster.members.sort(key=lambda e: (not e.seeded, -len(e.aliases), e.pk))
    return ranked[:limit]
