from __future__ import annotations

from collections.abc import Callable

import pytest

from memory.domain.access import ContextAccess
from memory.models import Entity
from memory.search.models import SearchDoc
from memory.selectors.search import search
from memory.selectors.search_scoring import GRAPH_LIST_WEIGHT
from memory.services.entities.writes import entity_delete, entity_update, entity_upsert
from memory.services.facts.write import fact_write
from memory.services.ingest.documents import document_create, documents_embed
from memory.services.vectors import vectors_compute

MODES = ["bm25", "vector", "hybrid", "hybrid_graph"]

# What the graph list weighs at the default graph_alpha (0.3).
W = 0.3 * GRAPH_LIST_WEIGHT


@pytest.fixture
def graph(access: ContextAccess) -> dict[str, Entity]:
    """Alex (org/acme) works at Acme; Sam (org/acme/user/sam) works at Globex."""
    people = {
        "alex": entity_upsert(access=access, name="Alex Kim", type="person", scope="org/acme"),
        "acme": entity_upsert(
            access=access,
            name="Acme Corporation",
            type="organisation",
            scope="org/acme",
            aliases=["ACME Widgets"],
        ),
        "sam": entity_upsert(
            access=access, name="Sam Lee", type="person", scope="org/acme/user/sam"
        ),
        "globex": entity_upsert(
            access=access, name="Globex", type="organisation", scope="org/acme/user/sam"
        ),
    }
    entities = {key: result.entity for key, result in people.items()}
    fact_write(
        access=access, subject=entities["alex"], predicate="works_at", object=entities["acme"]
    )
    fact_write(access=access, subject=entities["alex"], predicate="current_title", value="Engineer")
    fact_write(access=access, subject=entities["alex"], predicate="current_title", value="CTO")
    fact_write(
        access=access, subject=entities["sam"], predicate="works_at", object=entities["globex"]
    )
    vectors_compute("entities", [e.pk for e in entities.values()])
    vectors_compute(
        "facts", list(SearchDoc.objects.filter(target="fact").values_list("fact_id", flat=True))
    )
    return entities


def test_facts_are_found_by_subject_predicate_and_object(
    access: ContextAccess, graph: dict[str, Entity]
) -> None:
    response = search(access=access, query="who works at Acme", mode="bm25", target="facts")
    assert [r.text for r in response.results] == [
        "Alex Kim works_at Acme Corporation",
        "Sam Lee works_at Globex",
    ]
    assert response.results[0].type == "fact"
    assert response.results[0].meta["predicate"] == "works_at"


def test_only_current_facts_are_returned(access: ContextAccess, graph: dict[str, Entity]) -> None:
    for mode in MODES:
        response = search(access=access, query="Alex title", mode=mode, target="facts", k=10)
        texts = [r.text for r in response.results]
        assert "Alex Kim current_title CTO" in texts, mode
        assert "Alex Kim current_title Engineer" not in texts, mode


def test_vector_search_over_facts(access: ContextAccess, graph: dict[str, Entity]) -> None:
    response = search(access=access, query="Alex's job title", mode="vector", target="facts", k=1)
    assert [r.text for r in response.results] == ["Alex Kim current_title CTO"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("target", ["facts", "entities"])
def test_facts_and_entities_respect_scope_grants(
    mode: str, target: str, graph: dict[str, Entity], reader: Callable[..., ContextAccess]
) -> None:
    response = search(
        access=reader("read:org/acme"), query="Alex Acme Sam Globex works", mode=mode, target=target
    )
    assert response.results and {r.scope for r in response.results} == {"org/acme"}


def test_entities_are_found_by_name_and_alias(
    access: ContextAccess, graph: dict[str, Entity]
) -> None:
    response = search(access=access, query="acme widgets", mode="bm25", target="entities")
    assert [r.text for r in response.results] == ["Acme Corporation"]
    assert response.results[0].meta == {"entity_type": "organisation"}


def test_renaming_an_entity_reindexes_it(access: ContextAccess, graph: dict[str, Entity]) -> None:
    entity_update(access=access, entity=graph["globex"], name="Initech")
    found = search(access=access, query="initech", mode="bm25", target="entities")
    assert [r.id for r in found.results] == [graph["globex"].pk]
    assert search(access=access, query="globex", mode="bm25", target="entities").results == []


def test_deleting_an_entity_removes_it_and_its_facts_from_the_index(
    access: ContextAccess, graph: dict[str, Entity]
) -> None:
    entity_delete(access=access, entity=graph["sam"])
    assert search(access=access, query="Sam Lee", mode="bm25", target="entities").results == []
    facts = search(access=access, query="Sam Lee", mode="bm25", target="facts").results
    assert facts == []
    assert not SearchDoc.objects.filter(entity_id=graph["sam"].pk).exists()


def test_hybrid_graph_reaches_facts_and_entities_one_hop_from_a_named_keyword(
    access: ContextAccess, graph: dict[str, Entity], reader: Callable[..., ContextAccess]
) -> None:
    # A document whose keyword "acme corporation" is the normalized name of Acme.
    document = document_create(
        access=access,
        title="Acme Corporation",
        text="Acme Corporation hired new staff. The annual report of Acme Corporation is out.",
        scope="org/acme",
    )
    documents_embed(document_ids=[document.pk])

    def boosts(who: ContextAccess, target: str) -> dict[str, float]:
        response = search(
            access=who, query="Acme Corporation", mode="hybrid_graph", k=5, target=target
        )
        return {r.text: r.explain.graph_boost or 0.0 for r in response.results}

    facts = boosts(access, "facts")
    # Acme's fact through its object, Alex's other fact through Alex; Sam's not at all.
    assert facts["Alex Kim works_at Acme Corporation"] == pytest.approx(W / 61)
    assert facts["Alex Kim current_title CTO"] == pytest.approx(W / 62)
    assert facts["Sam Lee works_at Globex"] == 0.0
    entities = boosts(access, "entities")
    # Alex shares no word with the query: the graph reaches him through works_at.
    assert entities["Acme Corporation"] == pytest.approx(W / 61)
    assert entities["Alex Kim"] == pytest.approx(W / 62)
    assert entities["Globex"] == entities["Sam Lee"] == 0.0
    # The keyword's only link is in org/acme: a reader of Sam's scope alone has no seed.
    assert set(boosts(reader("read:org/acme/user/sam"), "entities").values()) == {0.0}
