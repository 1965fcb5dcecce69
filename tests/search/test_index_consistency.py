from __future__ import annotations

import threading

import pytest
from django.db import IntegrityError, connection, transaction

from memory.domain.access import ContextAccess, system_access
from memory.models import Context, Document, DuplicateKey, Entity
from memory.search.indexing import search_index_rebuild
from memory.search.models import SearchDoc, SearchPosting, SearchStats, SearchTerm
from memory.services.contexts import context_create
from memory.services.entities.writes import entity_upsert
from memory.services.facts.write import fact_write
from memory.services.ingest.documents import document_create
from memory.services.ingest.pipeline import memory_ingest


def test_a_rolled_back_write_leaves_no_postings(access: ContextAccess) -> None:
    alex = entity_upsert(access=access, name="Alex", type="person", scope="s").entity
    before = SearchDoc.objects.count()
    with pytest.raises(RuntimeError), transaction.atomic():
        fact_write(access=access, subject=alex, predicate="current_title", value="CTO")
        document_create(access=access, title="t", text="Some text here.", scope="s")
        assert SearchDoc.objects.count() == before + 2
        raise RuntimeError("roll back")
    assert SearchDoc.objects.count() == before
    assert not SearchStats.objects.filter(context=access.context, target="fact").exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_keep_statistics_exact() -> None:
    context = context_create(slug="concurrent", name="Concurrent")
    errors: list[BaseException] = []

    def write(worker: int) -> None:
        try:
            for i in range(5):
                document_create(
                    access=system_access(Context.objects.get(pk=context.pk)),
                    title=f"w{worker}",
                    text=f"Shared words for every writer, plus word{worker}x{i}.",
                    scope="s",
                )
        except BaseException as exc:  # surfaced below: a thread cannot fail the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(w,)) for w in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    stats = SearchStats.objects.get(context=context, target="chunk")
    docs = SearchDoc.objects.filter(context=context)
    assert stats.doc_count == docs.count() == Document.objects.filter(context=context).count() == 15
    assert stats.total_length == sum(docs.values_list("length", flat=True))
    for term in SearchTerm.objects.filter(context=context):
        assert term.df == SearchPosting.objects.filter(term_id=term.pk).count(), term.text
    assert SearchTerm.objects.get(context=context, text="writer").df == 15


def _found(access: ContextAccess, query: str, target: str) -> set[int]:
    from memory.selectors.search import search

    return {r.id for r in search(access=access, query=query, mode="bm25", target=target).results}


def test_a_merge_and_its_undo_keep_the_names_search_finds(access: ContextAccess) -> None:
    from memory.services.merges.merge import entity_merge, merge_undo

    john = entity_upsert(access=access, name="John Smith", type="person", scope="s").entity
    smythe = entity_upsert(access=access, name="Jonathan Smythe", type="person", scope="s").entity
    acme = entity_upsert(access=access, name="Acme", type="organisation", scope="s").entity
    moved = fact_write(access=access, subject=smythe, predicate="works_at", object=acme).fact
    assert _found(access, "Smythe", "entities") == {smythe.pk}

    record = entity_merge(access=access, survivor_id=john.pk, merged_ids=[smythe.pk])
    # The survivor is found by the merged name, now its alias; the moved fact by the
    # survivor's name and no longer by the name it left.
    assert john.pk in _found(access, "Smythe", "entities")
    assert moved.pk in _found(access, "John Smith Acme", "facts")
    assert moved.pk not in _found(access, "Jonathan Smythe", "facts")

    merge_undo(access=access, merge_id=record.pk)
    assert _found(access, "Smythe", "entities") == {smythe.pk}
    assert moved.pk in _found(access, "Jonathan Smythe", "facts")
    assert moved.pk not in _found(access, "John", "facts")


def _postings(context: Context, target: str = "fact") -> dict[int, dict[str, int]]:
    """Each fact's (or entity's) postings: its terms and their frequencies."""
    docs = dict(
        SearchDoc.objects.filter(context=context, **{f"{target}__isnull": False}).values_list(
            "pk", f"{target}_id"
        )
    )
    terms = dict(SearchTerm.objects.filter(context=context).values_list("pk", "text"))
    postings: dict[int, dict[str, int]] = {}
    for doc_id, term_id, tf in SearchPosting.objects.filter(doc_id__in=docs).values_list(
        "doc_id", "term_id", "tf"
    ):
        postings.setdefault(docs[doc_id], {})[terms[term_id]] = tf
    return postings


def test_what_an_ingest_writes_is_indexed_as_a_rebuild_indexes_it(
    access: ContextAccess,
) -> None:
    # The writer indexes new facts from the names it read under its locks, and new
    # entities from what it inserted: the same postings as reading each back, for
    # relations, attributes, actions and a fact written through an inverse alias
    # (stored with its ends swapped).
    triples = {
        "entities": [
            {"name": "Alex Rivera", "type": "person", "aliases": ["A. Rivera", "Lexi"]},
            {"name": "Acme Corp", "type": "company"},
        ],
        "relations": [
            {"subject": "Alex Rivera", "predicate": "worksAt", "object": "Acme Corp"},
            {"subject": "Acme Corp", "predicate": "employs", "object": "Dana Reyes"},
        ],
        "attributes": [
            {"subject": "Alex Rivera", "key": "current_title", "value": "Staff Engineer"},
            {"subject": "Alex Rivera", "key": "favourite_dish", "value": "Pad thai, spicy"},
        ],
        "actions": [{"subject": "Alex Rivera", "verb": "attended", "object": "Q3 Offsite"}],
    }
    result = memory_ingest(access=access, text="", scope="s", infer="triples", triples=triples)
    assert len(result.facts_created) == 5
    written, entities = _postings(access.context), _postings(access.context, "entity")
    assert len(written) == 5 and all(written.values())
    assert len(entities) == 4 and all(entities.values())
    assert "lexi" in entities[Entity.objects.get(context=access.context, name="Alex Rivera").pk]
    search_index_rebuild(context=access.context)
    assert _postings(access.context) == written
    assert _postings(access.context, "entity") == entities


def test_derived_rows_hold_their_records_context_and_name_live_records(
    access: ContextAccess,
) -> None:
    """Search documents and duplicate keys hold their context without a foreign key of
    its own: it is their record's, and the record's own key is checked."""
    alex = entity_upsert(access=access, name="Alex Moreau", type="person", scope="s").entity
    fact = fact_write(access=access, subject=alex, predicate="current_title", value="CTO").fact
    docs = SearchDoc.objects.filter(context=access.context)
    assert {(d.fact_id, d.entity_id) for d in docs} == {(fact.pk, None), (None, alex.pk)}
    keys = DuplicateKey.objects.filter(entity=alex)
    assert keys.exists() and set(keys.values_list("context_id", flat=True)) == {alex.context_id}
    with pytest.raises(IntegrityError), transaction.atomic():
        SearchDoc.objects.create(
            context=access.context, target="fact", fact_id=10**12, scope="s", length=1
        )
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the check, before the commit
