"""Bulk-loaded postings (``postings_load``) leave the index ``postings_replace`` leaves."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import transaction

from memory.infra.restore_writes import replica_role_enter, replica_role_leave
from memory.models import Context, Entity
from memory.search.analyzer import analyze
from memory.search.bm25 import IndexItem, postings_replace
from memory.search.bm25_load import (
    PostingsSpool,
    WordTerms,
    postings_load,
    postings_load_spooled,
)
from memory.search.models import SearchDoc, SearchStats, SearchTerm, Target

pytestmark = pytest.mark.django_db

# Repeated terms, a backslash (escaped in COPY's text format), a text of stop words only
# (a document of length 0 with no postings), a word split by the class pass.
TEXTS = [
    "Ada Ada Lovelace",
    r"C:\Engines\Analytical ada",
    "the and of",
    "MLWK3LL/A part",
]


def _entities(context: Context) -> list[Entity]:
    return [
        Entity.objects.create(
            context=context, scope="org/acme", name=f"e{n}", type="person", normalized_key=f"e{n}"
        )
        for n in range(len(TEXTS))
    ]


def _index(context: Context) -> dict[str, Any]:
    """The context's entity index, with documents in the order of their entities."""
    terms = dict(SearchTerm.objects.filter(context=context).values_list("id", "text"))
    docs = SearchDoc.objects.filter(context=context).order_by("entity_id")
    return {
        "docs": [(d.scope, d.length, sorted(terms[t] for t in d.term_ids)) for d in docs],
        "stats": list(
            SearchStats.objects.filter(context=context).values_list(
                "target", "doc_count", "total_length"
            )
        ),
        "terms": sorted(
            SearchTerm.objects.filter(context=context).values_list("text", "df", "max_tf", "min_dl")
        ),
    }


def test_loaded_postings_equal_replaced_ones(make_context: Callable[..., Context]) -> None:
    loaded, replaced = make_context("loaded"), make_context("replaced")
    items = [(e.pk, e.scope, text) for e, text in zip(_entities(loaded), TEXTS, strict=True)]
    assert postings_load(context_id=loaded.pk, target=Target.ENTITY, items=iter(items)) == 4
    postings_replace(
        context_id=replaced.pk,
        target=Target.ENTITY,
        items=[
            IndexItem(ref_id=e.pk, scope=e.scope, terms=analyze(text))
            for e, text in zip(_entities(replaced), TEXTS, strict=True)
        ],
    )
    index = _index(loaded)
    assert index == _index(replaced)
    assert index["docs"][2] == ("org/acme", 0, [])
    assert ("c:\\engines\\analyt", 1, 1, 5) in index["terms"]  # backslashes kept


def test_nothing_to_load_writes_nothing(context: Context) -> None:
    assert postings_load(context_id=context.pk, target=Target.FACT, items=[]) == 0
    assert not SearchDoc.objects.filter(context=context).exists()


def test_word_terms_are_the_analyzers() -> None:
    words = WordTerms()
    for text in [*TEXTS, "Running RUNNING runs", "cd4+ T-cells, x86_64"]:
        assert words.terms(text) == analyze(text)


def test_loaded_with_triggers_off_counts_terms_as_the_postings_trigger_does(
    make_context: Callable[..., Context],
) -> None:
    """With triggers off (a restore), each term's df and bounds are counted with the
    terms instead of by the postings' trigger: the same figures, for new terms and for a
    term left behind by deleted documents (df 0, stale bounds)."""
    on, off = make_context("trigger"), make_context("counted")
    for context in (on, off):
        SearchTerm.objects.create(
            context=context, target=Target.ENTITY, text="ada", df=0, max_tf=9, min_dl=1
        )
        SearchTerm.objects.create(
            context=context, target=Target.ENTITY, text="lovelac", df=1, max_tf=1, min_dl=7
        )
    items = [(e.pk, e.scope, text) for e, text in zip(_entities(on), TEXTS, strict=True)]
    postings_load(context_id=on.pk, target=Target.ENTITY, items=iter(items))
    items = [(e.pk, e.scope, text) for e, text in zip(_entities(off), TEXTS, strict=True)]
    with transaction.atomic():
        assert replica_role_enter()
        postings_load(context_id=off.pk, target=Target.ENTITY, items=iter(items))
        replica_role_leave()
    counted, fired = _index(off), _index(on)
    assert counted == fired
    terms = {text: (df, max_tf, min_dl) for text, df, max_tf, min_dl in counted["terms"]}
    # A bound is never lowered (a stale one is looser, not wrong); a term no document
    # held takes its shortest document afresh.
    assert terms["ada"] == (2, 9, 3)
    assert terms["lovelac"] == (2, 1, 3)


def _stale_terms(context: Context) -> None:
    """A term left behind by deleted documents (df 0, stale bounds) and a live one."""
    SearchTerm.objects.create(
        context=context, target=Target.ENTITY, text="ada", df=0, max_tf=9, min_dl=1
    )
    SearchTerm.objects.create(
        context=context, target=Target.ENTITY, text="lovelac", df=1, max_tf=1, min_dl=7
    )


@pytest.mark.parametrize("triggers_off", [False, True], ids=["triggers firing", "restore"])
def test_spooled_postings_equal_loaded_ones(
    make_context: Callable[..., Context], triggers_off: bool
) -> None:
    """Items analyzed ahead into a spool (a restore's thread) load as the same index as
    items loaded from their texts: documents, statistics, and each term's df and
    bounds."""
    spooled, loaded = make_context("spooled"), make_context("loaded")
    for context in (spooled, loaded):
        _stale_terms(context)
    spool = PostingsSpool()
    for entity, text in zip(_entities(spooled), TEXTS, strict=True):
        spool.add(entity.pk, entity.scope, text)
    spool.finish()
    with transaction.atomic():
        if triggers_off:
            assert replica_role_enter()
        count = postings_load_spooled(context_id=spooled.pk, target=Target.ENTITY, spool=spool)
        if triggers_off:
            replica_role_leave()
    spool.close()
    assert count == len(TEXTS)
    items = [(e.pk, e.scope, text) for e, text in zip(_entities(loaded), TEXTS, strict=True)]
    postings_load(context_id=loaded.pk, target=Target.ENTITY, items=iter(items))
    index = _index(spooled)
    assert index == _index(loaded)
    assert ("c:\\engines\\analyt", 1, 1, 5) in index["terms"]  # backslashes kept
    assert ("ada", 2, 9, 3) in index["terms"]  # a stale term: df added, min_dl afresh
