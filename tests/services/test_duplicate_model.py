"""The weights a scan learns per entity type (docs/decisions/0059): a type whose
entities carry attributes gets its own, over all its pairs; a type of bare names keeps
the defaults; an equal common value counts for less than an equal rare one; initials
stand for the words they begin."""

from __future__ import annotations

import random

import pytest

from memory.domain.access import ContextAccess
from memory.matching.model import FieldWeights, Model, TypeModel
from memory.matching.scoring import ALIKE, DIFFERENT, Comparison, Record, name_level
from memory.models.duplicate import DuplicateCandidate, DuplicateModel
from memory.services.duplicates.finder import duplicates_scan
from memory.services.transfer.seeding import entities_import

pytestmark = pytest.mark.django_db

PEOPLE, SECOND_SOURCE = 300, 60  # every fifth person again, from another source
COUNTRIES = ["Norland", "Estavia", "Pelmark", "Quorra"]  # four: equal by chance often


def _syllables(rng: random.Random, count: int) -> str:
    return "".join(rng.choice("bdfgklmnprstvz") + rng.choice("aeiou") for _ in range(count))


def _seed(access: ContextAccess) -> dict[str, tuple[str, str]]:
    """People with a date of birth and a country (one in five again, in another scope,
    with a slip in the family name); companies with bare names. Returns each second
    source's name → (its first source's name, scope)."""
    rng = random.Random(11)
    rows = ["name,type,scope,date_of_birth,country"]
    again: dict[str, tuple[str, str]] = {}
    for i in range(PEOPLE):
        name = f"{_syllables(rng, 2).title()} {_syllables(rng, 3).title()}"
        born = f"{rng.randint(1940, 2005)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        country = rng.choice(COUNTRIES)
        rows.append(f"{name},person,org/acme,{born},{country}")
        if i % 5 == 0:
            slipped = name[:-1] + ("x" if name[-1] != "x" else "z")
            rows.append(f"{slipped},person,org/globex,{born},{country}")
            again[slipped] = (name, "org/acme")
    companies = ["name,type,scope"]
    companies += [f"{_syllables(rng, 3).title()} Freight,organisation,org/acme" for _ in range(150)]
    for content in (rows, companies):
        report = entities_import(access=access, content="\n".join(content), format="csv")
        assert report.failed == 0, report
    return again


def test_a_type_with_attributes_learns_its_own_weights_over_all_its_pairs(
    access: ContextAccess,
) -> None:
    again = _seed(access)

    duplicates_scan(context=access.context, use_embeddings=False)

    params = DuplicateModel.objects.get(context=access.context).params
    assert set(params["types"]) == {"person"}  # companies: bare names, the defaults
    person = params["types"]["person"]
    people = PEOPLE + SECOND_SOURCE
    assert person["pairs"] == people * (people - 1) / 2
    assert 0.5 * SECOND_SOURCE < person["prior"] * person["pairs"] < 1.5 * SECOND_SOURCE
    fields = person["fields"]
    dob, country = fields["attr:date_of_birth:date"], fields["attr:country:text"]
    # Two people share a country one time in four, a date of birth almost never.
    assert country["u"][-1] == pytest.approx(0.25, abs=0.05)
    assert dob["u"][-1] < 0.001
    assert dob["m"][-1] > 0.8 and country["m"][-1] > 0.8
    found = {
        frozenset((c.entity_a.name, c.entity_b.name))
        for c in DuplicateCandidate.objects.select_related("entity_a", "entity_b")
    }
    planted = {frozenset((slipped, first)) for slipped, (first, _) in again.items()}
    assert len(found & planted) >= 0.95 * len(planted)
    assert len(found - planted) <= 0.05 * len(found)


def test_an_equal_common_value_weighs_less_than_an_equal_rare_one() -> None:
    name = FieldWeights("name", [0.1, 0.1, 0.2, 0.1, 0.2, 0.3], [0.99] + [0.002] * 5)
    country = FieldWeights("text", [0.05, 0.05, 0.1, 0.8], [0.7, 0.03, 0.02, 0.25])
    dob = FieldWeights("date", [0.01, 0.02, 0.1, 0.87], [0.9, 0.09, 0.0099, 1e-4])
    fields = {"name": name, "attr:country:text": country, "attr:dob:date": dob}
    typed = TypeModel(prior=1e-4, pairs=1e6, fitted_pairs=500, fields=fields)
    model = Model(types={"person": typed})
    slip = Comparison("name", "name", 2)

    common, _ = model.score([slip, Comparison("attr:country:text", "text", 3)], "person")
    rare, explain = model.score([slip, Comparison("attr:dob:date", "date", 3)], "person")

    assert common < 0.5 < rare
    assert [e["field"] for e in explain] == ["prior", "name", "attr:dob:date"]
    assert explain[2]["agrees"] and explain[2]["weight"] > 12  # past the default cap
    # The weights, the prior's first, add up to the pair's log2 odds.
    log_odds = sum(e["weight"] for e in explain)
    assert rare == pytest.approx(1 / (1 + 2**-log_odds), rel=1e-3)
    assert explain[0]["level"] == "1 in 10,000 pairs of person entities"


def test_a_field_the_type_has_not_learnt_says_nothing_and_other_types_use_the_defaults() -> None:
    typed = TypeModel(prior=0.01, pairs=1e4, fitted_pairs=300, fields={})
    model = Model.from_json(Model(types={"person": typed}).to_json())
    odd = [Comparison("attr:shoe_size:number", "number", 3)]

    probability, explain = model.score(odd, "person")
    default_probability, default_explain = model.score(odd, "organisation")

    assert probability == pytest.approx(0.01) and explain[1]["weight"] == 0.0
    assert default_explain[1]["weight"] > 0 and default_probability > probability
    assert default_explain[0]["level"] == "1 in 20 pairs found alike"


@pytest.mark.parametrize(
    ("a", "b", "level"),
    [
        ("k telisuva", "kamori telisuva", ALIKE),
        ("telisuva k", "kamori telisuva", ALIKE),
        ("k l telisuva", "kamori lemo telisuva", ALIKE),
        ("k telisuva", "venoka telisuva", DIFFERENT),  # another initial
        ("k telisuva", "kamori venolis", DIFFERENT),  # no word in common
    ],
)
def test_initials_stand_for_the_words_they_begin(a: str, b: str, level: int) -> None:
    x = Record(id=1, type="person", scope="s", key=a)
    y = Record(id=2, type="person", scope="s", key=b)
    assert name_level(x, y) == level
