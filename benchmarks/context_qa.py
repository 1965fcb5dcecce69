"""Does the memory block answer the question? A labelled set over a memory with distractors,
through ``POST context``, beside the previous ordering computed in the same run.

    .venv/bin/python -m benchmarks.context_qa            # 650 people, ~6,000 facts, 200 questions
    .venv/bin/python -m benchmarks.context_qa --tiny     # 80 people, 60 questions

The memory (seeded, deterministic): people, each with an employer (``works_at``), a title
(``current_title``), a home town (``lives_in``, unregistered), a manager (``reports_to``),
three acquaintances (``knows``) and a colleague (``works_with``) — all confident and
important, so every person's card is full of facts that do not answer a given question;
some also have a birthplace (``born_in``), an allergy (``allergic_to``), a language
(``speaks``) and a mentor (``mentors``, unregistered, written from the mentor's side).
Projects have a leader (``leads``, unregistered) and committed people (``committed_to``:
the same people, the wrong relation), and depend on a product; organisations are located
in a city and were founded by someone. First names and surnames repeat across people.

The questions (written from templates over the generated facts, each labelled with the
one fact that answers it): who/what/where/which questions on relations and attributes,
registered and unregistered predicates, either side of the relation, paraphrases ("manager"
for ``reports_to``), lowercase questions and names with a slip ("Dnaa Lee").

For each question: ``POST context`` at a 300-token budget through the in-process API client
(wall time includes the query's embedding); the answering fact's position among the
block's facts: in the first three, anywhere in the block; and how many of the block's
facts have none of the entities it centres on at either end (padding, unless a relation
question reaches them through a neighbour). Beside it, the previous ordering
(the block's code before relevance ranking, reproduced here: the two entities BM25 finds
in the query, their facts as subject and the facts the query finds, by the ranking
formula, packed into the same budget). The memory is vacuumed and analyzed before the
questions, as autovacuum would soon do on a running server. Throwaway database.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from dataclasses import dataclass
from typing import Any

from tqdm import tqdm

from benchmarks.search_common import bench_database, latency_summary, machine_line, markdown_table

BUDGET = 300
SEED = 26
FIRST = [
    "Dana", "Alex", "Maria", "Priya", "Jon", "Hannah", "Omar", "Lena", "Mateo", "Sofia",
    "Kenji", "Amara", "Lucas", "Ingrid", "Ravi", "Chloe", "Tariq", "Elena", "Noah", "Yara",
    "Felix", "Nadia", "Hugo", "Aisha", "Marco", "Zoe", "Ivan", "Leila", "Samuel", "Mei",
]  # fmt: skip
LAST = [
    "Lee", "Rivera", "Chen", "Patel", "Smith", "Ortiz", "Haddad", "Novak", "Garcia", "Rossi",
    "Tanaka", "Okafor", "Martin", "Larsen", "Sharma", "Dubois", "Aziz", "Petrova", "Walker",
    "Khalil", "Weber", "Hussain", "Moreau", "Bello", "Conti", "Fischer", "Kowalski", "Said",
    "Brennan", "Lindqvist", "Moretti", "Nakamura", "Adeyemi", "Castillo", "Sorensen",
]  # fmt: skip
ORG_A = ["North", "Blue", "Iron", "Bright", "Silver", "Red", "Green", "Stone", "Swift", "Clear"]
ORG_B = ["wind Logistics", "loop Labs", "field Systems", "gate Analytics", "peak Health"]
CITIES = [
    "Berlin", "Lisbon", "Rotterdam", "Nairobi", "Osaka", "Toronto", "Austin", "Lyon",
    "Krakow", "Porto", "Seoul", "Denver", "Dublin", "Turin", "Malmo", "Leeds", "Accra",
    "Valencia", "Hamburg", "Zurich", "Oslo", "Bologna", "Quito", "Perth", "Tallinn",
]  # fmt: skip
PROJECT_WORDS = [
    "Phoenix", "Hammock", "Nightjar", "Kestrel", "Lantern", "Harbor", "Juniper", "Comet",
    "Falcon", "Orchard", "Meridian", "Tundra", "Basalt", "Cobalt", "Willow", "Aurora",
    "Sparrow", "Granite", "Horizon", "Mosaic", "Pioneer", "Quartz", "Sequoia", "Tempest",
    "Vertex", "Zephyr", "Atlas", "Beacon", "Cinder", "Drift", "Ember", "Fjord", "Glacier",
    "Helix", "Ion", "Jasper", "Kite", "Lumen", "Monsoon", "Nimbus",
]  # fmt: skip
PRODUCTS = [
    "Kubernetes", "PostgreSQL", "Kafka", "Redis", "Terraform", "Snowflake", "Airflow",
    "Elasticsearch", "RabbitMQ", "Grafana", "Spark", "ClickHouse",
]  # fmt: skip
TITLES = [
    "Staff Engineer", "Data Scientist", "Product Manager", "Engineering Manager",
    "Designer", "Site Reliability Engineer", "Analyst", "Director of Operations",
]  # fmt: skip
ALLERGIES = ["peanuts", "penicillin", "shellfish", "pollen", "latex", "cats"]
LANGUAGES = ["Portuguese", "Japanese", "Swahili", "Polish", "Korean", "Dutch", "Arabic"]


@dataclass
class Triple:
    subject: str
    predicate: str
    object: str | None = None
    value: str | None = None


@dataclass
class Question:
    text: str
    answer: Triple
    template: str
    fact_id: int = 0


def build_memory(people: int, rng: random.Random) -> tuple[dict[str, str], list[Triple]]:
    """(entity name → type, triples)."""
    names: list[str] = []
    for first in FIRST:
        for last in LAST:
            names.append(f"{first} {last}")
    rng.shuffle(names)
    persons = names[:people]
    orgs = [a + b for a in ORG_A for b in ORG_B][: max(10, people // 12)]
    projects = [f"Project {w}" for w in PROJECT_WORDS][: max(10, people // 16)]
    types = {p: "person" for p in persons}
    types |= {o: "organisation" for o in orgs}
    types |= {c: "location" for c in CITIES}
    types |= {p: "project" for p in projects}
    types |= {p: "product" for p in PRODUCTS}
    facts: list[Triple] = []
    for i, person in enumerate(persons):
        others = [p for p in rng.sample(persons, 6) if p != person]
        facts.append(Triple(person, "works_at", rng.choice(orgs)))
        facts.append(Triple(person, "current_title", value=rng.choice(TITLES)))
        facts.append(Triple(person, "lives_in", rng.choice(CITIES)))
        if i % 7:
            facts.append(Triple(person, "reports_to", others[0]))
        facts += [Triple(person, "knows", o) for o in others[1:4]]
        facts.append(Triple(person, "works_with", others[4]))
        if i % 3 == 0:
            facts.append(Triple(person, "born_in", rng.choice(CITIES)))
        if i % 3 == 1:
            facts.append(Triple(person, "allergic_to", value=rng.choice(ALLERGIES)))
        if i % 4 == 2:
            facts.append(Triple(person, "speaks", value=rng.choice(LANGUAGES)))
        if i % 3 == 2:
            facts.append(Triple(others[-1], "mentors", person))
    for project in projects:
        crew = rng.sample(persons, 4)
        facts.append(Triple(crew[0], "leads", project))
        facts += [Triple(p, "committed_to", project) for p in crew[1:]]
        facts.append(Triple(project, "depends_on", rng.choice(PRODUCTS)))
    for org in orgs:
        facts.append(Triple(org, "located_in", rng.choice(CITIES)))
        facts.append(Triple(rng.choice(persons), "founded", org))
    return types, facts


TEMPLATES: dict[str, tuple[str, str, str]] = {
    # name: (predicate, which end the question names, question text)
    "reports_to": ("reports_to", "subject", "Who does {s} report to?"),
    "manager": ("reports_to", "subject", "Who is {s}'s manager?"),
    "employer": ("works_at", "subject", "Which company does {s} work for?"),
    "lives": ("lives_in", "subject", "Where does {s} live?"),
    "title": ("current_title", "subject", "What is {s}'s job title?"),
    "allergy": ("allergic_to", "subject", "What is {s} allergic to?"),
    "mentor": ("mentors", "object", "Who mentors {o}?"),
    "leader": ("leads", "object", "Who leads {o}?"),
    "leads": ("leads", "subject", "Which project does {s} lead?"),
    "depends": ("depends_on", "subject", "What does {s} depend on?"),
    "located": ("located_in", "subject", "Where is {s} located?"),
    "founder": ("founded", "object", "Who founded {o}?"),
    "speaks": ("speaks", "subject", "What language does {s} speak?"),
    "born": ("born_in", "subject", "Where was {s} born?"),
}


def slip(name: str, rng: random.Random, taken: set[str]) -> str | None:
    """The name with one slip in its last word (two letters swapped, or one doubled),
    unless that is another entity's name."""
    first, _, last = name.rpartition(" ")
    if len(last) < 4:
        return None
    i = rng.randrange(1, len(last) - 2)
    swapped = last[:i] + last[i + 1] + last[i] + last[i + 2 :]
    typed = f"{first} {swapped}" if swapped != last else f"{first} {last[:i]}{last[i]}{last[i:]}"
    return None if typed.casefold() in taken else typed


