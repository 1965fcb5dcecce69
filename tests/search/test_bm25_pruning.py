"""MaxScore pruning (memory/search/bm25.py) returns exactly the unpruned top k."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from contextlib import contextmanager

import bm25s
import pytest
from django.db.models import Max, Min

from memory.access import ContextAccess
from memory.models import Chunk
from memory.scopes import Grants
from memory.search import bm25
from memory.search.analyzer import analyze
from memory.search.bm25 import bm25_rank, corpus_visible_sql
from memory.search.models import SearchPosting, SearchTerm, Target
from memory.search.texts import chunk_index_text
from memory.services.documents import document_create

COMMON = ["patients", "study", "cells", "results", "protein"]
RARE = ["zebrafish", "glaxosmithkline", "mononucleosomes", "carvedilol", "econometrica"]
QUERIES = [
    "zebrafish patients study",
    "carvedilol cells results protein",
    "econometrica study",
    "mononucleosomes glaxosmithkline patients cells",
    "patients study cells",
]


@pytest.fixture
def corpus(access: ContextAccess) -> list[Chunk]:
    """Common words in most documents, each rare word in a few, lengths that vary."""
    rng = random.Random(5)
    for i in range(160):
        words = [w for w in COMMON if rng.random() < 0.7] * rng.randint(1, 3)
        words += [w for w in RARE if rng.random() < 0.06]
        words += [f"filler{rng.randint(0, 400)}" for _ in range(rng.randint(3, 40))]
        rng.shuffle(words)
        scope = "org/a" if i % 3 else "org/b"
        document_create(access=access, title=f"Doc {i}", text=" ".join(words) + ".", scope=scope)
    return list(Chunk.objects.filter(context=access.context).select_related("document"))


def _ranked(
    access: ContextAccess, query: str, *, prune: bool, grants: str = "*", limit: int = 10
) -> list:
    visible = corpus_visible_sql(Grants.from_strings([f"read:{grants}"]).read_q())
    with _pruning(forced=prune):
        return bm25_rank(
            context_id=access.context.pk,
            target=Target.CHUNK,
            query=query,
            visible_sql=visible,
            limit=limit,
        )


@contextmanager
def _pruning(*, forced: bool) -> Iterator[None]:
    """Prune whenever a list can be skipped (``forced``), or never: this corpus is far
    below the sizes at which pruning is chosen on its own."""
    knobs = ("MAXSCORE_MIN_POSTINGS", "PROBE_MIN_DF", "PROBE_COST")
    saved = [getattr(bm25, knob) for knob in knobs]
    for knob, value in zip(knobs, (0, 0, 0) if forced else (10**12, 10**12, 10), strict=True):
        setattr(bm25, knob, value)
    try:
        yield
    finally:
        for knob, value in zip(knobs, saved, strict=True):
            setattr(bm25, knob, value)


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("grants", ["*", "org/b"])
def test_pruned_top_k_equals_the_full_ranking(
    access: ContextAccess, corpus: list[Chunk], query: str, grants: str
) -> None:
    pruned = _ranked(access, query, prune=True, grants=grants)
    full = _ranked(access, query, prune=False, grants=grants)
    assert len(pruned) == 10
    assert [h.ref_id for h in pruned] == [h.ref_id for h in full]
    for a, b in zip(pruned, full, strict=True):
        assert math.isclose(a.score, b.score, rel_tol=1e-12)


def test_pruning_skips_common_terms_and_matches_bm25s(
    access: ContextAccess, corpus: list[Chunk]
) -> None:
    query = "zebrafish patients study"
    terms, avgdl = bm25._query_terms(
        context_id=access.context.pk, target=Target.CHUNK, bag=bm25.Counter(analyze(query))
    )
    with _pruning(forced=True):
        pruned = bm25._maxscore_ranked(
            target=Target.CHUNK, terms=terms, avgdl=avgdl, visible_sql=("TRUE", []), limit=5
        )
    assert pruned is not None, "the rare term's documents outscore the common terms' bounds"
    model = bm25s.BM25(method="lucene", k1=1.2, b=0.75, dtype="float64")
    model.index(
        [analyze(chunk_index_text(title=c.document.title, text=c.text)) for c in corpus],
        show_progress=False,
    )
    scores = model.get_scores(analyze(query))
    expected = sorted(
        ((float(s), c.pk) for c, s in zip(corpus, scores, strict=True)), key=lambda x: (-x[0], x[1])
    )[:5]
    assert [h.ref_id for h in pruned] == [pk for _, pk in expected]
    for hit, (score, _) in zip(pruned, expected, strict=True):
        assert math.isclose(hit.score, score, rel_tol=1e-6)


def test_term_bounds_cover_every_posting(access: ContextAccess, corpus: list[Chunk]) -> None:
    actual = {
        row["term_id"]: row
        for row in SearchPosting.objects.values("term_id").annotate(tf=Max("tf"), dl=Min("dl"))
    }
    terms = SearchTerm.objects.filter(context=access.context, target="chunk", df__gt=0)
    assert terms.exists()
    for term in terms:
        assert term.max_tf == actual[term.pk]["tf"]
        assert term.min_dl == actual[term.pk]["dl"]


def test_probed_terms_are_priced_against_reading_every_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def term(term_id: int, df: int, bound: float) -> bm25._QueryTerm:
        return bm25._QueryTerm(
            term_id=term_id, weight=bound, df=df, bound=bound, frequency=df / 100_000
        )

    rare, mid = term(1, 40, 6.0), term(4, 5_000, 3.0)
    common, commoner = term(2, 20_000, 1.5), term(3, 30_000, 1.0)
    terms = [rare, common, commoner, mid]
    # θ = 5. Probing both common lists (bounds 2.5 < 5) leaves a floor of 2.5 that some
    # of `mid`'s list reaches alone: 40 + 5,000 · share candidates, two probes each,
    # against 50k postings saved. Probing only the commonest leaves a floor of 4, which
    # only `rare` or a document holding two of the read terms reaches: ~1,000.
    monkeypatch.setattr(bm25, "PROBE_COST", 3)
    monkeypatch.setattr(bm25, "RARE_POSTING_SHARE", 0.3)
    assert bm25._probed_terms(terms, 5.0) == [common, commoner]  # strongest first
    monkeypatch.setattr(bm25, "PROBE_COST", 10)
    monkeypatch.setattr(bm25, "RARE_POSTING_SHARE", 0.6)
    assert bm25._probed_terms(terms, 5.0) == [commoner]  # dearer probes: fewer of them
    # A bound that does not fit under θ is never probed, whatever its list costs.
    assert bm25._probed_terms(terms, 0.9) == []
    # A list shorter than PROBE_MIN_DF is read even when its bound would fit.
    assert bm25._probed_terms([rare, term(5, 10, 0.1)], 5.0) == []


def test_probes_are_not_chosen_when_they_cost_more_than_the_lists() -> None:
    terms = [
        bm25._QueryTerm(term_id=i, weight=2.0, df=20_000, bound=2.0, frequency=0.2)
        for i in range(3)
    ]
    # θ = 3: one list may be probed (2 < 3), leaving a floor of 1 that each list read
    # reaches alone with its better postings: 12k candidates whose probes cost more
    # than the 20k postings skipped.
    assert bm25._probed_terms(terms, 3.0) == []


@pytest.mark.parametrize("limit", [3, 10, 40])
def test_equal_scores_rank_by_id_however_the_sum_was_ordered(
    access: ContextAccess, corpus: list[Chunk], limit: int
) -> None:
    """Documents with the same terms and length tie exactly; pruned and unpruned plans
    add their contributions in different orders and must still order them by id."""
    for _ in range(6):
        document_create(
            access=access,
            title="Twin",
            text="zebrafish patients study cells filler1 filler2.",
            scope="org/a",
        )
    query = "zebrafish patients study cells"
    pruned = _ranked(access, query, prune=True, limit=limit)
    full = _ranked(access, query, prune=False, limit=limit)
    assert [h.ref_id for h in pruned] == [h.ref_id for h in full]
    twins = [h for h in full if math.isclose(h.score, full[0].score, rel_tol=1e-12)]
    assert len(twins) >= min(limit, 6)
    assert [h.ref_id for h in twins] == sorted(h.ref_id for h in twins)
