"""Entity resolution tiers: identifier → key/alias within a type → embedding within a type
→ the optional LLM judge; attach above the high threshold, a duplicate candidate below it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from memory.domain.access import ContextAccess, system_access
from memory.models import Context, DuplicateCandidate, Entity, Run, RunOutcome
from memory.services.ingest.run import run_create, run_execute
from tests.fake_llm import FakeLLM


def _ingest(access: ContextAccess, entities: list[dict[str, Any]], **lists: Any) -> dict[str, Any]:
    triples = {"entities": entities, **lists}
    run = run_execute(
        run_id=run_create(
            access=access, text="", scope="org/acme", infer="triples", triples=triples
        ).pk
    )
    assert run.outcome in (RunOutcome.SUCCEEDED, RunOutcome.SUCCEEDED_WITH_WARNINGS), run.error
    assert run.result is not None
    return run.result


def _matched(result: dict[str, Any]) -> dict[str, tuple[int, str]]:
    return {e["mention"]: (e["id"], e["matched_by"]) for e in result["entities_matched"]}


def test_acme_inc_attaches_to_acme_corp_by_key(
    access: ContextAccess, make_entity: Callable[..., Entity]
) -> None:
    acme = make_entity("Acme Corp", "organisation")
    result = _ingest(access, [{"name": "ACME Inc.", "type": "company"}])
    assert _matched(result) == {"ACME Inc.": (acme.pk, "key")}
    acme.refresh_from_db()
    assert acme.aliases == ["ACME Inc."]  # the new spelling is kept, nothing merged
    assert Entity.objects.count() == 1


def test_acme_capital_is_another_company(
    access: ContextAccess, make_entity: Callable[..., Entity], fake_llm: FakeLLM
) -> None:
    acme = make_entity("Acme Corp", "organisation", embed=True)
    result = _ingest(access, [{"name": "Acme Capital", "type": "organisation"}])
    assert result["entities_matched"] == [] and result["merges"] == []
    [created] = result["entities_created"]
    assert created["name"] == "Acme Capital" and created["id"] != acme.pk
    # Its vector was computed to compare, and kept: no second embedding later.
    new = Entity.objects.get(pk=created["id"])
    assert new.embedding is not None and new.embedding_model == "openai:fake-embed"


def test_apple_the_company_and_apple_the_product_stay_apart(
    access: ContextAccess, make_entity: Callable[..., Entity], fake_llm: FakeLLM
) -> None:
    company = make_entity("Apple", "organisation", embed=True)
    result = _ingest(
        access,
        [{"name": "apple", "type": "product"}, {"name": "Apple", "type": "organisation"}],
        relations=[
            {
                "subject": "Apple",
                "subject_type": "organisation",
                "predicate": "makes",
                "object": "apple",
                "object_type": "product",
            }
        ],
    )
    assert _matched(result) == {"Apple": (company.pk, "name")}
    [product] = result["entities_created"]
    assert (product["name"], product["type"]) == ("apple", "product")
    [fact] = result["facts_created"]
    assert (fact["subject"]["id"], fact["object"]["id"]) == (company.pk, product["id"])


def test_a_name_without_a_type_that_fits_two_entities_is_unresolved(
    access: ContextAccess, make_entity: Callable[..., Entity]
) -> None:
    make_entity("Apple", "organisation")
    make_entity("Apple", "product")
    alex = make_entity("Alex", "person")
    result = _ingest(
        access, [], relations=[{"subject": "Alex", "predicate": "likes", "object": "Apple"}]
    )
    assert result["facts_created"] == []
    codes = {u["code"] for u in result["unresolved"]}
    assert codes == {"ambiguous_entity"}
    assert _matched(result) == {"Alex": (alex.pk, "name")}  # a name that fits one entity is fine


def test_an_identifier_beats_a_different_spelling(
    access: ContextAccess, make_entity: Callable[..., Entity]
) -> None:
    alex = make_entity(
        "Alex Rivera", "person", identifiers=[{"kind": "email", "value": "alex@acme.example"}]
    )
    result = _ingest(
        access,
        [
            {
                "name": "A. Rivera",
                "type": "person",
                "identifiers": [{"kind": "email", "value": "ALEX@acme.example"}],
            }
        ],
    )
    assert _matched(result) == {"A. Rivera": (alex.pk, "identifier")}


def test_the_nearest_scope_wins_and_two_existing_entities_are_never_merged(
    access: ContextAccess, make_entity: Callable[..., Entity]
) -> None:
    org_wide = make_entity("Acme Corp", "organisation", "org")
    local = make_entity("Acme", "organisation", "org/acme")
    result = _ingest(access, [{"name": "ACME Inc.", "type": "organisation"}])
    assert _matched(result) == {"ACME Inc.": (local.pk, "key")}
    assert set(Entity.objects.filter(merged_into__isnull=True).values_list("pk", flat=True)) == {
        org_wide.pk,
        local.pk,
    }


def test_the_review_band_becomes_a_duplicate_candidate(
    access: ContextAccess, make_entity: Callable[..., Entity], fake_llm: FakeLLM
) -> None:
    acme = make_entity("Acme Corp", "organisation", embed=True)
    result = _ingest(access, [{"name": "Acme Crop", "type": "organisation"}])  # a typo: 0.85
    [created] = result["entities_created"]
    [merge] = result["merges"]
    assert merge["action"] == "duplicate_candidate" and merge["candidate"] == {"id": acme.pk}
    assert 0.80 <= merge["score"] < 0.92
    candidate = DuplicateCandidate.objects.get()
    assert (candidate.entity_a_id, candidate.entity_b_id) == (acme.pk, created["id"])
    assert candidate.methods == ["embedding"] and candidate.status == "open"
    assert candidate.source.startswith("run ")


def test_a_threshold_set_too_low_over_merges(
    make_context: Callable[..., Context], fake_llm: FakeLLM
) -> None:
    """The reason the default is high: at 0.70, another company is taken for Acme."""
    access = system_access(make_context("loose", auto_merge_threshold=0.70, review_threshold=0.60))
    acme = Entity.objects.get(pk=_seed(access, "Acme Corp"))
    result = _ingest(access, [{"name": "Acme Capital", "type": "organisation"}])
    assert _matched(result) == {"Acme Capital": (acme.pk, "embedding")}
    [merge] = result["merges"]
    assert merge["action"] == "attached" and merge["method"] == "embedding"
    assert 0.70 <= merge["score"] < 0.80
    acme.refresh_from_db()
    assert "Acme Capital" in acme.aliases  # the over-merge, visible to curators


def _seed(access: ContextAccess, name: str) -> int:
    from memory.services.entities.writes import entity_upsert
    from memory.services.vectors import vectors_compute

    entity = entity_upsert(access=access, name=name, type="organisation", scope="org/acme").entity
    vectors_compute("entities", [entity.pk])
    return entity.pk


@pytest.mark.parametrize(("same", "outcome"), [(True, "attached"), (False, "duplicate_candidate")])
def test_the_llm_judge_decides_the_ambiguous_band(
    make_context: Callable[..., Context], fake_llm: FakeLLM, same: bool, outcome: str
) -> None:
    access = system_access(make_context("judged", llm_judge_enabled=True))
    acme_id = _seed(access, "Acme Corp")
    fake_llm.reply_json(
        {"same": same, "reason": "a typo of the same company" if same else "different firms"}
    )
    result = _ingest(access, [{"name": "Acme Crop", "type": "organisation"}])
    [merge] = result["merges"]
    assert merge["action"] == outcome
    [request] = fake_llm.chat_requests
    assert request["temperature"] == 0
    records = request["messages"][1]["content"]
    payload = json.loads(records.split("\n")[1])
    assert payload["new"]["name"] == "Acme Crop" and payload["existing"]["name"] == "Acme Corp"
    assert "untrusted data" in request["messages"][0]["content"]
    if same:
        assert _matched(result) == {"Acme Crop": (acme_id, "llm_judge")}
    else:
        assert DuplicateCandidate.objects.get().methods == ["embedding", "llm_judge"]
    run = Run.objects.get()
    assert (run.prompt_tokens, run.completion_tokens) == (120, 40)  # the judge's tokens count


def test_with_the_local_model_acme_capital_does_not_attach_to_acme_corp(
    access: ContextAccess, make_entity: Callable[..., Entity], settings: Any
) -> None:
    settings.MEMORY_EMBED_MODEL = "local:all-MiniLM-L6-v2"
    acme = make_entity("Acme Corp", "organisation", embed=True)
    result = _ingest(
        access,
        [
            {"name": "Acme Capital", "type": "organisation"},
            {"name": "ACME Inc.", "type": "organisation"},
        ],
    )
    assert _matched(result) == {"ACME Inc.": (acme.pk, "key")}
    assert [e["name"] for e in result["entities_created"]] == ["Acme Capital"]


def test_names_that_differ_in_a_number_are_never_attached(
    make_context: Callable[..., Context], fake_llm: FakeLLM
) -> None:
    """Embeddings barely see digits: "Q3" and "Q4" planning come out 0.91 similar."""
    access = system_access(
        make_context("numbers", auto_merge_threshold=0.85, review_threshold=0.80)
    )
    from memory.services.entities.writes import entity_upsert
    from memory.services.vectors import vectors_compute

    q3 = entity_upsert(
        access=access, name="Q3 Planning Offsite", type="event", scope="org/acme"
    ).entity
    vectors_compute("entities", [q3.pk])
    result = _ingest(access, [{"name": "Q4 Planning Offsite", "type": "event"}])
    assert result["entities_matched"] == []
    [merge] = result["merges"]
    assert merge["action"] == "duplicate_candidate" and merge["candidate"] == {"id": q3.pk}
    assert merge["score"] >= 0.85


def test_a_key_created_between_plan_and_write_is_matched_and_the_others_created(
    access: ContextAccess, make_entity: Callable[..., Entity]
) -> None:
    """A concurrent writer creating one of a run's new keys after the plan read them:
    the run's insert skips that row and the mention attaches to the winner's entity;
    the run's other new entities are created in the same insert."""
    from django.db import transaction

    from memory.domain.entity_names import entity_normalize_key
    from memory.services.ingest.entity_resolution import resolution_plan
    from memory.services.ingest.entity_resolution_apply import resolution_apply
    from memory.services.ingest.triples import Mention

    mentions = [
        Mention(name=name, type="organisation", key=entity_normalize_key(name))
        for name in ("Globex", "Initech", "Umbrella")
    ]
    plan = resolution_plan(access=access, visible_scopes=["org/acme"], mentions=mentions)
    assert all(p.entity_id is None for p in plan.plans)  # all three planned as new
    winner = make_entity("Initech", "organisation")  # committed by the "other writer"
    with transaction.atomic():
        resolved = resolution_apply(access=access, scope="org/acme", plan=plan, source="test")
    by_name = {r.plan.mention.name: r for r in resolved.values()}
    assert by_name["Initech"].entity.pk == winner.pk and not by_name["Initech"].created
    assert by_name["Globex"].created and by_name["Umbrella"].created
    assert Entity.objects.filter(normalized_key=entity_normalize_key("Initech")).count() == 1
    assert Entity.objects.count() == 3


