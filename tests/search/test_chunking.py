from __future__ import annotations

from memory.search.chunking import CHUNK_MAX_WORDS, chunk_text


def _sentences(n: int, words: int = 10) -> str:
    return " ".join(" ".join([f"Word{i}"] + ["x"] * (words - 2) + ["end."]) for i in range(n))


def test_short_paragraphs_are_packed_into_one_chunk() -> None:
    text = "First paragraph here.\n\nSecond one.\n\n\nThird."
    assert chunk_text(text) == ["First paragraph here.\n\nSecond one.\n\nThird."]


def test_paragraph_boundaries_are_preferred() -> None:
    first, second = _sentences(10), _sentences(10)  # 100 words each
    chunks = chunk_text(f"{first}\n\n{second}")
    assert chunks == [first, second]


def test_long_paragraph_is_split_at_sentences_into_balanced_chunks() -> None:
    paragraph = _sentences(20)  # 200 words: two chunks of 100, not 150 + 50
    chunks = chunk_text(paragraph)
    assert [len(c.split()) for c in chunks] == [100, 100]
    assert all(c.endswith("end.") for c in chunks)
    assert " ".join(chunks) == paragraph


def test_a_sentence_longer_than_the_maximum_is_cut_at_words() -> None:
    sentence = " ".join(["word"] * (CHUNK_MAX_WORDS * 2 + 10))
    chunks = chunk_text(sentence)
    assert [len(c.split()) for c in chunks] == [CHUNK_MAX_WORDS, CHUNK_MAX_WORDS, 10]


def test_empty_text_has_no_chunks() -> None:
    assert chunk_text("  \n\n ") == []
