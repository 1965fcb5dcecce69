from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from memory.access import ContextAccess, system_access
from memory.models import Context, Document
from memory.search.models import SearchDoc, SearchPosting, SearchStats, SearchTerm
from memory.services.contexts import context_create
from memory.services.documents import document_create
from memory.services.entities import entity_upsert
from memory.services.facts import fact_write


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
