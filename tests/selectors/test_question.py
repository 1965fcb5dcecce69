"""What a question asks, read from its words: the relation words it brings to the
predicate registry."""

import pytest

from memory.search.analyzer import analyze
from memory.selectors.question import question_read


@pytest.mark.parametrize(
    ("question", "brings"),
    [
        ("Who is Dana's boss?", "manager"),
        ("Who is Dana Lee's supervisor?", "manager"),
        ("Which company is Dana's employer?", "employed"),
        ("What is Dana's job?", "title"),
        ("Where is Dana's hometown?", "lives"),
        ("What is Dana's birthplace?", "born"),
        ("Does Dana have an allergy?", "allergic"),
        ("Which languages does Dana know?", "speaks"),
        ("Where is Acme headquartered?", "located"),
    ],
)
def test_everyday_words_bring_the_registry_words_for_the_relation(
    question: str, brings: str
) -> None:
    read = question_read(question)
    assert set(analyze(brings)) <= read.terms
    assert set(analyze(brings)) <= read.terms_outside(set())


def test_the_question_keeps_its_own_words() -> None:
    read = question_read("Who is Dana's boss?")
    assert set(analyze("boss")) <= read.terms
    assert not set(analyze("manager")) & question_read("Who is Dana's mentor?").terms
