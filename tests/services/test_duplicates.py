"""Duplicates scored by names and attributes: a pair that only spelling or sound links
is proposed only when the slip is telling or something else agrees; the full scan
backfills and withdraws; precise matches rank first."""

from __future__ import annotations

from typing import Any

import pytest

from memory.domain.access import ContextAccess
from memory.models import Entity
from memory.models.duplicate import DuplicateCandidate, DuplicateKey, DuplicateStatus
from memory.services.duplicates.finder import duplicates_scan
from memory.services.entities.writes import entity_upsert

pytestmark = pytest.mark.django_db

# Companies whose one distinctive word is short, and 21 more "… Freight": the shared word
# is common, so it tells no two of them apart.
FREIGHT = ["Amber", "Birch", "Cedar", "Delta", "Ember", "Falcon", "Garnet", "Harbor", "Indigo",
           "Juniper", "Lumen", "Mosaic", "Nimbus", "Orchid", "Pinnacle", "Quartz", "Raven",
           "Summit", "Tundra", "Vertex", "Willow"]  # fmt: skip


def _entity(access: ContextAccess, name: str, type_: str = "person", **extra: Any) -> Entity:
    extra.setdefault("scope", "org/acme")
    return entity_upsert(access=access, name=name, type=type_, **extra).entity


def _pair(a: Entity, b: Entity) -> DuplicateCandidate | None:
    low, high = sorted([a.pk, b.pk])
    return DuplicateCandidate.objects.filter(entity_a_id=low, entity_b_id=high).first()


def _freight_companies(access: ContextAccess) -> None:
    for word in FREIGHT:
        _entity(access, f"{word} Freight", "organisation")


def test_a_phonetic_variant_of_one_word_is_found(access: ContextAccess) -> None:
    stefan = _entity(access, "Stefan Kowalczyk")
    stephan = _entity(access, "Stephan Kowalczyk")

    pair = _pair(stefan, stephan)  # found as the second was written
    assert pair is not None and pair.source == "check"
    # Found by sound, and the names are alike beside a surname no one else here has.
    assert "phonetic" in pair.methods
    name = next(f for f in pair.explain if f["field"] == "name")
    assert name["weight"] > 0


def test_a_phonetic_collision_of_two_names_is_not_proposed(access: ContextAccess) -> None:
    _freight_companies(access)
    kamo = _entity(access, "Kamo Freight", "organisation")
    kuma = _entity(access, "Kuma Freight", "organisation")

    duplicates_scan(context=access.context, use_embeddings=False)

    # Same phonetic key (KM FRFT), but the word that differs is short and "freight" is
    # what every second company here is called: nothing says they are one company.
    assert _pair(kamo, kuma) is None


def test_agreeing_attributes_back_a_phonetic_pair(access: ContextAccess) -> None:
    _freight_companies(access)
    registered = {"attributes": {"registry_number": "HRB 4711"}}
    kamo = _entity(access, "Kamo Freight", "organisation", **registered)
    kuma = _entity(access, "Kuma Freight", "organisation", **registered)

    pair = _pair(kamo, kuma)
    assert pair is not None and "attributes" in pair.methods
    fields = {f["field"]: f for f in pair.explain}
    assert fields["attr:registry_number:text"]["level"] == "equal"


@pytest.mark.parametrize(
    ("first", "second", "found"),
    [
        ("Kubernetes", "Kubernets", True),  # one slip in a long word
        ("Jon Smith", "John Smith", True),  # one slip, and a surname only they have
        ("Kamo Freight", "Kamu Freight", False),  # one slip in a short word of a common name
        ("Kamo Freight", "Kmao Freight", True),  # two letters swapped: seldom another name
        ("Kamo Freight", "Kammo Freight", True),  # a letter typed twice
        ("Kamo Freight Ltd", "Freight Ltd, Kamo", True),  # reordered, the legal form inside
    ],
)
def test_a_typo_is_found_when_the_slip_is_not_all_that_tells_the_names_apart(
    access: ContextAccess, first: str, second: str, found: bool
) -> None:
    _freight_companies(access)
    a, b = _entity(access, first, "organisation"), _entity(access, second, "organisation")

    assert (_pair(a, b) is not None) is found


