"""``manage.py reembed``: rows whose vector is missing get one, through the configured
embedder (the scripted server's); a second run does nothing; ``--all`` redoes every row."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from memory.domain.access import ContextAccess, system_access
from memory.models import Chunk, Context, Entity, Fact, Keyword
from memory.search.models import FactVector
from memory.services.entities.writes import entity_upsert
from memory.services.facts.write import fact_write
from memory.services.ingest.documents import document_create
from tests.fake_llm import FakeLLM, fake_embedding

pytestmark = pytest.mark.django_db


def _reembed(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("reembed", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def _write_memory(access: ContextAccess) -> None:
    """A document (its chunk and keywords), two entities and a fact between them, written
    through the services: their vectors are queued on commit, which never comes in a
    test's transaction — as if the worker had died before embedding them."""
    document_create(
        access=access,
        title="Refunds",
        text="Customers returning purchases within 30 days receive a full refund.",
        scope="s",
    )
    alex = entity_upsert(access=access, name="Alex", type="person", scope="s").entity
    acme = entity_upsert(access=access, name="Acme", type="organisation", scope="s").entity
    fact_write(access=access, subject=alex, predicate="works_at", object=acme)


def _missing(context: Context) -> dict[str, int]:
    return {
        "chunks": Chunk.objects.filter(context=context, embedding__isnull=True).count(),
        "facts": Fact.objects.filter(context=context, vector__isnull=True).count(),
        "entities": Entity.objects.filter(context=context, embedding__isnull=True).count(),
        "keywords": Keyword.objects.filter(context=context, embedding__isnull=True).count(),
    }


@pytest.fixture
def other(make_context: Any) -> Context:
    return make_context("other-ctx")


def test_rows_missing_vectors_get_them_and_a_second_run_does_nothing(
    access: ContextAccess, other: Context, fake_llm: FakeLLM, settings: Any
) -> None:
    from memory.infra.embeddings import _embedder_for

    _embedder_for.cache_clear()  # a client another test made may point at another server
    _write_memory(access)
    _write_memory(system_access(other))
    assert _missing(access.context) == {"chunks": 1, "facts": 1, "entities": 2, "keywords": 4}

    out, err = _reembed("--context", access.context.slug, "--batch-size", "2")

    assert _missing(access.context) == {"chunks": 0, "facts": 0, "entities": 0, "keywords": 0}
    assert _missing(other)["chunks"] == 1  # another context is not touched
    assert out.splitlines() == [
        "embedding missing vectors in acme-test with openai:fake-embed",
        "chunks: 1 embedded",
        "turns: nothing to embed",
        "facts: 1 embedded",
        "entities: 2 embedded",
        "keywords: 4 embedded",
        "8 vectors written",
    ]
    assert "keywords: 100%" in err and "4/4" in err  # the progress line's last state
    # Through the embedder, in batches of at most 2, with what the worker would embed.
    batches = [request["input"] for request in fake_llm.embedding_requests]
    assert max(len(batch) for batch in batches) == 2 and len(batches) == 5
    alex = Entity.objects.get(context=access.context, name="Alex")
    assert alex.embedding is not None and alex.embedding_model == settings.MEMORY_EMBED_MODEL
    assert list(alex.embedding) == pytest.approx(fake_embedding("Alex (person)"))
    assert FactVector.objects.get(fact__context=access.context).embedding_model == (
        "openai:fake-embed"
    )

    requests = len(fake_llm.embedding_requests)
    again, _ = _reembed("--context", access.context.slug)
    assert again.splitlines()[1:] == [
        "chunks: nothing to embed",
        "turns: nothing to embed",
        "facts: nothing to embed",
        "entities: nothing to embed",
        "keywords: nothing to embed",
        "0 vectors written",
    ]
    assert len(fake_llm.embedding_requests) == requests


def test_all_embeds_every_row_again_and_targets_narrow_it(
    access: ContextAccess, fake_llm: FakeLLM
) -> None:
    _write_memory(access)
    old = [0.0] * 383 + [1.0]
    Entity.objects.update(embedding=old, embedding_model="local:all-MiniLM-L6-v2")

    out, _ = _reembed("--target", "entities", "--target", "chunks")
    assert "entities: nothing to embed" in out and "chunks: 1 embedded" in out
    assert "facts" not in out and Keyword.objects.filter(embedding__isnull=True).count() == 4
    assert set(Entity.objects.values_list("embedding_model", flat=True)) == {
        "local:all-MiniLM-L6-v2"  # they have a vector: --missing-only keeps it
    }

    out, _ = _reembed("--all", "--target", "entities")
    assert "embedding all vectors in every context" in out and "entities: 2 embedded" in out
    assert set(Entity.objects.values_list("embedding_model", flat=True)) == {"openai:fake-embed"}


def test_merged_entities_are_not_embedded(access: ContextAccess, fake_llm: FakeLLM) -> None:
    _write_memory(access)
    alex = Entity.objects.get(name="Alex")
    Entity.objects.filter(name="Acme").update(merged_into=alex)

    out, _ = _reembed("--target", "entities")

    assert "entities: 1 embedded" in out
    assert Entity.objects.get(name="Acme").embedding is None


def test_bad_options_are_clear_errors(context: Context) -> None:
    with pytest.raises(CommandError, match="no context 'nope'"):
        _reembed("--context", "nope")
    with pytest.raises(CommandError, match="--batch-size must be between 1 and 4096"):
        _reembed("--batch-size", "0")
    with pytest.raises(CommandError, match="invalid choice: 'vectors'"):
        _reembed("--target", "vectors")
    with pytest.raises(CommandError, match="not allowed with argument"):
        _reembed("--all", "--missing-only")


def test_an_unreachable_embedder_stops_with_what_was_done_and_a_rerun_carries_on(
    access: ContextAccess, fake_llm: FakeLLM, settings: Any
) -> None:
    _write_memory(access)
    _reembed("--target", "chunks")
    settings.MEMORY_EMBED_MODEL = "openai:unreachable-reembed-model"
    settings.OPENAI_BASE_URL = "http://127.0.0.1:9/v1"  # discard port: nothing listens
    settings.MEMORY_LLM_MAX_RETRIES = 0

    with pytest.raises(CommandError) as failed:
        _reembed("--target", "entities")

    message = str(failed.value)
    assert message.startswith("entities: 0 of 2 embedded, then: could not reach the embedding")
    assert message.endswith("run the command again to carry on where it stopped")
    assert _missing(access.context)["entities"] == 2 and _missing(access.context)["chunks"] == 0
