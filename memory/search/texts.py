"""What each searchable record says, for BM25, vectors and result lists."""

from __future__ import annotations

from memory.models import Chunk, Entity, Fact, Turn


def chunk_index_text(*, title: str, text: str) -> str:
    """A chunk is indexed with its document's title, which names what the chunk is about."""
    return f"{title}\n{text}" if title else text


def fact_object_text(fact: Fact) -> str:
    return fact.object.name if fact.object is not None else fact.value_text


def fact_text(fact: Fact) -> str:
    """``Alex works_at Acme``: the predicate as stored, so ``works_at`` is a term too."""
    return fact_text_of(
        subject=fact.subject.name, predicate=fact.predicate.name, obj=fact_object_text(fact)
    )


def fact_text_of(*, subject: str, predicate: str, obj: str) -> str:
    """``fact_text`` from plain values, for bulk indexing without model instances."""
    return f"{subject} {predicate} {obj}".strip()


def fact_sentence(fact: Fact) -> str:
    """``Alex works at Acme``: the words an embedding model reads best."""
    predicate = fact.predicate.name.replace("_", " ")
    return f"{fact.subject.name} {predicate} {fact_object_text(fact)}".strip()


def entity_text(entity: Entity) -> str:
    return "\n".join([entity.name, *entity.aliases])


def chunk_text_for_embedding(chunk: Chunk) -> str:
    return chunk_index_text(title=chunk.document.title, text=chunk.text)


def entity_embedding_text(entity: Entity) -> str:
    """What an entity's vector encodes: its name, type and other spellings."""
    aliases = ", ".join(entity.aliases[:10])
    return f"{entity.name} ({entity.type})" + (f"; also known as {aliases}" if aliases else "")


def turn_index_text(*, text: str, speaker: str) -> str:
    """A turn is indexed with its speaker: "what did Caroline say about ..." names them."""
    return f"{speaker}: {text}" if speaker else text


def turn_embedding_text(turn: Turn) -> str:
    return turn_index_text(text=turn.text, speaker=turn.speaker)
