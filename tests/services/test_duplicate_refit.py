"""The incremental re-estimate reads what its fit needs and nothing else: the sample's
holders from the stored keys (nothing rewritten), and random pairs only where ``fit``
reads them — the model is the one a fit over every random pair gives."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import pytest

from memory.domain.access import ContextAccess
from memory.matching.blocking import keys_and_holders, keys_holders, keys_rewrite
from memory.matching.model import TypeSample, fit
from memory.matching.records import records_of
from memory.matching.scoring import compare
from memory.models.duplicate import DuplicateKey
from memory.services.duplicates.pairs import RANDOM_PAIRS, _random_pairs, model_fit
from memory.services.entities.writes import entity_upsert

pytestmark = pytest.mark.django_db

SYLLABLES = ["ka", "lo", "mir", "ven", "tas", "dro", "pel", "qui"]


def _seed(access: ContextAccess) -> list[int]:
    """People with dates of birth and postcodes (a type that gets its own weights, with
    one slip in every fourth name) and bare-named organisations (the defaults)."""
    rng = random.Random(3)
    ids = []
    for i in range(120):
        given = "".join(rng.choice(SYLLABLES) for _ in range(2)).capitalize()
        family = "".join(rng.choice(SYLLABLES) for _ in range(3)).capitalize()
        born, code = f"19{50 + i % 50}-0{1 + i % 9}-1{i % 9}", str(10000 + i)
        for name in [f"{given} {family}"] + ([f"{given} {family}x"] if i % 4 == 0 else []):
            ids.append(
                entity_upsert(
                    access=access,
                    name=name,
                    type="person",
                    scope="org/acme",
                    attributes={"date_of_birth": born, "postcode": code},
                ).entity.pk
            )
        org = "".join(rng.choice(SYLLABLES) for _ in range(3)).capitalize()
        ids.append(
            entity_upsert(access=access, name=f"{org} Labs", type="organisation", scope="org/acme")
            .entity.pk
        )  # fmt: skip
    return ids


def _keys(context_id: int) -> list[tuple[int, int, str, str]]:
    return sorted(
        DuplicateKey.objects.filter(context_id=context_id).values_list(
            "pk", "entity_id", "type", "key"
        )
    )


def test_the_holders_read_from_stored_keys_are_those_a_rewrite_reads(
    access: ContextAccess,
) -> None:
    ids = _seed(access)
    context_id = access.context.pk
    sample = records_of(context_id, ids[::3])
    before = _keys(context_id)

    read = keys_holders(context_id, sample)

    assert _keys(context_id) == before  # nothing written
    pairs, rare, rewrite = keys_and_holders(context_id, sample)
    assert read == (pairs, rare)
    keys_rewrite(rewrite)  # the keys derived again from the names are those stored
    assert sorted(k[1:] for k in _keys(context_id)) == sorted(k[1:] for k in before)
    assert read[0]  # the seeded slips are blocked pairs


def test_the_fit_is_the_one_over_every_random_pair(access: ContextAccess) -> None:
    ids = _seed(access)
    context_id = access.context.pk
    records = records_of(context_id, ids)
    blocked, rare = keys_holders(context_id, records)

    model = model_fit(records, blocked, {}, rare, with_vectors=False)

    # The reference: every type's random pairs drawn and compared, as the fit once was.
    samples = {}
    rare = defaultdict(set, rare)
    for type_ in ("person", "organisation"):
        members = [records[pk] for pk in sorted(records) if records[pk].type == type_]
        typed = [p for p in sorted(blocked) if records[p[0]].type == records[p[1]].type == type_]
        samples[type_] = TypeSample(
            population=members,
            pairs=len(members) * (len(members) - 1) / 2,
            blocked=[compare(records[a], records[b], rare=rare[type_]) for a, b in typed],
            randoms=[
                compare(records[a], records[b], rare=rare[type_])
                for a, b in _random_pairs(members, RANDOM_PAIRS, seed=17)
            ],
        )  # fmt: skip
    reference = fit(samples)

    assert "person" in model.types and "organisation" not in model.types
    # The same fit, up to the last bits of a float sum taken in another order.
    assert _rounded(model.to_json()) == _rounded(reference.to_json())


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_rounded(item) for item in value]
    return value
