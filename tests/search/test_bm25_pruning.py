"""MaxScore pruning (memory/search/bm25_pruning.py) returns exactly the unpruned top k."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import bm25s
import pytest
from django.db.models import Max, Min

from memory.domain.access import ContextAccess
from memory.kernel.scopes import Grants
from memory.models import Chunk, Entity, Fact
from memory.search import bm25_pruning, bm25_scoring
from memory.search.analyzer import analyze, analyze_words
from memory.search.bm25 import bm25_rank, corpus_visible_sql
from memory.search.models import SearchPosting, SearchTerm, Target
from memory.search.texts import chunk_index_text
from memory.services.entities.writes import entity_upsert
from memory.services.facts.write import fact_write
from memory.services.ingest.documents import document_create
from memory.services.merges.merge import entity_merge

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
    access: ContextAccess,
    query: str,
    *,
    prune: bool | str,
    grants: str = "*",
    limit: int = 10,
    target: Target = Target.CHUNK,
) -> list:
    visible = corpus_visible_sql(Grants.from_strings([f"read:{grants}"]).read_q())
    mode = ("probe" if prune is True else prune) or "off"
    with _pruning(mode):
        return bm25_rank(
            context_id=access.context.pk,
            target=target,
            query=query,
            visible_sql=visible,
            limit=limit,
        )


_PRUNING_KNOBS = {
    # Never prune: this corpus is far below the sizes at which pruning pays on its own.
    "off": (10**12, 10**12, 10, 10),
    # Prune whenever a list can be skipped, completing the candidates by probes...
    "probe": (0, 0, 0, 10**6),
    # ...or by merging the probed lists with them.
    "merge": (0, 0, 10**6, 0),
}


@contextmanager
def _pruning(mode: str) -> Iterator[None]:
    knobs = ("MAXSCORE_MIN_POSTINGS", "PROBE_MIN_DF", "PROBE_COST", "MERGE_COST")
    saved = [getattr(bm25_pruning, knob) for knob in knobs]
    for knob, value in zip(knobs, _PRUNING_KNOBS[mode], strict=True):
        setattr(bm25_pruning, knob, value)
    try:
        yield
    finally:
        for knob, value in zip(knobs, saved, strict=True):
            setattr(bm25_pruning, knob, value)


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("grants", ["*", "org/b"])
@pytest.mark.parametrize("completion", ["probe", "merge"])
def test_pruned_top_k_equals_the_full_ranking(
    access: ContextAccess, corpus: list[Chunk], query: str, grants: str, completion: str
) -> None:
    pruned = _ranked(access, query, prune=completion, grants=grants)
    full = _ranked(access, query, prune=False, grants=grants)
    assert len(pruned) == 10
    assert [h.ref_id for h in pruned] == [h.ref_id for h in full]
    for a, b in zip(pruned, full, strict=True):
        assert math.isclose(a.score, b.score, rel_tol=1e-12)


def test_pruning_skips_common_terms_and_matches_bm25s(
    access: ContextAccess, corpus: list[Chunk]
) -> None:
    query = "zebrafish patients study"
    terms, avgdl = bm25_scoring.query_terms(
        context_id=access.context.pk, target=Target.CHUNK, bag=Counter(analyze(query))
    )
    with _pruning("probe"):
        pruned = bm25_pruning.maxscore_rank(
            target=Target.CHUNK,
            terms=terms,
            words=analyze_words(query),
            avgdl=avgdl,
            visible_sql=("TRUE", []),
            limit=5,
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
    def term(term_id: int, df: int, bound: float) -> bm25_scoring.QueryTerm:
        return bm25_scoring.QueryTerm(
            term_id=term_id, weight=bound, df=df, bound=bound, frequency=df / 100_000
        )

    rare, mid = term(1, 40, 6.0), term(4, 5_000, 3.0)
    common, commoner = term(2, 20_000, 1.5), term(3, 30_000, 1.0)
    terms = [rare, common, commoner, mid]
    # θ = 5. Probing both common lists (bounds 2.5 < 5) leaves a floor of 2.5 that some
    # of `mid`'s list reaches alone: 40 + 5,000 · share candidates, two probes each,
    # against 50k postings saved. Probing only the commonest leaves a floor of 4, which
    # only `rare` or a document holding two of the read terms reaches: ~1,000.
    monkeypatch.setattr(bm25_pruning, "MERGE_COST", 10)  # probes only, first
    monkeypatch.setattr(bm25_pruning, "PROBE_COST", 3)
    monkeypatch.setattr(bm25_pruning, "RARE_POSTING_SHARE", 0.3)
    assert _probed(terms, 5.0) == ([common, commoner], False)  # strongest first
    monkeypatch.setattr(bm25_pruning, "PROBE_COST", 10)
    monkeypatch.setattr(bm25_pruning, "RARE_POSTING_SHARE", 0.6)
    assert _probed(terms, 5.0) == ([commoner], False)  # dearer probes: fewer of them
    # Merging costs 0.4 of the 50k postings of both common lists: cheaper than reading
    # them, and than probing the ~3,000 candidates twice at 10 postings a probe.
    monkeypatch.setattr(bm25_pruning, "MERGE_COST", 0.4)
    assert _probed(terms, 5.0) == ([common, commoner], True)
    # A bound that does not fit under θ is never probed, whatever its list costs.
    assert _probed(terms, 0.9) == ([], False)
    # A list shorter than PROBE_MIN_DF is read even when its bound would fit.
    assert _probed([rare, term(5, 10, 0.1)], 5.0) == ([], False)


def _probed(
    terms: list[bm25_scoring.QueryTerm], theta: float
) -> tuple[list[bm25_scoring.QueryTerm], bool]:
    plan = bm25_pruning._probe_plan(terms, theta)
    return (plan.probed, plan.merged) if plan else ([], False)


def test_a_list_is_skipped_only_when_completing_without_it_costs_less(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    terms = [
        bm25_scoring.QueryTerm(term_id=i, weight=2.0, df=20_000, bound=2.0, frequency=0.2)
        for i in range(3)
    ]
    # θ = 3: one list may be probed (2 < 3), leaving a floor of 1 that each list read
    # reaches alone with its better postings: 12k candidates whose probes cost more
    # than the 20k postings skipped.
    monkeypatch.setattr(bm25_pruning, "MERGE_COST", 1.0)  # a merged posting costs a read one
    assert _probed(terms, 3.0) == ([], False)
    # A merge join that reads a posting for 0.4 of a read one pays: one list is merged.
    monkeypatch.setattr(bm25_pruning, "MERGE_COST", 0.4)
    probed, merged = _probed(terms, 3.0)
    assert len(probed) == 1 and merged


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


def _seed(access: ContextAccess, query: str, *, limit: int, grants: str = "*") -> float:
    terms, avgdl = bm25_scoring.query_terms(
        context_id=access.context.pk, target=Target.CHUNK, bag=Counter(analyze(query))
    )
    return bm25_pruning._seed_threshold(
        target=Target.CHUNK,
        terms=terms,
        leads=bm25_pruning._word_leads(terms, analyze_words(query)),
        k0=bm25_scoring.K1 * (1 - bm25_scoring.B),
        kdl=bm25_scoring.K1 * bm25_scoring.B / avgdl,
        visible_sql=corpus_visible_sql(Grants.from_strings([f"read:{grants}"]).read_q()),
        limit=limit,
    )


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("grants", ["*", "org/b"])
def test_the_seed_threshold_never_exceeds_the_true_kth_best_score(
    access: ContextAccess, corpus: list[Chunk], query: str, grants: str
) -> None:
    theta = _seed(access, query, limit=5, grants=grants)
    kth_best = _ranked(access, query, prune=False, grants=grants, limit=5)[-1].score
    assert theta <= kth_best * (1 + 1e-12)
    if grants == "*":  # with a filter fewer than k seeds may be visible: θ is then 0
        assert theta > 0


def test_documents_holding_both_strongest_terms_seed_the_threshold(
    access: ContextAccess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The documents that hold the strongest term most are short ones with nothing
    else; the best documents hold the two rare terms together. Seeding from the pair
    finds the true k-th best score, the strongest term alone falls short of it."""
    texts = [f"zebrafish zebrafish zebrafish filler{i}." for i in range(30)]  # alone, short
    texts += [
        f"zebrafish carvedilol patients {' '.join(f'pad{i}x{j}' for j in range(12))}."
        for i in range(5)
    ]
    texts += [f"patients {' '.join(f'common{i}x{j}' for j in range(8))}." for i in range(100)]
    for i, text in enumerate(texts):
        document_create(access=access, title=f"T{i}", text=text, scope="org/a")
    query = "zebrafish carvedilol patients"
    third_best = _ranked(access, query, prune=False, limit=3)[-1].score
    assert math.isclose(_seed(access, query, limit=3), third_best, rel_tol=1e-12)
    monkeypatch.setattr(bm25_pruning, "PAIR_SEED_SHARE", 0.0)  # the strongest term's seeds only
    assert _seed(access, query, limit=3) < third_best * 0.9


