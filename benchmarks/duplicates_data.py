"""Entities with planted duplicates, for the duplicate-detection benchmark.

Names are made of invented syllables ("Kamori Telisuva", "Venoka Freight Ltd"), so every
base entity is a different thing while near-misses between them occur the way they do in
real data. About 8% of the entities are planted duplicates of a base entity, one kind of
variation each (the kinds SPEC §7 names for the finder's methods):

- ``case_punct``: "TELISU-FREIGHT." for "Telisu Freight" (same normalized key);
- ``legal_suffix``: "Telisu Freight GmbH" for "Telisu Freight Ltd";
- ``token_order``: "Telisuva, Kamori" for "Kamori Telisuva";
- ``typo``: one slip of the keyboard (swap, drop, double or replace a letter);
- ``phonetic``: the same sounds spelled differently ("Telesova Kamary" for "Telisuva
  Kamori"): vowels and c/k, ph/f, double letters changed;
- ``identifier``: "K. Telisuva", sharing an e-mail address with the base entity;
- ``embedding``: a name that shares nothing with the base ("KT Holding") but whose vector
  lies next to it (cosine ≈ 0.95) — the synthetic stand-in for a synonym the model knows.

Duplicates live in a second scope (``bench/org/import``, as if from a second source), so a
duplicate with the same normalized key is allowed to exist next to its base. Vectors are
random (384-d) for every entity: real embeddings would put related but different names
closer together than random ones do, so the embedding method's precision here is an upper
bound.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

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


@dataclass
class Planted:
    name: str
    type: str
    scope: str
    identity: int  # entities with the same identity are one thing
    kind: str  # "base" or one of KINDS
    email: str = ""


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


def plant(total: int, *, duplicate_share: float = 0.08, seed: int = 7) -> list[Planted]:
    """``total`` entities, ``duplicate_share`` of them planted duplicates (kinds in turn)."""
    from memory.entity_names import entity_normalize_key

    rng = random.Random(seed)
    bases: list[Planted] = []
    taken: set[tuple[str, str, str]] = set()
    want = int(total * (1 - duplicate_share))
    while len(bases) < want:
        entity = _base(rng, len(bases))
        key = (entity.scope, entity.type, entity_normalize_key(entity.name))
        if key not in taken:
            taken.add(key)
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