def build_questions(
    facts: list[Triple], count: int, rng: random.Random, names: set[str]
) -> list[Question]:
    """``count`` questions, the templates taking turns, each answered by exactly one fact."""
    by_template: dict[str, list[Triple]] = {}
    counts: dict[tuple[str, str, str], int] = {}
    for fact in facts:
        for end in ("subject", "object"):
            named = fact.subject if end == "subject" else (fact.object or "")
            counts[(fact.predicate, end, named)] = counts.get((fact.predicate, end, named), 0) + 1
    for name, (predicate, end, _) in TEMPLATES.items():
        by_template[name] = [
            f
            for f in facts
            if f.predicate == predicate
            and counts[(predicate, end, f.subject if end == "subject" else f.object or "")] == 1
        ]
        rng.shuffle(by_template[name])
    folded = {n.casefold() for n in names}
    questions: list[Question] = []
    order = list(TEMPLATES)
    while len(questions) < count:
        name = order[len(questions) % len(order)]
        predicate, end, text = TEMPLATES[name]
        fact = by_template[name].pop()
        named = fact.subject if end == "subject" else fact.object or ""
        label = name
        variant = len(questions) % 10
        if variant == 3 and " " in named and not named.startswith("Project"):
            slipped = slip(named, rng, folded)
            if slipped:
                named, label = slipped, name + " (slip)"
        question = text.format(s=named, o=named)
        if variant == 7:
            question, label = question.lower(), label + " (lowercase)"
        questions.append(Question(question, fact, label))
    return questions