def test_a_respelling_with_the_same_consonants_only_they_have_is_found(
    access: ContextAccess,
) -> None:
    _freight_companies(access)
    base = _entity(access, "Kamori Telisuva")
    respelt = _entity(access, "Kemura Talosovu")  # every vowel changed, the consonants kept
    other = _entity(access, "Kamari Telosevu")  # the same consonants: a third such name

    pair = _pair(base, respelt)
    assert pair is not None and "consonants" in pair.methods
    # Three names share the consonants now: none of them tells two apart any more.
    duplicates_scan(context=access.context, use_embeddings=False)
    assert _pair(base, respelt) is None and _pair(base, other) is None


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
    assert "key" in by_key.methods and "phonetic" in by_sound.methods
    assert by_sound.score < by_key.score


def test_a_rescan_withdraws_open_pairs_below_the_match_probability(
    access: ContextAccess,
) -> None:
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
        DuplicateCandidate.objects.update_or_create(
            context=access.context,
            entity_a_id=low,
            entity_b_id=high,
            defaults={
                "score": 0.8,
                "methods": ["phonetic"],
                "status": status,
                "source": source,
            },
        )

    report = duplicates_scan(context=access.context, use_embeddings=False)

    # (Pairs the writes stored while "freight" was still a rare word go too.)
    assert report.withdrawn >= 1
    assert _pair(kamo, kuma) is None
    assert _pair(kamo, kama) is not None and _pair(kuma, kama) is not None


def test_the_scan_backfills_entities_written_before_incremental_checks(
    access: ContextAccess,
) -> None:
    a = _entity(access, "Marguerite Okonkwo")
    b = _entity(access, "Marguerite Okonkow")
    # As after upgrading: no blocking keys, no candidates.
    DuplicateKey.objects.all().delete()
    DuplicateCandidate.objects.all().delete()

    report = duplicates_scan(context=access.context, use_embeddings=False)

    pair = _pair(a, b)
    assert pair is not None and pair.source == "scan" and report.stored == 1
    assert DuplicateKey.objects.filter(entity=a).exists()
    # With its keys back, the next write is checked against it again.
    c = _entity(access, "Marguerite Okonkwo", scope="org/globex")
    assert _pair(a, c) is not None


