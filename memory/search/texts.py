"""What each searchable record says, for BM25, vectors and result lists."""

from __future__ import annotations

import datetime

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
    return entity_text_of(name=entity.name, aliases=entity.aliases)


def entity_text_of(*, name: str, aliases: list[str]) -> str:
    """``entity_text`` from plain values, for bulk indexing without model instances."""
    return "\n".join([name, *aliases])


def chunk_text_for_embedding(chunk: Chunk) -> str:
    return chunk_index_text(title=chunk.document.title, text=chunk.text)


def entity_embedding_text(entity: Entity) -> str:
    """What an entity's vector encodes: its name, type and other spellings."""
    aliases = ", ".join(entity.aliases[:10])
    return f"{entity.name} ({entity.type})" + (f"; also known as {aliases}" if aliases else "")


def turn_index_text(*, text: str, speaker: str, said_at: datetime.datetime | None = None) -> str:
    """A turn is indexed with its speaker and its day: "what did Caroline say about ..."
    names a person, "when did ..." is answered by the day the turn was said."""
    head = f"({said_at.day} {said_at:%B %Y}) " if said_at is not None else ""
    return f"{head}{speaker}: {text}" if speaker else f"{head}{text}"


def turn_embedding_text(turn: Turn) -> str:
    return turn_index_text(text=turn.text, speaker=turn.speaker, said_at=turn.said_at)