@pytest.mark.parametrize("completion", ["probe", "merge"])
def test_pruned_rankings_return_only_current_facts_and_live_entities(
    access: ContextAccess, completion: str
) -> None:
    """Superseded facts and merged entities stay indexed (an undo brings them back) and
    are filtered per row at the end of every plan, merged or probed."""
    people = [
        entity_upsert(access=access, name=f"Alex Kim {i}", type="person", scope="org/a").entity
        for i in range(6)
    ]
    for person in people:
        for title in ("Engineer", "Lead Engineer", "CTO"):  # each replaces the last
            fact_write(access=access, subject=person, predicate="current_title", value=title)
    entity_merge(access=access, survivor_id=people[0].pk, merged_ids=[people[1].pk, people[2].pk])
    current = set(Fact.objects.filter(status="current").values_list("pk", flat=True))
    live = set(Entity.objects.filter(merged_into=None).values_list("pk", flat=True))
    assert len(live) == 4
    for target, query, allowed in (
        (Target.FACT, "Alex Kim title Engineer CTO", current),
        (Target.ENTITY, "Alex Kim", live),
    ):
        pruned = _ranked(access, query, prune=completion, target=target, limit=20)
        full = _ranked(access, query, prune=False, target=target, limit=20)
        assert [h.ref_id for h in pruned] == [h.ref_id for h in full]
        assert pruned and {h.ref_id for h in pruned} <= allowed
    entities = _ranked(access, "Alex Kim", prune=completion, target=Target.ENTITY, limit=20)
    assert {h.ref_id for h in entities} == live


def test_a_word_leads_the_seeds_with_the_bounds_of_all_its_parts() -> None:
    """``cd4`` (and its parts ``cd`` and ``4``, in every document that holds it) outweighs
    ``birth``, the strongest single term: its documents seed θ first."""

    def term(term_id: int, text: str, df: int, bound: float) -> bm25_scoring.QueryTerm:
        return bm25_scoring.QueryTerm(term_id=term_id, weight=bound, df=df, bound=bound, text=text)

    birth, median = term(1, "birth", 1_213, 4.18), term(2, "median", 10_020, 2.23)
    cd4, cd, four = (
        term(3, "cd4", 900, 3.81),
        term(4, "cd", 1_527, 3.74),
        term(5, "4", 15_632, 1.77),
    )
    words = [["birth"], ["median"], ["cd4", "cd", "4"], ["unknown"]]
    assert bm25_pruning._word_leads([birth, median, cd4, cd, four], words) == [cd4, birth, median]
    # A term that is also a word of its own keeps the stronger of its two rankings.
    assert bm25_pruning._word_leads([cd4, cd, four], [["4"], ["cd4", "cd", "4"]]) == [cd4, four]