def test_the_nearest_entity_is_the_same_by_exact_scan_and_by_the_index(
    access: ContextAccess, make_entity: Callable[..., Entity], fake_llm: FakeLLM
) -> None:
    # Below 2,000 candidates the tier scans exactly, above it the HNSW index serves: both
    # statements take the mentions' vectors as one vector[] and answer alike.
    from memory.infra.embeddings import embedding_model_id
    from memory.services.ingest.entity_resolution import _nearest_each

    names = ["Acme Corp", "Globex Logistics", "Initech Software", "Umbrella Health"]
    made = [make_entity(name, "organisation", embed=True) for name in names]
    person = make_entity("Dana Lee", "person", embed=True)

    def vector(entity: Entity) -> list[float]:
        assert entity.embedding is not None
        return list(entity.embedding)

    queries = [("organisation", vector(e)) for e in reversed(made)]
    queries.append(("person", vector(made[0])))  # nearest of another type

    answers = [
        _nearest_each(
            context_id=access.context.pk,
            scopes=[made[0].scope],
            model_id=embedding_model_id(),
            queries=queries,
            exact=exact,
        )
        for exact in (True, False)
    ]

    assert answers[0] == answers[1]
    found = {position: entity_id for position, (entity_id, _, _) in answers[0].items()}
    assert found == {0: made[3].pk, 1: made[2].pk, 2: made[1].pk, 3: made[0].pk, 4: person.pk}
    assert all(similarity > 0.999 for _, similarity, _ in list(answers[0].values())[:4])
