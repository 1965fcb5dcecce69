"""The searches of one memory block: the facts, chunks and turns searches of a query
share one embedding of it, and fall back to BM25 once when the embedder is down."""

from __future__ import annotations

from dataclasses import dataclass, field

from memory.domain.access import ContextAccess
from memory.kernel.errors import ServiceUnavailable
from memory.models import Turn
from memory.search.fusion import rrf_fuse
from memory.selectors.memory_context_layout import ContextLine, passage_line
from memory.selectors.search import QueryVector, SearchResponse, query_vector_start, search
from memory.selectors.search_results import result_cosine

QUERY_FACTS = 20
PASSAGES = 20  # candidates of each kind (chunks, turns); the budget decides how many fit
# Below this cosine, a passage that shares no word with the question is unrelated text
# (all-MiniLM-L6-v2 puts unrelated sentences under ~0.3).
PASSAGE_MIN_COSINE = 0.3


@dataclass
class BlockFinder:
    """Searches for the block, falling back to BM25 once if the embedder is down. The
    facts, chunks and turns searches of one query share one embedding of it."""

    access: ContextAccess
    mode: str
    notes: list[str]
    include_pending: bool = False
    vectors: dict[str, QueryVector] = field(default_factory=dict)
    hidden_passages: int = 0  # found by vector similarity alone, below the floor

    def embed_early(self, query: str) -> None:
        if self.mode != "bm25":
            self._vector(query)

    def _vector(self, query: str) -> QueryVector:
        if query not in self.vectors:
            self.vectors[query] = query_vector_start(query)
        return self.vectors[query]

    def embedding(self, query: str) -> list[float] | None:
        """The query's embedding, or None in bm25 mode or with the embedder down."""
        if self.mode == "bm25":
            return None
        try:
            return self._vector(query).pending.result()[0]
        except Exception:  # the searches report the embedder's failure in the notes
            return None

    def _search(
        self,
        query: str,
        target: str,
        k: int,
        mode: str | None = None,
        floor: float | None = None,
        ranked_only: bool = False,
    ) -> SearchResponse:
        mode = mode or self.mode
        try:
            return search(
                access=self.access,
                query=query,
                mode=mode,
                k=k,
                target=target,
                query_vector=self._vector(query) if mode != "bm25" else None,
                vector_floor=floor,
                include_pending=self.include_pending,
                ranked_only=ranked_only,
            )
        except ServiceUnavailable as exc:
            if self.mode == "bm25" or exc.code != "embedder_unavailable":
                raise
            self.mode = "bm25"
            self.notes.append(f"{exc.message.split(';')[0]}: found by BM25 only")
            return self._search(query, target, k, floor=floor, ranked_only=ranked_only)

    def facts_found(self, query: str) -> dict[int, float]:
        """The facts the query finds, each with its BM25 score over the best one's (0
        when only the vector found it)."""
        # Ids and scores only: fact_candidates reads the facts it keeps.
        results = self._search(query, "facts", QUERY_FACTS, ranked_only=True).results
        bm25 = {r.id: r.explain.bm25.score for r in results if r.explain.bm25 is not None}
        if self.mode == "bm25":
            bm25 = {r.id: r.score for r in results}
        top = max(bm25.values(), default=0.0) or 1.0
        return {r.id: bm25.get(r.id, 0.0) / top for r in results}

    def passages(self, query: str) -> list[ContextLine]:
        chunks = self._search(query, "chunks", PASSAGES, floor=PASSAGE_MIN_COSINE)
        turns = self._search(query, "turns", PASSAGES, floor=PASSAGE_MIN_COSINE)
        self.hidden_passages += chunks.hidden + turns.hidden
        # A turn screening flagged (an instruction, a secret) is never pasted into what an
        # agent is told: its claims wait for review, and its words stay out too.
        flagged = set(
            Turn.objects.filter(pk__in=[r.id for r in turns.results])
            .exclude(flags=[])
            .values_list("pk", flat=True)
        )
        turns.results[:] = [r for r in turns.results if r.id not in flagged]
        # Chunks and turns score on scales of their own (turns add their windows): they
        # take turns by rank, the closer in meaning first at the same rank.
        keyed = {(r.type, r.id): r for r in chunks.results + turns.results}
        fused = rrf_fuse([[(r.type, r.id) for r in found.results] for found in (chunks, turns)])
        order = sorted(fused, key=lambda key: (-fused[key], -result_cosine(keyed[key]), key))
        return [passage_line(keyed[key]) for key in order]
