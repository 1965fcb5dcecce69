"""Entities with planted duplicates, for the duplicate-detection benchmark.

Names are made of invented syllables ("Kamori Telisuva", "Venoka Freight Ltd"), so every
base entity is a different thing while near-misses between them occur the way they do in
real data. About 8% of the entities are planted duplicates of a base entity, one kind of
variation each (the kinds the finder's methods are meant to catch):

- ``case_punct``: "TELISU-FREIGHT." for "Telisu Freight" (same normalized key);
- ``legal_suffix``: "Telisu Freight GmbH" for "Telisu Freight Ltd";
- ``token_order``: "Telisuva, Kamori" for "Kamori Telisuva";
- ``typo``: one slip of the keyboard (swap, drop, double or replace a letter);
- ``phonetic``: the same sounds spelled differently ("Telesova Kamary" for "Telisuva
  Kamori"): vowels and c/k, ph/f, double letters changed;
- ``identifier``: "K. Telisuva", sharing an e-mail address with the base entity;
- ``embedding``: a name that shares nothing with the base ("KT Holding") but whose vector
  lies next to it (cosine ≈ 0.95) — the synthetic stand-in for a synonym the model knows.

Entities can carry the attributes a memory holds of such things (``ATTRIBUTES``): a person a
date of birth and a city, an organisation a country and a postcode, a project or product
an owner and a start date — each only on part of the entities, as extraction leaves them.
A duplicate comes from a second source that knows less: it carries each of its base's
attributes with probability ``CARRIED``, and a carried value has a slip with probability
``SLIPPED`` (a date's day and month swapped or one digit changed, a postcode digit, a
letter of a name). Only with ``plant(..., attributes=True)`` (the benchmarks'
``--attributes``); by default entities are bare names, as in every run before it.

Duplicates live in a second scope (``bench/org/import``, as if from a second source), so a
duplicate with the same normalized key is allowed to exist next to its base. Vectors are
random (384-d) for every entity: real embeddings would put related but different names
closer together than random ones do, so the embedding method's precision here is an upper
bound.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass, field

BASE_SCOPE = "bench/org"
DUP_SCOPE = "bench/org/import"
KINDS = (
    "case_punct",
    "legal_suffix",
    "token_order",
    "typo",
    "phonetic",
    "identifier",
    "embedding",
)
CONSONANTS = "bdfgklmnprstvz"
VOWELS = "aeiou"
INDUSTRIES = ["Freight", "Logistics", "Analytics", "Foods", "Robotics", "Textiles", "Energy",
              "Pharma", "Media", "Capital", "Systems", "Labs", "Studio", "Partners"]  # fmt: skip
SUFFIXES = ["Ltd", "Inc", "GmbH", "LLC", "SA", "AG", "Corp"]
THINGS = ["Platform", "Initiative", "Report", "Programme", "Engine", "Atlas", "Portal", "Suite"]
OTHER_TYPES = ["project", "product", "topic", "location", "event", "concept", "policy"]
# Attribute → (share of the entities of the type that have it, how its value is drawn).
ATTRIBUTES: dict[str, dict[str, tuple[float, str]]] = {
    "person": {"date_of_birth": (0.7, "birth"), "city": (0.5, "city")},
    "organisation": {"country": (0.6, "country"), "postcode": (0.5, "postcode")},
    "other": {"owner": (0.5, "owner"), "start_date": (0.5, "recent")},
}
CARRIED = 0.7  # a second source knows each attribute with this probability
SLIPPED = 0.1  # and spells a carried value with a slip this often


@dataclass
class Planted:
    name: str
    type: str
    scope: str
    identity: int  # entities with the same identity are one thing
    kind: str  # "base" or one of KINDS
    email: str = ""
    attributes: dict[str, str] = field(default_factory=dict)


def _syllables(rng: random.Random, low: int, high: int) -> str:
    word = "".join(
        rng.choice(CONSONANTS) + rng.choice(VOWELS) for _ in range(rng.randint(low, high))
    )
    return word.capitalize()


def _base(rng: random.Random, identity: int) -> Planted:
    roll = rng.random()
    if roll < 0.45:
        name = f"{_syllables(rng, 2, 3)} {_syllables(rng, 2, 4)}"
        return Planted(name, "person", BASE_SCOPE, identity, "base")
    if roll < 0.75:
        name = f"{_syllables(rng, 2, 3)} {rng.choice(INDUSTRIES)}"
        if rng.random() < 0.5:
            name += f" {rng.choice(SUFFIXES)}"
        return Planted(name, "organisation", BASE_SCOPE, identity, "base")
    name = f"{_syllables(rng, 2, 3)} {rng.choice(THINGS)}"
    return Planted(name, rng.choice(OTHER_TYPES), BASE_SCOPE, identity, "base")


def _typo(rng: random.Random, name: str) -> str:
    tokens = name.split()
    candidates = [i for i, t in enumerate(tokens) if len(t) >= 5]
    i = rng.choice(candidates or [0])
    word = tokens[i]
    at = rng.randrange(1, len(word) - 1) if len(word) > 2 else 0
    slip = rng.choice(["swap", "drop", "double", "replace"])
    if slip == "swap":
        word = word[:at] + word[at + 1] + word[at] + word[at + 2 :]
    elif slip == "drop":
        word = word[:at] + word[at + 1 :]
    elif slip == "double":
        word = word[:at] + word[at] + word[at:]
    else:
        word = word[:at] + rng.choice(string.ascii_lowercase) + word[at + 1 :]
    tokens[i] = word
    return " ".join(tokens)


def _phonetic(rng: random.Random, name: str) -> str:
    """Change how the sounds are spelled, not the sounds: inner vowels (metaphone keeps
    only a word's first vowel), c/k, f/ph; enough changes that edit distance misses it."""
    out = []
    for token in name.split():
        letters = list(token)
        for i in range(1, len(letters)):
            if letters[i] in VOWELS and rng.random() < 0.6:
                letters[i] = rng.choice([v for v in VOWELS if v != letters[i]])
        word = "".join(letters)
        word = word.replace("f", "ph") if rng.random() < 0.5 else word
        word = ("C" + word[1:]) if word.startswith("K") and rng.random() < 0.5 else word
        out.append(word)
    return " ".join(out)


def _attribute_value(rng: random.Random, how: str, pools: dict[str, list[str]]) -> str:
    if how == "birth":
        return f"{rng.randint(1940, 2006)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if how == "recent":
        return f"{rng.randint(1995, 2026)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if how == "postcode":
        return f"{rng.randint(10000, 99999)}"
    return rng.choice(pools[how])


def _attributes(rng: random.Random, type_: str, pools: dict[str, list[str]]) -> dict[str, str]:
    spec = ATTRIBUTES.get(type_, ATTRIBUTES["other"])
    return {
        name: _attribute_value(rng, how, pools)
        for name, (share, how) in spec.items()
        if rng.random() < share
    }


def _slip(rng: random.Random, value: str) -> str:
    """A second source's misspelling of ``value``: day and month swapped, one digit or
    one letter changed."""
    if len(value) == 10 and value[4] == "-" and rng.random() < 0.5:
        year, month, day = value.split("-")
        if int(day) <= 12:
            return f"{year}-{day}-{month}"
    positions = [i for i, ch in enumerate(value) if ch.isalnum()][1:] or [0]
    at = rng.choice(positions)
    pool = string.digits if value[at].isdigit() else string.ascii_lowercase
    return value[:at] + rng.choice([c for c in pool if c != value[at]]) + value[at + 1 :]


def carried(rng: random.Random, attributes: dict[str, str]) -> dict[str, str]:
    return {
        name: _slip(rng, value) if rng.random() < SLIPPED else value
        for name, value in attributes.items()
        if rng.random() < CARRIED
    }


def _pools(rng: random.Random) -> dict[str, list[str]]:
    """Invented cities, countries and owners: common values, as real ones are."""
    return {
        "city": [_syllables(rng, 2, 3) for _ in range(300)],
        "country": [_syllables(rng, 2, 3) + "ia" for _ in range(40)],
        "owner": [f"{_syllables(rng, 2, 3)} {rng.choice(INDUSTRIES)}" for _ in range(3000)],
    }


def _variant(rng: random.Random, base: Planted, kind: str) -> Planted:
    name = base.name
    if kind == "case_punct":
        name = rng.choice([name.upper(), name.lower(), name.replace(" ", "-") + "."])
    elif kind == "legal_suffix":
        words = [w for w in name.split() if w not in SUFFIXES]
        name = " ".join([*words, rng.choice(SUFFIXES)])
    elif kind == "token_order":
        head, *rest = name.split()
        name = f"{' '.join(rest)}, {head}"
    elif kind == "typo":
        name = _typo(rng, name)
    elif kind == "phonetic":
        name = _phonetic(rng, name)
    elif kind == "identifier":
        head, *rest = name.split()
        name = f"{head[0]}. {' '.join(rest)}"
    elif kind == "embedding":
        initials = "".join(w[0] for w in name.split() if w not in SUFFIXES)
        name = f"{initials.upper()} {rng.choice(['Holding', 'Group', 'Unit', 'Desk'])}"
    return Planted(name, base.type, DUP_SCOPE, base.identity, kind)


def plant(
    total: int, *, duplicate_share: float = 0.08, seed: int = 7, attributes: bool = False
) -> list[Planted]:
    """``total`` entities, ``duplicate_share`` of them planted duplicates (kinds in turn);
    with ``attributes``, each carrying what ``ATTRIBUTES`` says (names only without)."""
    from memory.domain.entity_names import entity_normalize_key

    rng = random.Random(seed)
    # Its own generator, so the names are the same with and without attributes.
    values = random.Random(seed + 1)
    pools = _pools(values)
    bases: list[Planted] = []
    taken: set[tuple[str, str, str]] = set()
    want = int(total * (1 - duplicate_share))
    while len(bases) < want:
        entity = _base(rng, len(bases))
        key = (entity.scope, entity.type, entity_normalize_key(entity.name))
        if key not in taken:
            taken.add(key)
            if attributes:
                entity.attributes = _attributes(values, entity.type, pools)
            bases.append(entity)
    dups: list[Planted] = []
    order = rng.sample(range(len(bases)), len(bases))
    for n, i in enumerate(order):
        if len(bases) + len(dups) >= total:
            break
        kind = KINDS[n % len(KINDS)]
        if kind == "token_order" and len(bases[i].name.split()) < 2:
            continue
        dup = _variant(rng, bases[i], kind)
        dup.attributes = carried(values, bases[i].attributes)
        key = (dup.scope, dup.type, entity_normalize_key(dup.name))
        if not key[2] or key in taken:
            continue
        taken.add(key)
        if kind == "identifier":
            bases[i].email = dup.email = f"id{bases[i].identity}@example.org"
        dups.append(dup)
    for base in bases:  # a fifth of the people have an address of their own
        if base.type == "person" and not base.email and rng.random() < 0.2:
            base.email = f"person{base.identity}@example.org"
    return bases + dups
