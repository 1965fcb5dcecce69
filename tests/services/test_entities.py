from __future__ import annotations

import pytest

from memory.domain.access import ContextAccess
from memory.domain.entity_names import entity_normalize_key, entity_type_normalize
from memory.kernel.errors import PermissionDenied, ValidationFailed
from memory.kernel.scopes import Grants
from memory.models import Entity, EntityIdentifier, Role
from memory.services.entities.writes import IdentifierInput, entity_update, entity_upsert


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("Acme Corp", "acme"),
        ("ACME Inc.", "acme"),
        ("Acme, LLC", "acme"),
        ("acme gmbh", "acme"),
        ("Acme Capital", "acme capital"),
        ("  Jon   Smith ", "jon smith"),
        ("Corp", "corp"),
        ("Procter & Gamble Co.", "procter and gamble"),
        ("Müller GmbH", "müller"),
    ],
)
def test_normalized_key_folds_case_punctuation_and_legal_suffixes(name: str, key: str) -> None:
    assert entity_normalize_key(name) == key


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("company", "organisation"),
        ("Firm", "organisation"),
        ("organization", "organisation"),
        ("city", "location"),
        ("country", "location"),
        ("team", "project"),
        ("initiative", "project"),
        ("person", "person"),
        ("spaceship", "other"),
        ("", "other"),
        (None, "other"),
    ],
)
def test_entity_types_map_onto_the_closed_set(raw: str | None, expected: str) -> None:
    assert entity_type_normalize(raw) == expected


def test_extraction_cannot_mint_reserved_types() -> None:
    assert entity_type_normalize("agent", allow_reserved=False) == "other"
    assert entity_type_normalize("service", allow_reserved=False) == "other"
    assert entity_type_normalize("agent") == "agent"


def test_upsert_creates_then_matches_by_normalized_key(access: ContextAccess) -> None:
    first = entity_upsert(access=access, name="Acme Corp", type="company", scope="org/acme")
    second = entity_upsert(access=access, name="ACME Inc.", type="organisation", scope="org/acme")
    assert first.created and not second.created
    assert second.matched_by == "key"
    assert second.entity.pk == first.entity.pk
    assert second.entity.name == "Acme Corp"
    assert "ACME Inc." in second.entity.aliases
    assert Entity.objects.count() == 1


def test_same_name_different_type_stays_apart(access: ContextAccess) -> None:
    org = entity_upsert(access=access, name="Apple", type="organisation", scope="s").entity
    fruit = entity_upsert(access=access, name="apple", type="product", scope="s").entity
    assert org.pk != fruit.pk


def test_different_companies_never_share_a_key(access: ContextAccess) -> None:
    acme = entity_upsert(access=access, name="Acme Corp", type="organisation", scope="s").entity
    capital = entity_upsert(access=access, name="Acme Capital", type="organisation", scope="s")
    assert capital.created and capital.entity.pk != acme.pk


def test_upsert_matches_by_identifier_before_name(access: ContextAccess) -> None:
    alex = entity_upsert(
        access=access,
        name="Alex Doe",
        type="person",
        scope="s",
        identifiers=[IdentifierInput("email", "Alex@Example.com")],
    ).entity
    again = entity_upsert(
        access=access,
        name="A. Doe",
        type="person",
        scope="s",
        identifiers=[{"kind": "email", "value": "alex@example.com"}],
    )
    assert again.matched_by == "identifier"
    assert again.entity.pk == alex.pk
    assert "A. Doe" in again.entity.aliases


def test_upsert_matches_by_alias(access: ContextAccess) -> None:
    created = entity_upsert(
        access=access,
        name="International Business Machines",
        type="organisation",
        scope="s",
        aliases=["IBM"],
    ).entity
    match = entity_upsert(access=access, name="ibm", type="organisation", scope="s")
    assert match.matched_by == "alias" and match.entity.pk == created.pk


def test_scopes_keep_entities_apart(access: ContextAccess) -> None:
    a = entity_upsert(access=access, name="Acme", type="organisation", scope="org/a").entity
    b = entity_upsert(access=access, name="Acme", type="organisation", scope="org/b").entity
    assert a.pk != b.pk


def test_identifier_already_owned_is_reported_not_moved(access: ContextAccess) -> None:
    entity_upsert(
        access=access,
        name="Alex",
        type="person",
        scope="s",
        identifiers=[IdentifierInput("email", "a@x.io")],
    )
    other = entity_upsert(access=access, name="Sam", type="person", scope="s")
    assert EntityIdentifier.objects.get(value="a@x.io").entity.name == "Alex"
    assert other.created


def test_huge_name_is_refused_and_nothing_written(access: ContextAccess) -> None:
    with pytest.raises(ValidationFailed) as err:
        entity_upsert(access=access, name="x" * 100_000, type="person", scope="s")
    assert err.value.code == "name_too_long"
    assert Entity.objects.count() == 0


@pytest.mark.parametrize("name", ["", "   ", "!!!", "—"])
def test_names_without_letters_are_refused(access: ContextAccess, name: str) -> None:
    with pytest.raises(ValidationFailed):
        entity_upsert(access=access, name=name, type="person", scope="s")


def test_write_outside_grants_is_refused(access: ContextAccess) -> None:
    limited = ContextAccess(
        context=access.context,
        user=None,
        role=Role.ADMIN,
        grants=Grants.from_strings(["read:*", "write:org/acme/*"]),
    )
    entity_upsert(access=limited, name="Inside", type="person", scope="org/acme/team")
    with pytest.raises(PermissionDenied):
        entity_upsert(access=limited, name="Outside", type="person", scope="org/globex")
    assert list(Entity.objects.values_list("name", flat=True)) == ["Inside"]


def test_viewer_cannot_edit_entities(access: ContextAccess) -> None:
    entity = entity_upsert(access=access, name="Alex", type="person", scope="s").entity
    viewer = ContextAccess(
        context=access.context, user=None, role=Role.VIEWER, grants=Grants.everything()
    )
    with pytest.raises(PermissionDenied):
        entity_update(access=viewer, entity=entity, name="Alexandra")


def test_rename_onto_an_existing_key_is_refused(access: ContextAccess) -> None:
    entity_upsert(access=access, name="Acme", type="organisation", scope="s")
    other = entity_upsert(access=access, name="Globex", type="organisation", scope="s").entity
    with pytest.raises(Exception) as err:
        entity_update(access=access, entity=other, name="ACME Inc")
    assert getattr(err.value, "code", "") == "entity_key_taken"