def write_memory(access: Any, types: dict[str, str], facts: list[Triple]) -> dict[int, Triple]:
    from memory.services.entities.writes import entity_upsert
    from memory.services.facts.batch import facts_write_batch
    from memory.services.facts.batch_plan import FactInput

    entities = {
        name: entity_upsert(access=access, name=name, type=type_, scope="org/bench").entity
        for name, type_ in tqdm(types.items(), desc="entities", unit="entity")
    }
    written: dict[int, Triple] = {}
    for start in tqdm(range(0, len(facts), 500), desc="facts", unit="batch"):
        batch = facts[start : start + 500]
        inputs = [
            FactInput(
                subject=entities[f.subject],
                predicate=f.predicate,
                object=entities[f.object] if f.object else None,
                value=f.value,
                confidence=0.95,
                importance=0.9,
            )
            for f in batch
        ]
        result = facts_write_batch(access=access, scope="org/bench", facts=inputs)
        for fact, item in zip(batch, result.items, strict=True):
            assert item.fact is not None and item.fact.pk is not None, item.error
            written[item.fact.pk] = fact
    return written


def settle() -> None:
    """Vacuum and analyze what was just written, as autovacuum does soon after on a
    running server: the questions are timed against a settled memory, not against the
    autovacuum workers the fresh writes wake (they took p95 from ~80 to ~115 ms)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE)")


def written_before(context: Any) -> dict[int, Triple]:
    """The facts a ``--keep`` run wrote, read back as the triples they were written from."""
    from memory.models import Fact

    rows = Fact.objects.filter(context=context).values_list(
        "pk", "subject__name", "raw_predicate", "object__name", "value"
    )
    return {
        pk: Triple(subject, predicate, obj, value if isinstance(value, str) else None)
        for pk, subject, predicate, obj, value in rows
    }


def previous_ordering(access: Any, query: str, budget: int) -> list[int]:
    """The fact ids the block held before relevance ranking, in its order: the two
    entities BM25 finds in the query, their facts as subject (40 each) and the 20 facts
    the query finds, by the ranking formula, as many as fit the budget."""
    from django.utils import timezone

    from memory.models import Entity, FactStatus
    from memory.selectors.facts import (
        RANK_MIN_CONFIDENCE,
        entity_facts_ranked,
        fact_rank_score,
        facts_visible,
    )
    from memory.selectors.memory_context_layout import estimate_tokens, fact_line
    from memory.selectors.search import search

    now = timezone.now()
    ids = [
        r.id
        for r in search(access=access, query=query, mode="bm25", k=2, target="entities").results
    ]
    focus = [e for e in Entity.objects.filter(pk__in=ids).defer("embedding")]
    scored: dict[int, tuple[Any, float]] = {}
    for entity in focus:
        for ranked in entity_facts_ranked(access=access, entity=entity, limit=40):
            scored[ranked.fact.pk] = (ranked.fact, ranked.score)
    found = [r.id for r in search(access=access, query=query, k=20, target="facts").results]
    rows = (
        facts_visible(access=access)
        .filter(pk__in=found, status=FactStatus.CURRENT, confidence__gte=RANK_MIN_CONFIDENCE)
        .exclude(pk__in=list(scored))
        .select_related("subject", "object", "predicate")
    )
    for fact in rows:
        scored[fact.pk] = (fact, fact_rank_score(fact, now=now))
    best = sorted(scored.values(), key=lambda item: (-item[1], -item[0].pk))
    header = f"# Memory context (bench): {', '.join(e.name for e in focus)}; query {query!r}"
    room = budget - estimate_tokens(header) - 16
    kept = []
    for fact, score in best:
        line = fact_line(fact, score)
        if line.tokens > room:
            break
        kept.append(fact.pk)
        room -= line.tokens
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tiny", action="store_true", help="80 people, 60 questions")
    parser.add_argument("--people", type=int, default=650)
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="question the memory a --keep run left (same --people) instead of writing it again",
    )
    parser.add_argument("--misses", action="store_true", help="print the questions missed")
    args = parser.parse_args()
    people, count = (80, 60) if args.tiny else (args.people, args.questions)
    rng = random.Random(SEED)
    types, facts = build_memory(people, rng)
    questions = build_questions(facts, count, rng, set(types))

    with bench_database("md_bench_context_qa", keep=args.keep or args.reuse, reuse=args.reuse):
        from django.contrib.auth import get_user_model
        from rest_framework.test import APIClient

        from memory.domain.access import system_access
        from memory.infra.embeddings import embed_texts
        from memory.models import Context, ContextMembership, Role
        from memory.services.contexts import context_create
        from memory.services.tokens import token_issue
        from memory.services.vectors import embeddings_drain

        embed_texts(["warm up"])
        kept = Context.objects.filter(slug="bench").first() if args.reuse else None
        context = kept or context_create(slug="bench", name="Context QA")
        access = system_access(context)
        started = time.perf_counter()
        written = written_before(context) if kept else write_memory(access, types, facts)
        write_s = time.perf_counter() - started
        started = time.perf_counter()
        drain = embeddings_drain()
        drain_s = time.perf_counter() - started
        settle()
        ids = {(t.subject, t.predicate, t.object, t.value): pk for pk, t in written.items()}
        for q in questions:
            a = q.answer
            q.fact_id = ids[(a.subject, a.predicate, a.object, a.value)]
        user, _ = get_user_model().objects.get_or_create(username="bench")
        ContextMembership.objects.get_or_create(
            user=user, context=context, defaults={"role": Role.ADMIN, "grants": ["read,write:*"]}
        )
        raw = token_issue(user=user, context=context, grants=["read,write:*"]).raw
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
        base = f"/api/v1/contexts/{context.slug}"
        for q in questions[:5]:  # warm the caches and the connection outside the timing
            client.post(
                f"{base}/context", {"query": q.text, "budget_tokens": BUDGET}, format="json"
            )

        ms: list[float] = []
        now_ranks: list[int | None] = []
        before_ranks: list[int | None] = []
        others: list[int] = []  # facts per block about none of the entities it centres on
        for q in tqdm(questions, desc="questions", unit="question"):
            started = time.perf_counter()
            response = client.post(
                f"{base}/context", {"query": q.text, "budget_tokens": BUDGET}, format="json"
            )
            ms.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, response.content
            block = response.json()
            order = [f["id"] for f in block["facts"]]
            others.append(_about_others(block))
            now_ranks.append(order.index(q.fact_id) if q.fact_id in order else None)
            before = previous_ordering(access, q.text, BUDGET)
            before_ranks.append(before.index(q.fact_id) if q.fact_id in before else None)

    def share(ranks: list[int | None], within: int | None) -> float:
        hits = [r for r in ranks if r is not None and (within is None or r < within)]
        return len(hits) / len(ranks)

    latency = latency_summary(ms)
    print(
        f"Context QA: {len(types)} entities, {len(facts)} facts, {len(questions)} questions; "
        f"budget {BUDGET} tokens; writes {write_s:.1f} s, embedding drain {drain_s:.1f} s "
        f"({sum(drain.written.values())} vectors). {machine_line()}"
    )
    print()
    print(
        markdown_table(
            ["ordering", "answer first", "in first three", "in the block", "p50 ms", "p95 ms"],
            [
                [
                    "relevance (POST context)",
                    share(now_ranks, 1),
                    share(now_ranks, 3),
                    share(now_ranks, None),
                    latency["p50"],
                    latency["p95"],
                ],
                [
                    "previous: ranking formula",
                    share(before_ranks, 1),
                    share(before_ranks, 3),
                    share(before_ranks, None),
                    "—",
                    "—",
                ],
            ],
        )
    )
    print()
    templates = sorted({q.template for q in questions})
    rows = []
    for template in templates:
        picked = [i for i, q in enumerate(questions) if q.template == template]
        rows.append(
            [
                template,
                len(picked),
                share([now_ranks[i] for i in picked], 3),
                share([before_ranks[i] for i in picked], 3),
            ]
        )
    print(markdown_table(["question", "n", "first three (now)", "first three (before)"], rows))
    print()
    print(
        f"Facts about none of the entities a block centres on: {statistics.fmean(others):.2f} "
        f"a block (mean), in {sum(1 for n in others if n) / len(others):.0%} of the blocks."
    )
    if args.misses:
        for q, rank in zip(questions, now_ranks, strict=True):
            if rank is None or rank >= 3:
                print(f"MISS rank={rank}: {q.text} -> {q.answer}")


def _about_others(block: dict[str, Any]) -> int:
    """How many of a block's facts have none of its entities at either end."""
    focus = {entity["id"] for entity in block["entities"]}
    return sum(
        1
        for fact in block["facts"]
        if fact["subject"]["id"] not in focus
        and (fact["object"] is None or fact["object"]["id"] not in focus)
    )


if __name__ == "__main__":
    main()
