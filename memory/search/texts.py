"""What each searchable record says, for BM25, vectors and result lists."""

from __future__ import annotations

from memory.models import Chunk, Entity, Fact


def chunk_index_text(*, title: str, text: str) -> str:
    """A chunk is indexed with its document's title, which names what the chunk is about."""
    return f"{title}\n{text}" if title else text


def fact_object_text(fact: Fact) -> str:
    return fact.object.name if fact.object is not None else fact.value_text


def fact_text(fact: Fact) -> str:
    """``Alex works_at Acme``: the predicate as stored, so ``works_at`` is a term too."""
    return f"{fact.subject.name} {fact.predicate.name} {fact_object_text(fact)}".strip()


def fact_sentence(fact: Fact) -> str:
    """``Alex works at Acme``: the words an embedding model reads best."""
    predicate = fact.predicate.name.replace("_", " ")
    return f"{fact.subject.name} {predicate} {fact_object_text(fact)}".strip()


def entity_text(entity: Entity) -> str:
    return "\n".join([entity.name, *entity.aliases])


def chunk_text_for_embedding(chunk: Chunk) -> str:
    return chunk_index_text(title=chunk.document.title, text=chunk.text)
