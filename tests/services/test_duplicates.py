"""The duplicate scan: a pair that only spelling or sound proposed (phonetic key, edit
distance) is stored only when a second signal backs it; precise methods rank first."""

from __future__ import annotations

from typing import Any

import pytest

from memory.access import ContextAccess
from memory.models import Entity
from memory.models.duplicate import DuplicateCandidate, DuplicateStatus
from memory.services.duplicates import METHOD_SCORES, duplicates_scan
from memory.services.entities import IdentifierInput, entity_upsert

pytestmark = pytest.mark.django_db

# Companies whose one distinctive word is short, and 21 more "… Freight": the shared word
# is common, so it tells no two of them apart.
FREIGHT = ["Amber", "Birch", "Cedar", "Delta", "Ember", "Falcon", "Garnet", "Harbor", "Indigo",
           "Juniper", "Lumen", "Mosaic", "Nimbus", "Orchid", "Pinnacle", "Quartz", "Raven",
           "Summit", "Tundra", "Vertex", "Willow"]  # fmt: skip


def _entity(access: ContextAccess, name: str, type_: str = "person", **extra: Any) -> Entity:
    return entity_upsert(access=access, name=name, type=type_, scope="org/acme", **extra).entity


def _pair(a: Entity, b: Entity) -> DuplicateCandidate | None:
    low, high = sorted([a.pk, b.pk])
    return DuplicateCandidate.objects.filter(entity_a_id=low, entity_b_id=high).first()


def _freight_companies(access: ContextAccess) -> None:
    for word in FREIGHT:
        _entity(access, f"{word} Freight", "organisation")


def test_a_phonetic_variant_of_one_word_is_found(access: ContextAccess) -> None:
    stefan = _entity(access, "Stefan Kowalczyk")
    stephan = _entity(access, "Stephan Kowalczyk")

    duplicates_scan(context=access.context, use_embeddings=False)

    pair = _pair(stefan, stephan)
    assert pair is not None
    # Found by sound; backed by the names: one word spelled with the same sounds, and a
    # surname no one else here has.
    assert "phonetic" in pair.methods and "spelling" in pair.methods


def test_a_phonetic_collision_of_two_names_is_not_proposed(access: ContextAccess) -> None:
    _freight_companies(access)
    kamo = _entity(access, "Kamo Freight", "organisation")
    kuma = _entity(access, "Kuma Freight", "organisation")

    report = duplicates_scan(context=access.context, use_embeddings=False)

    # Same phonetic key (KM FRFT), but the word that differs is short and "freight" is
    # what every second company here is called: nothing says they are one company.
    assert _pair(kamo, kuma) is None
    assert report.unconfirmed >= 1


def test_agreeing_attributes_back_a_phonetic_pair(access: ContextAccess) -> None:
    _freight_companies(access)
    registered = {"attributes": {"registry_number": "HRB 4711"}}
    kamo = _entity(access, "Kamo Freight", "organisation", **registered)
    kuma = _entity(access, "Kuma Freight", "organisation", **registered)

    duplicates_scan(context=access.context, use_embeddings=False)

    pair = _pair(kamo, kuma)
    assert pair is not None and pair.methods == ["phonetic", "attributes"]


def test_a_shared_uncommon_identifier_domain_backs_a_phonetic_pair(
    access: ContextAccess,
) -> None:
    jon = _entity(access, "Jon Smyth", identifiers=[IdentifierInput("email", "jon@kestrel.test")])
    john = _entity(
        access, "John Smith", identifiers=[IdentifierInput("email", "j.smith@kestrel.test")]
    )

    duplicates_scan(context=access.context, use_embeddings=False)

    # Both words differ ("jon smyth" / "john smith"): the names alone are not enough.
    pair = _pair(jon, john)
    assert pair is not None and pair.methods == ["domain", "phonetic"]


def test_a_mail_providers_domain_backs_nothing(access: ContextAccess) -> None:
    for n in range(40):  # MAX_BLOCK others with an address there: a provider's domain
        _entity(access, f"Member {n:02}", identifiers=[IdentifierInput("email", f"m{n}@mail.test")])
    jon = _entity(access, "Jon Smyth", identifiers=[IdentifierInput("email", "jon@mail.test")])
    john = _entity(access, "John Smith", identifiers=[IdentifierInput("email", "js@mail.test")])

    duplicates_scan(context=access.context, use_embeddings=False)

    assert _pair(jon, john) is None


@pytest.mark.parametrize(
    ("first", "second", "found"),
    [
        ("Kubernetes", "Kubernets", True),  # one slip in a long word
        ("Jon Smith", "John Smith", True),  # one slip, and a surname only they have
        ("Kamo Freight", "Kamu Freight", False),  # one slip in a short word of a common name
    ],
)
def test_a_typo_is_found_when_the_slip_is_not_all_that_tells_the_names_apart(
    access: ContextAccess, first: str, second: str, found: bool
) -> None:
    _freight_companies(access)
    a, b = _entity(access, first, "organisation"), _entity(access, second, "organisation")

    duplicates_scan(context=access.context, use_embeddings=False)

    assert (_pair(a, b) is not None) is found


def test_precise_methods_rank_above_pairs_found_by_spelling_or_sound(
    access: ContextAccess,
) -> None:
    acme = _entity(access, "Acme Corp", "organisation")
    acme_inc = entity_upsert(
        access=access, name="ACME Inc.", type="organisation", scope="org/globex"
    ).entity
    jon, john = _entity(access, "Jon Smith"), _entity(access, "John Smith")

    duplicates_scan(context=access.context, use_embeddings=False)

    by_key, by_sound = _pair(acme, acme_inc), _pair(jon, john)
    assert by_key is not None and by_sound is not None
    assert "key" in by_key.methods and set(by_sound.methods) >= {"phonetic", "spelling"}
    assert by_sound.score < METHOD_SCORES["ngram"] < by_key.score


def test_a_rescan_withdraws_open_pairs_stored_on_sound_alone(access: ContextAccess) -> None:
    _freight_companies(access)
    kamo = _entity(access, "Kamo Freight", "organisation")
    kuma = _entity(access, "Kuma Freight", "organisation")
    kama = _entity(access, "Kama Freight", "organisation")
    stored = [
        # What an earlier scan stored on the phonetic key alone: withdrawn.
        (kamo, kuma, DuplicateStatus.OPEN, "scan"),
        # A curator's "not duplicates" and a pair a curator proposed: kept.
        (kamo, kama, DuplicateStatus.DISMISSED, "scan"),
        (kuma, kama, DuplicateStatus.OPEN, "curator"),
    ]
    for a, b, status, source in stored:
        low, high = sorted([a.pk, b.pk])
        DuplicateCandidate.objects.create(
            context=access.context,
            entity_a_id=low,
            entity_b_id=high,
            score=0.8,
            methods=["phonetic"],
            status=status,
            source=source,
        )

    report = duplicates_scan(context=access.context, use_embeddings=False)

    assert report.withdrawn == 1
    assert _pair(kamo, kuma) is None
    assert _pair(kamo, kama) is not None and _pair(kuma, kama) is not None
