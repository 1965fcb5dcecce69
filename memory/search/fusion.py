"""Reciprocal rank fusion (Cormack, Clarke & Büttcher 2009) with k = 60."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

RRF_K = 60
Ref = TypeVar("Ref", bound=Hashable)


def rrf_fuse(rankings: Sequence[Sequence[Ref]], *, k: int = RRF_K) -> dict[Ref, float]:
    """Each id's fused score Σ 1 / (k + rank) over the rankings it appears in (rank from 1)."""
    fused: dict[Ref, float] = {}
    for ranking in rankings:
        for rank, ref_id in enumerate(ranking, start=1):
            fused[ref_id] = fused.get(ref_id, 0.0) + 1.0 / (k + rank)
    return fused
