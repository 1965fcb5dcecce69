"""Predicate name forms: normalization, hostile text and the conservative typo matcher."""

from __future__ import annotations

import pytest

from memory.domain.predicate_library import STANDARD_PREDICATES
from memory.domain.predicate_names import (
    fuzzy_typo_match,
    predicate_check_text,
    predicate_normalize,
)
from memory.kernel.errors import ValidationFailed

LIBRARY_NAMES = [p.name for p in STANDARD_PREDICATES]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("worksAt", "works_at"),
        ("works-at", "works_at"),
        ("Works At", "works_at"),
        ("WORKS_AT", "works_at"),
        ("  works__at_ ", "works_at"),
        ("--works - at--", "works_at"),
        ("isMemberOf", "is_member_of"),
        ("HTTPServer", "http_server"),
        ("cc_ed", "cc_ed"),
        ("top3Items", "top3_items"),
    ],
)
def test_normalize_gives_snake_case(raw: str, expected: str) -> None:
    assert predicate_normalize(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        "KNOWS]->() DETACH DELETE n //",
        "works_at'; DROP TABLE memory_fact; --",
        "works.at",
        "works/at",
        "works\tat",
        "wörks_at",
        "<script>",
        "",
        "   ",
        "___",
        " - ",
        "a" * 65,
        "x" * 1000,
    ],
)
def test_check_text_refuses_hostile_or_invalid_text(raw: str) -> None:
    with pytest.raises(ValidationFailed) as raised:
        predicate_check_text(raw)
    assert raised.value.code == "invalid_predicate"


@pytest.mark.parametrize("raw", ["works_at", " Works At ", "works-at", "a" * 64, "q3_target"])
def test_check_text_accepts_plain_forms(raw: str) -> None:
    predicate_check_text(raw)


def test_check_text_length_counts_the_normalized_form() -> None:
    # 64 letters plus separators that normalization collapses: still 64 characters.
    predicate_check_text("a" * 32 + " - " + "b" * 31)
    with pytest.raises(ValidationFailed):
        predicate_check_text("a" * 32 + "_" + "b" * 32)


@pytest.mark.parametrize(
    ("typo", "expected"),
    [
        ("wroks_at", "works_at"),
        ("work_at", "works_at"),
        ("curent_title", "current_title"),
        ("reprots_to", "reports_to"),
        ("wprks_at", "works_at"),
        ("commited_to", "committed_to"),
        ("manage", "manages"),
        # Two slips in a name of six or more letters, in one token or two.
        ("acquird", "acquired"),
        ("acqired", "acquired"),
        ("colleage_of", "colleague_of"),
        ("curent_titel", "current_title"),
        ("hosetd", "hosted"),
        ("emailled", "emailed"),
        ("subsidairy_of", "subsidiary_of"),
    ],
)
def test_fuzzy_fixes_typos_of_library_names(typo: str, expected: str) -> None:
    assert fuzzy_typo_match(typo, LIBRARY_NAMES) == expected


@pytest.mark.parametrize(
    "other_concept",
    [
        "knows_about",
        "is_member_on",
        "manager",
        "owned",
        "owes",
        "funded",
        "port_of",
        "hoisted",
        "notes",
        "colleague_to",
        "worksat",
        "works_at_home",
        "wroks_ta",
        "works_on",
        "reports_on",
        "hates",
        "mentored",
        "owed",
        "attends",
    ],
)
def test_fuzzy_never_maps_onto_another_concept(other_concept: str) -> None:
    assert fuzzy_typo_match(other_concept, LIBRARY_NAMES) is None


@pytest.mark.parametrize(
    ("form", "other"),
    [
        ("works_with", "works_at"),
        ("knows", "owns"),
        ("manages", "manager"),
        ("manager", "manages"),
        ("owns", "owned"),
        ("owned", "owns"),
        ("is_member_on", "is_member_of"),
        ("colleague_of", "colleagues_to"),
    ],
)
def test_fuzzy_keeps_neighbouring_concepts_apart(form: str, other: str) -> None:
    assert fuzzy_typo_match(form, [other]) is None


def test_fuzzy_prefers_an_exact_candidate() -> None:
    assert fuzzy_typo_match("works_with", ["works_with", "works_at"]) == "works_with"
    assert fuzzy_typo_match("colleague_of", LIBRARY_NAMES) == "colleague_of"


def test_fuzzy_returns_none_when_two_candidates_fit() -> None:
    # "form" is one swap away from both "from" and "fomr": no single best answer.
    assert fuzzy_typo_match("form_x", ["from_x", "fomr_x"]) is None


def test_no_library_name_is_a_typo_of_another() -> None:
    for name in LIBRARY_NAMES:
        others = [n for n in LIBRARY_NAMES if n != name]
        assert fuzzy_typo_match(name, others) is None, name


def test_a_real_word_is_never_two_slips_of_another() -> None:
    # "funded" is a word of its own: one dropped letter from "founded" is not a slip.
    assert fuzzy_typo_match("funded", ["founded"]) is None
    assert fuzzy_typo_match("hates", ["hosted"]) is None


def test_a_short_name_allows_one_slip_only() -> None:
    assert fuzzy_typo_match("onws", ["owns"]) == "owns"
    assert fuzzy_typo_match("nwos", ["owns"]) is None
    assert fuzzy_typo_match("knwso", ["knows"]) is None


def test_short_tokens_must_match_exactly() -> None:
    assert fuzzy_typo_match("part_fo", ["part_of"]) is None
    assert fuzzy_typo_match("onws", ["owns"]) == "owns"
    assert fuzzy_typo_match("onw", ["own"]) is None
