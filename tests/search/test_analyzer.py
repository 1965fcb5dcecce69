from __future__ import annotations

from memory.search.analyzer import analyze


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