def test_checking_one_entity_takes_a_few_statements_whatever_the_context_holds(
    access: ContextAccess,
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from memory.services.duplicates.finder import duplicates_check

    _freight_companies(access)
    for name in ("Jon Smith", "John Smith", "Jane Smith", "Priya Patel"):
        _entity(access, name, attributes={"date_of_birth": "1988-04-12"})
    late = _entity(access, "Jonh Smith", attributes={"date_of_birth": "1988-04-12"})

    with CaptureQueriesContext(connection) as statements:
        report = duplicates_check([late.pk])

    assert report is not None and report.compared >= 4 and report.stored >= 1
    # Records, keys with their holders, neighbours, stored pairs, the others' records,
    # the model with the live count (a small context may be re-estimated), the writes.
    assert len(statements) <= 8, [q["sql"][:80] for q in statements.captured_queries]


def test_the_check_reads_the_model_and_the_live_count_in_one_statement(
    access: ContextAccess,
) -> None:
    from memory.matching.model import Model
    from memory.matching.weights import (
        AUTO_FIT_UP_TO,
        model_read,
        model_read_for_check,
        model_save,
    )

    context_id = access.context.pk
    for name in ("Jon Smith", "Jane Smith", "Priya Patel"):
        _entity(access, name)
    Entity.objects.filter(context_id=context_id, name="Jane Smith").update(
        merged_into=Entity.objects.get(context_id=context_id, name="Jon Smith")
    )
    assert model_read_for_check(context_id) == (*model_read(context_id), 2)

    model_save(context_id, Model.from_json(None), 40)
    assert model_read_for_check(context_id) == (*model_read(context_id), 2)
    assert model_read(context_id)[1] == 40
    # Past the automatic refits the count is not run at all.
    model_save(context_id, Model.from_json(None), AUTO_FIT_UP_TO)
    assert model_read_for_check(context_id) == (*model_read(context_id), None)


GIVEN = ["Amara", "Bodhi", "Calla", "Dario", "Elise", "Farid", "Greta", "Hiro", "Ines", "Jonas",
         "Kenji", "Leila", "Mateo", "Nadia", "Oskar", "Paloma", "Quinn", "Rosa", "Soren",
         "Talia"]  # fmt: skip
FAMILY = ["Abernathy", "Brightwater", "Castellanos", "Delacroix", "Eriksen", "Fairweather"]


def test_a_doubled_context_queues_one_reestimate_and_the_worker_runs_it(
    access: ContextAccess, django_capture_on_commit_callbacks: Any
) -> None:
    from django_tasks_db.models import DBTaskResult

    from memory.infra.queueing import DUPLICATES_REFIT_TASK, queued_task
    from memory.matching.weights import model_read
    from memory.services.duplicates.pairs import MIN_FIT_ENTITIES

    context_id = access.context.pk
    names = [f"{g} {f}" for f in FAMILY for g in GIVEN][: MIN_FIT_ENTITIES + 3]
    for name in names:  # each its own write, as agents write them
        with django_capture_on_commit_callbacks(execute=True):
            _entity(access, name)

    # The writes that found the context grown did not re-estimate in their transaction:
    # they queued one re-estimate between them.
    assert model_read(context_id)[1] == 0
    queued = DBTaskResult.objects.filter(task_path=DUPLICATES_REFIT_TASK)
    assert [row.args_kwargs["args"] for row in queued] == [[context_id]]

    assert queued_task(DUPLICATES_REFIT_TASK).call(context_id) == {"refitted": True}
    assert model_read(context_id)[1] == len(names)
    # Done: a second run finds nothing due, and the next write queues nothing.
    assert queued_task(DUPLICATES_REFIT_TASK).call(context_id) == {"refitted": False}
    queued.delete()
    with django_capture_on_commit_callbacks(execute=True):
        _entity(access, "Ulla Grimsdottir")
    assert not queued.exists()


def test_a_reestimate_scores_again_every_pair_written_since_the_last_one(
    access: ContextAccess,
) -> None:
    import random

    from memory.infra.queueing import DUPLICATES_REFIT_TASK, queued_task
    from memory.matching.weights import model_read
    from memory.services.duplicates.finder import duplicates_check

    rng = random.Random(5)
    families = [_word(rng, 3) for _ in range(8)]  # a few shared surnames: many blocked pairs
    for i in range(200):
        given, family = _word(rng, 2), families[i % len(families)]
        attributes = {
            "date_of_birth": f"{rng.randint(1940, 2005)}-{rng.randint(1, 12):02d}-"
            f"{rng.randint(1, 28):02d}",
            "postcode": str(rng.randint(10000, 99999)),
        }
        _entity(access, f"{given} {family}", attributes=attributes)
        if i % 4 == 0:  # a quarter of them again, from another source, with a slip
            _entity(access, f"{given} {family[:-1]}x", attributes=attributes, scope="org/globex")
    pairs = DuplicateCandidate.objects.order_by("entity_a_id", "entity_b_id")
    before = {(p.entity_a_id, p.entity_b_id): p.explain for p in pairs.all()}
    assert len(before) >= 25

    queued_task(DUPLICATES_REFIT_TASK).call(access.context.pk)

    model, fitted_on = model_read(access.context.pk)
    assert fitted_on == 250 and model.fitted_pairs > 0
    after = {(p.entity_a_id, p.entity_b_id): (p.score, p.explain) for p in pairs.all()}
    # The pairs of the doubling are scored by the new weights: a check changes nothing.
    assert all(after[pair][1] != explain for pair, explain in before.items() if pair in after)
    duplicates_check([x for pair in after for x in pair])
    assert {(p.entity_a_id, p.entity_b_id): (p.score, p.explain) for p in pairs.all()} == after


def _word(rng: Any, syllables: int) -> str:
    return "".join(rng.choice("bdfgklmnprstvz") + rng.choice("aeiou") for _ in range(syllables))
