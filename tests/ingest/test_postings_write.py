"""The search postings a fact batch writes: the terms of each fact's text, the counts the
triggers keep, and a re-index that replaces rather than adds."""

from __future__ import annotations

from collections import Counter

from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.domain.access import ContextAccess
from memory.models import Fact
from memory.search.analyzer import analyze
from memory.search.indexing import facts_index, search_index_batch
from memory.search.models import SearchDoc, SearchPosting, SearchStats, SearchTerm
from memory.search.texts import fact_text
from memory.services.entities.writes import entity_upsert
from memory.services.facts.batch import FactInput, facts_write_batch
from memory.services.registry.predicates import predicate_register


def _postings_of(fact: Fact) -> Counter[str]:
    doc = SearchDoc.objects.get(fact=fact)
    texts = dict(SearchTerm.objects.filter(context=fact.context).values_list("id", "text"))
    tfs = SearchPosting.objects.filter(doc_id=doc.pk).values_list("term_id", "tf")
    assert all(
        dl == doc.length
        for dl in SearchPosting.objects.filter(doc_id=doc.pk).values_list("dl", flat=True)
    )
    return Counter({texts[term_id]: tf for term_id, tf in tfs})


def test_each_fact_is_indexed_with_the_terms_of_its_whole_text(access: ContextAccess) -> None:
    # Names that repeat across the batch (analyzed once) and words the analyzer splits,
    # stems or drops: the postings must equal those of the fact's text analyzed whole.
    alex = entity_upsert(access=access, name="Dr. Alex O'Neil-Smith", type="person", scope="s")
    acme = entity_upsert(access=access, name="ACME  Labs CD4", type="org", scope="s")
    inputs = [
        FactInput(subject=alex.entity, predicate="works_at", object=acme.entity),
        FactInput(subject=acme.entity, predicate="employs_people", object=alex.entity),
        FactInput(subject=alex.entity, predicate="current_title", value="Head of the Labs"),
        FactInput(subject=alex.entity, predicate="nickname", value=""),
    ]
    with search_index_batch():
        batch = facts_write_batch(access=access, scope="s", facts=inputs)
    facts = Fact.objects.filter(pk__in=[item.fact.pk for item in batch.items if item.fact])
    assert facts.count() == len(inputs)
    for fact in facts.select_related("subject", "predicate", "object"):
        expected = Counter(analyze(fact_text(fact)))
        assert _postings_of(fact) == expected, fact_text(fact)
        assert SearchDoc.objects.get(fact=fact).length == sum(expected.values())


def test_indexing_again_replaces_the_postings_and_keeps_counts_exact(
    access: ContextAccess,
) -> None:
    alex = entity_upsert(access=access, name="Alex Morgan", type="person", scope="s").entity
    batch = facts_write_batch(
        access=access,
        scope="s",
        facts=[
            FactInput(subject=alex, predicate="current_title", value="Chief Technology Officer"),
            FactInput(subject=alex, predicate="hobby", value="sailing and sailing boats"),
        ],
    )
    ids = []
    for item in batch.items:
        if item.fact is not None:
            assert item.fact.pk is not None  # set once the batch is inserted
            ids.append(item.fact.pk)
    before = {pk: _postings_of(Fact.objects.get(pk=pk)) for pk in ids}
    facts_index(ids)
    facts_index(ids)
    assert {pk: _postings_of(Fact.objects.get(pk=pk)) for pk in ids} == before
    docs = SearchDoc.objects.filter(context=access.context, target="fact")
    stats = SearchStats.objects.get(context=access.context, target="fact")
    assert stats.doc_count == docs.count() == 2
    assert stats.total_length == sum(docs.values_list("length", flat=True))
    for term in SearchTerm.objects.filter(context=access.context, target="fact"):
        postings = SearchPosting.objects.filter(term_id=term.pk)
        assert term.df == postings.count(), term.text
        assert term.max_tf == max(postings.values_list("tf", flat=True)), term.text
    assert SearchTerm.objects.get(context=access.context, target="fact", text="sail").max_tf == 2


def test_new_facts_are_indexed_without_deleting_first_and_rewritten_ones_are_replaced(
    access: ContextAccess,
) -> None:
    alex = entity_upsert(access=access, name="Alex Morgan", type="person", scope="s").entity
    predicate_register(access=access, name="lives_in_city", is_aggregate=True)
    first = facts_write_batch(
        access=access, scope="s", facts=[FactInput(alex, "lives_in_city", value="Lisbon")]
    )
    lives = first.items[0].fact
    assert lives is not None and lives.pk is not None

    with CaptureQueriesContext(connection) as new_only, search_index_batch():
        facts_write_batch(
            access=access, scope="s", facts=[FactInput(alex, "current_title", value="CTO")]
        )
    with CaptureQueriesContext(connection) as rewritten, search_index_batch():
        moved = facts_write_batch(
            access=access, scope="s", facts=[FactInput(alex, "lives_in_city", value="Porto")]
        )

    def deletes(captured: CaptureQueriesContext) -> list[str]:
        return [
            q["sql"]
            for q in captured.captured_queries
            if "DELETE FROM search_searchdoc" in q["sql"]
        ]

    assert deletes(new_only) == []  # a new fact has no postings to delete
    assert moved.items[0].outcome == "updated"
    assert len(deletes(rewritten)) == 1  # the aggregate rewritten in place
    assert _postings_of(Fact.objects.get(pk=lives.pk)) == Counter(
        analyze("Alex Morgan lives_in_city Porto")
    )
    assert SearchDoc.objects.filter(fact_id=lives.pk).count() == 1
