from __future__ import annotations

from memory.search.analyzer import analyze, analyze_words


def test_part_number_stays_one_term_and_its_parts_are_terms_too() -> None:
    # blank pass: "mlwk3ll/a"; class pass: mlwk, 3, ll ("a" is a stop word)
    assert analyze("MLWK3LL/A") == ["mlwk3ll/a", "mlwk", "3", "ll"]


def test_snowball_stems() -> None:
    assert analyze("returning") == ["return"]
    assert analyze("purchases") == ["purchas"]
    assert analyze("Returning PURCHASES") == ["return", "purchas"]


def test_plain_words_are_counted_once() -> None:
    assert analyze("refund refund") == ["refund", "refund"]


def test_edge_punctuation_is_stripped_inner_punctuation_kept() -> None:
    assert analyze('"works_at", (e-mail)!') == ["works_at", "work", "e-mail", "e", "mail"]


def test_stop_words_are_dropped_in_both_passes() -> None:
    assert analyze("the state of the art") == ["state", "art"]
    assert analyze("at-risk") == ["at-risk", "risk"]


def test_empty_and_punctuation_only_text_has_no_terms() -> None:
    assert analyze("") == []
    assert analyze(" -- ... !!! ") == []


def test_overlong_tokens_are_dropped() -> None:
    assert analyze("x" * 101 + " ok") == ["ok"]


def test_terms_grouped_by_word_are_the_same_terms() -> None:
    text = "Returning CD4+ cells, the MLWK3LL/A part; and purchases!"
    assert analyze_words(text) == [
        ["return"],
        ["cd4", "cd", "4"],
        ["cell"],
        ["mlwk3ll/a", "mlwk", "3", "ll"],
        ["part"],
        ["purchas"],
    ]
    assert [t for word in analyze_words(text) for t in word] == analyze(text)
    assert analyze_words("the and, of") == []
