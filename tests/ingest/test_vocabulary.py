"""The vocabulary gatherer: exact caps, the 25-recent rule, liveness and scope."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from memory.domain.access import ContextAccess
from memory.kernel.scopes import Grants
from memory.llm.prompt import vocabulary_render
from memory.models import Context, Entity, Fact, Role
from memory.selectors.vocabulary import vocabulary_gather
from memory.services.facts.batch import FactInput, facts_write_batch
from memory.services.facts.retraction import fact_retract
from memory.services.facts.write import fact_write, facts_expire
from memory.services.vectors import vectors_compute
from tests.api.conftest import assert_error
from tests.fake_llm import FakeLLM

SCOPE = "org/acme"


@pytest.fixture
def alex(make_entity: Callable[..., Entity]) -> Entity:
    return make_entity("Alex", "person", SCOPE)


@pytest.fixture
def acme(make_entity: Callable[..., Entity]) -> Entity:
    return make_entity("Acme", "organisation", SCOPE)


def _write(access: ContextAccess, facts: list[FactInput], scope: str = SCOPE) -> list[Fact]:
    result = facts_write_batch(access=access, scope=scope, facts=facts)
    assert all(item.error is None for item in result.items), [i.error for i in result.items]
    return [Fact.objects.get(pk=item.fact.pk) for item in result.items if item.fact is not None]


def _gather(access: ContextAccess, scope: str = SCOPE, **kw: Any) -> Any:
    return vocabulary_gather(context=access.context, scope=scope, grants=access.grants, **kw)


def test_relation_labels_are_the_hundred_most_used(
    access: ContextAccess, alex: Entity, acme: Entity
) -> None:
    facts = [FactInput(alex, f"rare_{i:02d}", "relation", object=acme) for i in range(20)]
    for i in range(100):
        facts += [FactInput(alex, f"common_{i:03d}", "relation", object=acme)] * 2
    _write(access, facts)
    labels = _gather(access).relation_labels
    assert labels == tuple(f"common_{i:03d}" for i in range(100))


def test_the_prompt_shows_the_registered_name_for_drift_with_a_confident_match(
    access: ContextAccess, alex: Entity, acme: Entity, make_entity: Callable[..., Entity]
) -> None:
    berlin = make_entity("Berlin", "location", SCOPE)
    _write(
        access,
        [
            FactInput(acme, "is_located_in", "relation", object=berlin),
            FactInput(alex, "speaks_language", "relation", object=acme),
        ],
    )

    labels = _gather(access).relation_labels

    assert "located_in" in labels and "is_located_in" not in labels
    assert "speaks_language" in labels  # unreviewed and nothing registered means it


@pytest.mark.parametrize("kind", ["attribute", "action"])
def test_the_last_25_places_go_to_recent_keys_not_already_listed(
    access: ContextAccess, alex: Entity, kind: str
) -> None:
    def fact(name: str, n: int) -> FactInput:
        return FactInput(alex, name, kind, value=f"v{n}" if kind == "attribute" else None)

    # 75 keys used three times each, long ago...
    _write(access, [fact(f"top_{i:02d}", n) for i in range(75) for n in range(3)])
    # ...then 45 keys used once each, one after the other.
    for i in range(45):
        _write(access, [fact(f"tail_{i:02d}", 0)])
    vocabulary = _gather(access)
    listed = vocabulary.attribute_keys if kind == "attribute" else vocabulary.action_verbs
    assert len(listed) == 100
    assert listed[:75] == tuple(f"top_{i:02d}" for i in range(75))
    assert listed[75:] == tuple(f"tail_{i:02d}" for i in range(44, 19, -1))


def test_superseded_expired_and_retracted_facts_do_not_keep_an_attribute_key_alive(
    access: ContextAccess, alex: Entity
) -> None:
    first, second = (
        _write(access, [FactInput(alex, "current_title", "attribute", value=v, confidence=0.9)])[0]
        for v in ("Engineer", "Staff Engineer")
    )
    first.refresh_from_db()
    assert first.status == "superseded"
    _write(access, [FactInput(alex, "favourite_colour", "attribute", value="green")])
    past = timezone.now() - timedelta(days=2)
    _write(access, [FactInput(alex, "mood", "attribute", value="tired", valid_from=past)])
    Fact.objects.filter(predicate__name="mood").update(valid_until=past + timedelta(days=1))
    assert _gather(access).attribute_keys == ("current_title", "favourite_colour", "mood")
    facts_expire()
    fact_retract(access=access, fact=second)
    # current_title now has only a superseded and a retracted fact; mood only an expired one.
    assert _gather(access).attribute_keys == ("favourite_colour",)


def test_only_what_the_write_scope_sees_appears(
    access: ContextAccess, make_entity: Callable[..., Entity]
) -> None:
    org = make_entity("Acme", "organisation", "org")
    own = make_entity("Alex", "person", "org/acme/user/alex")
    sibling = make_entity("Sam", "person", "org/acme/user/sam")
    child = make_entity("Kid", "person", "org/acme/user/alex/private")
    _write(access, [FactInput(own, "works_at", "relation", object=org)], "org/acme/user/alex")
    _write(access, [FactInput(sibling, "dislikes", "relation", object=org)], "org/acme/user/sam")
    _write(
        access,
        [FactInput(child, "secret_of", "relation", object=org)],
        "org/acme/user/alex/private",
    )
    _write(access, [FactInput(org, "headquartered_in", "attribute", value="Berlin")], "org")
    vocabulary = _gather(access, "org/acme/user/alex")
    assert vocabulary.visible_scopes == ("org/acme/user/alex", "org/acme/user", "org/acme", "org")
    assert {e.name for e in vocabulary.entities} == {"Acme", "Alex"}
    assert vocabulary.relation_labels == ("works_at",)
    assert vocabulary.attribute_keys == ("headquartered_in",)
    # A caller who may not read "org" does not see what lives there, even as vocabulary.
    narrow = ContextAccess(
        context=access.context,
        user=None,
        role=Role.VIEWER,
        grants=Grants.from_strings(["read,write:org/acme/*"]),
    )
    limited = _gather(narrow, "org/acme/user/alex")
    assert {e.name for e in limited.entities} == {"Alex"}
    assert limited.attribute_keys == ()


def test_entities_are_the_500_most_recently_updated(access: ContextAccess) -> None:
    _bulk_entities(access.context, 520)
    vocabulary = _gather(access)
    assert vocabulary.entities_truncated is True
    assert len(vocabulary.entities) == 500
    assert (
        vocabulary.entities[0].name == "Person 519" and vocabulary.entities[-1].name == "Person 20"
    )
    assert {e.why for e in vocabulary.entities} == {"recent"}


def test_with_more_than_500_entities_the_ones_the_turn_names_or_resembles_come_first(
    access: ContextAccess, fake_llm: FakeLLM
) -> None:
    old = Entity.objects.create(
        context=access.context,
        scope=SCOPE,
        name="Zeta Holdings GmbH",
        type="organisation",
        normalized_key="zeta holdings",
        alias_keys=["zeta"],
    )
    similar = Entity.objects.create(
        context=access.context,
        scope=SCOPE,
        name="Quasar Analytics",
        type="organisation",
        normalized_key="quasar analytics",
    )
    vectors_compute("entities", [similar.pk])
    Entity.objects.filter(pk__in=[old.pk, similar.pk]).update(
        updated_at=timezone.now() - timedelta(days=900)
    )
    _bulk_entities(access.context, 600)
    assert old.pk not in {e.id for e in _gather(access).entities}  # too old on recency alone
    turn = "Call with Zeta about the Quasar Analytic dashboards."
    vocabulary = _gather(access, text=turn, embed=lambda t: _fake_vector(t))
    assert len(vocabulary.entities) == 500
    first, second = vocabulary.entities[:2]
    assert (first.id, first.why) == (old.pk, "named")  # "zeta" is one of its aliases
    assert (second.id, second.why) == (similar.pk, "similar")
    assert vocabulary.entities[2].why == "recent"


def _fake_vector(text: str) -> list[float]:
    from tests.fake_llm import fake_embedding

    return fake_embedding(text)


def _bulk_entities(context: Context, count: int) -> None:
    now = timezone.now()
    Entity.objects.bulk_create(
        Entity(
            context=context,
            scope=SCOPE,
            name=f"Person {i}",
            type="person",
            normalized_key=f"person {i}",
        )
        for i in range(count)
    )
    for i, pk in enumerate(
        Entity.objects.filter(name__startswith="Person ")
        .order_by("pk")
        .values_list("pk", flat=True)
    ):
        Entity.objects.filter(pk=pk).update(updated_at=now - timedelta(minutes=count - i))


def test_gathering_costs_three_queries(
    access: ContextAccess, alex: Entity, acme: Entity, django_assert_num_queries: Any
) -> None:
    _write(access, [FactInput(alex, "works_at", "relation", object=acme)])
    # 1. usage sums per (kind, predicate) over the visible scopes
    # 2. the newest live entities of each visible scope (UNION ALL)
    # 3. the claims curators rejected (none here: the partial index fact_rejected)
    with django_assert_num_queries(3):
        _gather(access)


def test_the_vocabulary_endpoint_shows_what_the_prompt_shows(
    access: ContextAccess,
    api: APIClient,
    base: str,
    alex: Entity,
    acme: Entity,
    api_client_for: Callable[..., APIClient],
) -> None:
    _write(access, [FactInput(alex, "works_at", "relation", object=acme)])
    response = api.get(f"{base}/vocabulary", {"scope": SCOPE})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["relation_labels"] == ["works_at"]
    assert [(e["name"], e["type"]) for e in body["entities"]] == [
        ("Acme", "organisation"),
        ("Alex", "person"),
    ]
    assert body["prompt_section"] == vocabulary_render(_gather(access))
    assert body["visible_scopes"] == ["org/acme", "org"]
    outsider = api_client_for(access.context, role=Role.VIEWER, grants=["read:org/globex/*"])
    assert_error(outsider.get(f"{base}/vocabulary", {"scope": SCOPE}), 404)
    assert_error(api.get(f"{base}/vocabulary"), 400, "invalid")
    assert_error(api.get(f"{base}/vocabulary", {"scope": "../etc"}), 400, "invalid_scope")


def test_usage_follows_every_writer_and_folds_without_changing_the_lists(
    access: ContextAccess, alex: Entity, acme: Entity, make_entity: Callable[..., Entity]
) -> None:
    from memory.models import PredicateUsage
    from memory.services.entities.writes import entity_delete
    from memory.services.registry.usage import vocabulary_usage_compact

    dana = make_entity("Dana", "person", SCOPE)
    for _ in range(3):
        _write(access, [FactInput(alex, "works_at", "relation", object=acme)])  # re-observed
    _write(access, [FactInput(dana, "advises", "relation", object=acme)])
    fact_write(access=access, subject=dana, predicate="mentors", object=alex)  # one by one
    before = _gather(access)
    assert before.relation_labels == ("works_at", "advises", "mentors")  # 3 sightings first
    rows = PredicateUsage.objects.filter(context=access.context, scope=SCOPE)
    assert rows.count() > 3  # one delta per statement
    vocabulary_usage_compact(context=access.context, scopes=[SCOPE], force=True)
    assert rows.count() == 3 and _gather(access) == before
    entity_delete(access=access, entity=dana)  # deletes Dana's facts with her
    assert _gather(access).relation_labels == ("works_at",)
    vocabulary_usage_compact(context=access.context, scopes=[SCOPE], force=True)
    assert rows.count() == 1  # groups with nothing left are dropped
