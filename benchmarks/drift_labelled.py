"""A labelled set of drift: predicate names a chat model emits for the standard library's
concepts, with a few facts each, and the registered predicate a curator would alias them
to (read forwards or as its inverse) — or none, for concepts the library lacks.

Written by hand for ``benchmarks.drift_suggestions`` in the styles models drift in:
synonyms, inverses (passive, possessive, agent nouns, converse verbs), typos, and novel
concepts that only sound like a registered one. It is a development set: the ranking's
threshold was calibrated on it, so its figures flatter; a held-out set checks it.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory.domain.drift_ranking import ObservedExample

PEOPLE = ("Alex Kim", "Dana Lee", "Sam Okafor", "Priya Nair", "Marcus Webb")
ORGS = ("Acme Corp", "Northwind Logistics", "Globex", "Initech")
PROJECTS = ("Project Atlas", "Billing Revamp", "Data Lake")
EVENTS = ("Q3 Review", "Launch Party", "Board Meeting")
PLACES = ("Berlin", "Lagos", "Austin")
TOPICS = ("pricing", "hiring plan", "security audit")

_POOLS = {
    "person": PEOPLE,
    "organisation": ORGS,
    "project": PROJECTS,
    "event": EVENTS,
    "location": PLACES,
    "topic": TOPICS,
    "concept": ("Portuguese", "tennis", "peanuts"),
    "product": ("Widget Pro", "Acme Cloud", "Northwind App"),
}


@dataclass(frozen=True)
class LabelledDrift:
    name: str
    style: str  # synonym | inverse | typo | novel
    examples: tuple[ObservedExample, ...]
    # The target and whether it is read backwards; None: nothing registered means it.
    target: str | None = None
    inverse: bool = False


def relation(subject_type: str, object_type: str, n: int = 3) -> tuple[ObservedExample, ...]:
    subjects, objects = _POOLS[subject_type], _POOLS[object_type]
    return tuple(
        ObservedExample(
            "relation",
            subject_type,
            subjects[i % len(subjects)],
            object_type,
            objects[(i + 1) % len(objects)],
        )
        for i in range(n)
    )


def attribute(subject_type: str, values: tuple[str, ...]) -> tuple[ObservedExample, ...]:
    subjects = _POOLS[subject_type]
    return tuple(
        ObservedExample("attribute", subject_type, subjects[i % len(subjects)], None, v)
        for i, v in enumerate(values)
    )


P, O, J, E, L, T, C, D = (  # noqa: E741 - one letter per entity type keeps the table a table
    "person",
    "organisation",
    "project",
    "event",
    "location",
    "topic",
    "concept",
    "product",
)


def _s(name: str, target: str, examples: tuple[ObservedExample, ...]) -> LabelledDrift:
    return LabelledDrift(name, "synonym", examples, target)


def _i(name: str, target: str, examples: tuple[ObservedExample, ...]) -> LabelledDrift:
    return LabelledDrift(name, "inverse", examples, target, inverse=True)


def _t(
    name: str, target: str, examples: tuple[ObservedExample, ...], inv: bool = False
) -> LabelledDrift:
    return LabelledDrift(name, "typo", examples, target, inverse=inv)


def _n(name: str, examples: tuple[ObservedExample, ...]) -> LabelledDrift:
    return LabelledDrift(name, "novel", examples)


TITLES = ("VP Sales", "Staff Engineer", "Head of Ops")
ROLES = ("tech lead", "on-call owner", "budget holder")

LABELLED: tuple[LabelledDrift, ...] = (
    # --- synonyms ---------------------------------------------------------------------
    _s("employed_at", "works_at", relation(P, O)),
    _s("works_for", "works_at", relation(P, O)),
    _s("is_employed_by", "works_at", relation(P, O)),
    _s("job_title", "current_title", attribute(P, TITLES)),
    _s("title", "current_title", attribute(P, TITLES)),
    _s("position", "current_role", attribute(P, ROLES)),
    _s("role", "current_role", attribute(P, ROLES)),
    _s("based_in", "located_in", relation(O, L)),
    _s("headquartered_in", "located_in", relation(O, L)),
    _s("member_of", "is_member_of", relation(P, O)),
    _s("co_founded", "founded", relation(P, O)),
    _s("component_of", "part_of", relation(J, J)),
    _s("supervises", "manages", relation(P, P)),
    _s("line_manager_of", "manages", relation(P, P)),
    _s("directly_reports_to", "reports_to", relation(P, P)),
    _s("possesses", "owns", relation(P, D)),
    _s("bought", "acquired", relation(O, O)),
    _s("purchased", "acquired", relation(O, O)),
    _s("pledged_to", "committed_to", relation(P, J)),
    _s("blocked_on", "blocked_by", relation(J, J)),
    _s("relies_on", "depends_on", relation(J, J)),
    _s("sent_email_to", "emailed", relation(P, P)),
    _s("phoned", "called", relation(P, P)),
    _s("texted", "messaged", relation(P, P)),
    _s("had_meeting_with", "met_with", relation(P, P)),
    _s("replied_to", "responded_to", relation(P, P)),
    _s("worried_about", "expressed_concern", relation(P, T)),
    _s("interested_in", "expressed_interest", relation(P, T)),
    _s("participated_in", "attended", relation(P, E)),
    _s("organized", "hosted", relation(P, E)),
    _s("acquainted_with", "knows", relation(P, P)),
    _s("collaborates_with", "works_with", relation(P, P)),
    _s("coworker_of", "colleague_of", relation(P, P)),
    _s("subordinate_of", "reports_to", relation(P, P)),
    # --- inverses ---------------------------------------------------------------------
    _i("employer_of", "works_at", relation(O, P)),
    _i("has_employee", "works_at", relation(O, P)),
    _i("hires", "works_at", relation(O, P)),
    _i("managed_by", "manages", relation(P, P)),
    _i("supervised_by", "manages", relation(P, P)),
    _i("has_subsidiary", "subsidiary_of", relation(O, O)),
    _i("parent_company_of", "subsidiary_of", relation(O, O)),
    _i("is_owned_by", "owns", relation(D, P)),
    _i("bought_by", "acquired", relation(O, O)),
    _i("purchased_by", "acquired", relation(O, O)),
    _i("established_by", "founded", relation(O, P)),
    _i("was_attended_by", "attended", relation(E, P)),
    _i("organised_by", "hosted", relation(E, P)),
    _i("is_blocking", "blocked_by", relation(J, J)),
    _i("required_by", "depends_on", relation(J, J)),
    _i("has_component", "part_of", relation(J, J)),
    _i("has_members", "is_member_of", relation(O, P)),
    # --- typos ------------------------------------------------------------------------
    _t("reprots_to", "reports_to", relation(P, P)),
    _t("colleage_of", "colleague_of", relation(P, P)),
    _t("acquird", "acquired", relation(O, O)),
    _t("curent_title", "current_title", attribute(P, TITLES)),
    _t("wroks_at", "works_at", relation(P, O)),
    _t("mesaged", "messaged", relation(P, P)),
    _t("attneded", "attended", relation(P, E)),
    _t("subsidairy_of", "subsidiary_of", relation(O, O)),
    _t("depnds_on", "depends_on", relation(J, J)),
    _t("emplyos", "works_at", relation(O, P), inv=True),
    # --- novel concepts ---------------------------------------------------------------
    _n("favourite_colour", attribute(P, ("green", "blue", "red"))),
    _n("speaks_language", relation(P, C)),
    _n("mentored", relation(P, P)),
    _n("birthday", attribute(P, ("1990-04-02", "12 May", "1985-11-30"))),
    _n("allergic_to", relation(P, C)),
    _n("plays_sport", relation(P, C)),
    _n("married_to", relation(P, P)),
    _n("sibling_of", relation(P, P)),
    _n("studied_at", relation(P, O)),
    _n("graduated_from", relation(P, O)),
    _n("invested_in", relation(P, O)),
    _n("competitor_of", relation(O, O)),
    _n("supplier_of", relation(O, O)),
    _n("revenue", attribute(O, ("$12M", "$3.4B", "€900k"))),
    _n("sued", relation(O, O)),
    _n("nickname", attribute(P, ("Al", "DJ", "Sammy"))),
    _n("timezone", attribute(P, ("CET", "UTC-5", "WAT"))),
    _n("visited", relation(P, L)),
    _n("dislikes", relation(P, T)),
    _n("shoe_size", attribute(P, ("42", "9", "38"))),
)
