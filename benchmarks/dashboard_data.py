"""A curation workload for the dashboard benchmark: 100k entities, 1M facts and the records
every page lists (drift, duplicate candidates, conflicts, runs, audit events, import jobs,
documents), made with set-based SQL (``INSERT … SELECT generate_series``) in seconds.

Shapes, chosen to look like a memory after months of ingest rather than a uniform grid:
- entities: person/organisation/project/… names with a serial ("Alice Moreau 4711"), 80% in
  ``bench/org``, 20% in 100 team scopes; 10% with an alias, 1% seeded, 0.5% merged away;
  no embeddings (no page reads entity vectors);
- facts: subjects and objects drawn with a squared-uniform skew, so the first entities are
  hubs (~3k facts about entity 0, ~1.6k pointing at it) while the median entity has a
  handful; 90% on the 44 registered standard predicates (one in seven written in a
  camelCase form), 10% on 40 observed predicates (the drift); 10% of attribute facts
  superseded;
- 2% of the attribute facts contested by a second value with an open or resolved
  conflict; duplicate candidate pairs for 10% of the entities (a tenth dismissed);
  20k runs (succeeded, failed, pending) with 4 kB prompts; 50k audit events over 90 days;
  20 import jobs; 300 Inspec abstracts as documents (real chunks, postings, keyphrases and
  vectors, so the search page has something to find).
"""

from __future__ import annotations

import re
import time
import zipfile
from typing import Any

from benchmarks.datasets import dataset

FIRST = ["Alice", "Bruno", "Chen", "Dana", "Emil", "Fatima", "Gus", "Hana", "Ivan", "Jade",
         "Kofi", "Lena", "Mateo", "Nina", "Omar", "Priya", "Quinn", "Rosa", "Sven",
         "Tara"]  # fmt: skip
LAST = ["Moreau", "Okafor", "Schmidt", "Tanaka", "Silva", "Novak", "Haddad", "Larsen",
        "Rossi", "Kowalski", "Dubois", "Nakamura", "Ivanova", "Garcia", "Byrne", "Kim"]  # fmt: skip
WORDS = ["Northwind", "Blue Harbor", "Atlas", "Quantum", "Cedar", "Helios", "Pioneer",
         "Summit", "Orbit", "Granite", "Lumen", "Vertex", "Meridian", "Aurora"]  # fmt: skip
TYPES = ["person", "person", "person", "organisation", "organisation", "project", "location",
         "topic", "product", "policy", "concept", "event", "other"]  # fmt: skip
DRIFT = 40
TEAMS = 100


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def generate(*, context_id: int, entities: int, facts: int, documents: int) -> dict[str, Any]:
    """Fill context ``context_id`` (created with the standard registry); returns timings
    and the ids the benchmark visits."""
    from django.db import connection

    timings: dict[str, float] = {}
    predicates = _predicates(context_id)
    with connection.cursor() as cursor:
        cursor.execute("SELECT setseed(0.42)")
        for name, step in (
            ("entities_s", lambda: _entities(cursor, context_id, entities)),
            ("facts_s", lambda: _facts(cursor, context_id, entities, facts, predicates)),
            ("curation_s", lambda: _curation(cursor, context_id, entities)),
            ("turns_s", lambda: _turns(cursor, context_id, entities)),
        ):
            started = time.perf_counter()
            step()
            timings[name] = round(time.perf_counter() - started, 1)
        for table in ("entity", "fact", "conflict", "duplicatecandidate", "run", "auditevent",
                      "predicateusage", "entityidentifier", "turn"):  # fmt: skip
            cursor.execute(f"VACUUM ANALYZE memory_{table}")
    started = time.perf_counter()
    _documents(context_id, documents)
    timings["documents_s"] = round(time.perf_counter() - started, 1)
    return {"timings": timings}


def _predicates(context_id: int) -> dict[str, list[Any]]:
    """The registered standard predicates, a few aliases, and DRIFT observed ones."""
    from datetime import timedelta

    from django.utils import timezone

    from memory.models import Predicate, PredicateAlias, PredicateStatus

    registered = list(
        Predicate.objects.filter(context_id=context_id, status=PredicateStatus.REGISTERED)
        .order_by("pk")
        .values_list("pk", "name", "kind")
    )
    now = timezone.now()
    observed = Predicate.objects.bulk_create(
        Predicate(
            context_id=context_id,
            name=f"{registered[i % len(registered)][1]}_{suffix}",
            kind=registered[i % len(registered)][2],
            status=PredicateStatus.OBSERVED,
            first_seen_at=now - timedelta(days=(i * 7) % 90, hours=i),
            last_seen_at=now - timedelta(hours=i),
        )
        for i, suffix in enumerate(["v2", "alt", "old", "x"] * (DRIFT // 4))
    )
    Predicate.objects.bulk_create(
        Predicate(context_id=context_id, name=f"rejected_{i}", status=PredicateStatus.REJECTED)
        for i in range(5)
    )
    PredicateAlias.objects.bulk_create(
        PredicateAlias(context_id=context_id, predicate_id=pk, alias=f"{name}_alias")
        for pk, name, _kind in registered[:20]
    )
    rows = [(pk, name, kind) for pk, name, kind in registered] + [
        (p.pk, p.name, p.kind) for p in observed
    ]
    return {
        "ids": [r[0] for r in rows],
        "names": [r[1] for r in rows],
        "camel": [_camel(r[1]) for r in rows],
        "kinds": [r[2] for r in rows],
        "registered": [len(registered)],
    }


def _entities(cursor: Any, context_id: int, n: int) -> None:
    cursor.execute(
        """
        INSERT INTO memory_entity (context_id, scope, name, type, normalized_key, aliases,
            alias_keys, attributes, embedding_model, seeded, created_at, updated_at)
        SELECT %(ctx)s, scope, name, type, lower(name),
               CASE WHEN g %% 10 = 3 THEN ARRAY[alias] ELSE '{}' END,
               CASE WHEN g %% 10 = 3 THEN ARRAY[lower(alias)] ELSE '{}' END,
               CASE WHEN g %% 4 = 0 THEN jsonb_build_object('source', 'crm', 'rank', g %% 50)
                    ELSE '{}' END,
               '', g %% 100 = 7,
               now() - make_interval(mins => g * 3), now() - make_interval(mins => g)
        FROM (
            SELECT g,
                   CASE WHEN g %% 5 = 0 THEN 'bench/org/team/t' || (g / 5) %% %(teams)s
                        ELSE 'bench/org' END AS scope,
                   (%(types)s::text[])[1 + g %% %(ntypes)s] AS type,
                   CASE WHEN (%(types)s::text[])[1 + g %% %(ntypes)s] = 'person'
                        THEN (%(first)s::text[])[1 + g %% %(nfirst)s] || ' '
                             || (%(last)s::text[])[1 + (g / 7) %% %(nlast)s]
                        ELSE (%(words)s::text[])[1 + (g / 3) %% %(nwords)s] || ' '
                             || initcap((%(types)s::text[])[1 + g %% %(ntypes)s])
                   END || ' ' || g AS name,
                   'Alias ' || g AS alias
            FROM generate_series(0, %(n)s - 1) AS g
        ) AS e
        """,
        {
            "ctx": context_id, "n": n, "teams": TEAMS,
            "types": TYPES, "ntypes": len(TYPES), "first": FIRST, "nfirst": len(FIRST),
            "last": LAST, "nlast": len(LAST), "words": WORDS, "nwords": len(WORDS),
        },
    )  # fmt: skip
    cursor.execute("SELECT min(id) FROM memory_entity WHERE context_id = %s", [context_id])
    low = cursor.fetchone()[0]
    # 0.5% merged into their predecessor: redirects the lists must leave out.
    cursor.execute(
        """
        UPDATE memory_entity SET merged_into_id = id - 1
        WHERE context_id = %s AND (id - %s) %% 200 = 199
        """,
        [context_id, low],
    )
    cursor.execute(
        """
        INSERT INTO memory_entityidentifier (entity_id, context_id, scope, kind, value)
        SELECT id, context_id, scope, 'email', 'user' || (id - %s) || '@example.org'
        FROM memory_entity WHERE context_id = %s AND type = 'person' AND id %% 3 = 0
        """,
        [low, context_id],
    )


def _facts(
    cursor: Any, context_id: int, n: int, facts: int, predicates: dict[str, list[Any]]
) -> None:
    cursor.execute("SELECT min(id) FROM memory_entity WHERE context_id = %s", [context_id])
    low = cursor.fetchone()[0]
    registered = predicates["registered"][0]
    cursor.execute(
        """
        INSERT INTO memory_fact (context_id, scope, subject_id, predicate_id, raw_predicate,
            kind, object_id, value, value_text, confidence, importance, valid_from,
            valid_until, recorded_at, last_seen_at, observed_count, status,
            status_changed_at, supersedes_id, single_valued, source_kind, source_ref,
            run_id, document_id, created_by_id)
        SELECT %(ctx)s,
               CASE WHEN s %% 5 = 0 THEN 'bench/org/team/t' || (s / 5) %% %(teams)s
                    ELSE 'bench/org' END,
               %(low)s + s, (%(ids)s::bigint[])[p],
               CASE WHEN g %% 7 = 0 THEN (%(camel)s::text[])[p] ELSE (%(names)s::text[])[p] END,
               kind,
               CASE WHEN kind = 'relation' THEN %(low)s + o END,
               CASE WHEN kind IN ('attribute', 'narrative') THEN to_jsonb('value ' || g) END,
               CASE WHEN kind IN ('attribute', 'narrative') THEN 'value ' || g ELSE '' END,
               0.5 + (g %% 50) / 100.0, 0.5, NULL, NULL, seen, seen, 1 + (g %% 20 = 0)::int,
               CASE WHEN kind = 'attribute' AND g %% 10 = 0 THEN 'superseded' ELSE 'current' END,
               CASE WHEN kind = 'attribute' AND g %% 10 = 0 THEN seen END,
               NULL, false, 'api', '', NULL, NULL, NULL
        FROM (
            SELECT g, s, o, p, (%(kinds)s::text[])[p] AS kind, seen
            FROM (
                SELECT g,
                       floor(%(n)s * power(random(), 2))::bigint AS s,
                       floor(%(n)s * power(random(), 2))::bigint AS o,
                       CASE WHEN g %% 10 = 9
                            THEN %(registered)s + 1 + floor(random() * %(drift)s)::int
                            ELSE 1 + floor(power(random(), 2) * %(registered)s)::int END AS p,
                       now() - make_interval(secs => (g * 37) %% 31536000) AS seen
                FROM generate_series(0::bigint, %(facts)s - 1) AS g
            ) AS raw
        ) AS f
        """,
        {
            "ctx": context_id, "low": low, "n": n, "facts": facts, "teams": TEAMS,
            "ids": predicates["ids"], "names": predicates["names"],
            "camel": predicates["camel"], "kinds": predicates["kinds"],
            "registered": registered, "drift": len(predicates["ids"]) - registered,
        },
    )  # fmt: skip
    # Merged entities keep no facts: move theirs to the survivor, as a merge would.
    cursor.execute(
        """
        UPDATE memory_fact f SET subject_id = e.merged_into_id
        FROM memory_entity e
        WHERE f.subject_id = e.id AND e.context_id = %s AND e.merged_into_id IS NOT NULL
        """,
        [context_id],
    )
    cursor.execute(
        """
        UPDATE memory_fact f SET object_id = e.merged_into_id
        FROM memory_entity e
        WHERE f.object_id = e.id AND e.context_id = %s AND e.merged_into_id IS NOT NULL
        """,
        [context_id],
    )


def _curation(cursor: Any, context_id: int, n: int) -> None:
    """Conflicts, duplicate candidates, runs, audit events and import jobs."""
    cursor.execute("SELECT min(id) FROM memory_entity WHERE context_id = %s", [context_id])
    low = cursor.fetchone()[0]
    # Contested second values (2% of the attribute facts) and their conflicts.
    cursor.execute(
        """
        INSERT INTO memory_fact (context_id, scope, subject_id, predicate_id, raw_predicate,
            kind, object_id, value, value_text, confidence, importance, recorded_at,
            last_seen_at, observed_count, status, single_valued, source_kind, source_ref)
        SELECT context_id, scope, subject_id, predicate_id, raw_predicate, kind, NULL,
               to_jsonb('other ' || value_text), 'other ' || value_text, 0.4, 0.5,
               recorded_at + interval '1 day', recorded_at + interval '1 day', 1,
               'contested', false, 'api', 'contests:' || id
        FROM memory_fact
        WHERE context_id = %s AND kind = 'attribute' AND status = 'current' AND id %% 50 = 0
        """,
        [context_id],
    )
    cursor.execute(
        """
        INSERT INTO memory_conflict (context_id, scope, subject_id, predicate_id,
            current_fact_id, contested_fact_id, reason, status, resolution, created_at,
            resolved_at)
        SELECT c.context_id, c.scope, c.subject_id, c.predicate_id,
               substr(c.source_ref, 10)::bigint, c.id,
               'confidence 0.40 is under 0.7', CASE WHEN c.id %% 4 = 0 THEN 'resolved'
               ELSE 'open' END, CASE WHEN c.id %% 4 = 0 THEN 'keep_current' ELSE '' END,
               c.recorded_at, CASE WHEN c.id %% 4 = 0 THEN c.recorded_at + interval '2 days' END
        FROM memory_fact c
        WHERE c.context_id = %s AND c.status = 'contested' AND c.source_ref LIKE 'contests:%%'
        """,
        [context_id],
    )
    pairs = max(n // 10, 10)
    cursor.execute(
        """
        INSERT INTO memory_duplicatecandidate (context_id, entity_a_id, entity_b_id, score,
            methods, status, source, explain, created_at, updated_at)
        SELECT %(ctx)s, %(low)s + a, %(low)s + a + 1 + (i %% 3 = 0)::int,
               0.8 + (i %% 20) / 100.0,
               CASE i %% 3 WHEN 0 THEN ARRAY['fingerprint', 'phonetic']
                           WHEN 1 THEN ARRAY['edit_distance', 'ngram']
                           ELSE ARRAY['embedding', 'key'] END,
               CASE WHEN i %% 10 = 0 THEN 'dismissed' ELSE 'open' END, 'scan', '[]'::jsonb,
               now(), now()
        FROM (SELECT i, (i * 9973) %% (%(n)s - 2) AS a
              FROM generate_series(0, %(pairs)s - 1) AS i) AS p
        ON CONFLICT DO NOTHING
        """,
        {"ctx": context_id, "low": low, "n": n, "pairs": pairs},
    )
    cursor.execute(
        """
        DELETE FROM memory_duplicatecandidate d USING memory_entity e
        WHERE d.context_id = %s AND e.merged_into_id IS NOT NULL
          AND (d.entity_a_id = e.id OR d.entity_b_id = e.id)
        """,
        [context_id],
    )
    runs = max(n // 5, 20)
    cursor.execute(
        """
        INSERT INTO memory_run (context_id, scope, mode, input_text, input_payload, source,
            prompt, raw_output, parsed_output, result, outcome, error, timings,
            prompt_tokens, completion_tokens, attempts, created_at, started_at, finished_at,
            worker, summary)
        SELECT %(ctx)s, CASE WHEN i %% 5 = 0 THEN 'bench/org/team/t' || i %% 100
                             ELSE 'bench/org' END,
               CASE WHEN i %% 3 = 0 THEN 'llm' ELSE 'triples' END,
               'Turn ' || i || ': met Alice Moreau about the Atlas project roadmap.',
               jsonb_build_object('role', 'curator', 'grants', jsonb_build_array('read,write:*')),
               'agent-' || i %% 7, repeat('Extract entities and facts. ', 150),
               '{"entities": [], "relations": []}', '{"entities": [], "relations": []}',
               jsonb_build_object('facts_created', i %% 9, 'entities_created', i %% 4),
               CASE WHEN i %% 50 = 0 THEN 'failed' WHEN i %% 97 = 0 THEN 'pending'
                    ELSE 'succeeded' END,
               CASE WHEN i %% 50 = 0 THEN 'the model timed out after 30 s' ELSE '' END,
               '{"llm_ms": 900, "write_ms": 40}', 1200, 300, 1,
               now() - make_interval(mins => i), now() - make_interval(mins => i),
               now() - make_interval(mins => i) + interval '1 second', 'bench:1',
               jsonb_build_object('facts_created', i %% 9, 'entities_created', i %% 4)
        FROM generate_series(0, %(runs)s - 1) AS i
        """,
        {"ctx": context_id, "runs": runs},
    )
    events = max(n // 2, 50)
    cursor.execute(
        """
        INSERT INTO memory_auditevent (context_id, actor_label, action, target_type, target_id,
            summary, before, after, undo, created_at)
        SELECT %(ctx)s, 'curator-' || i %% 5, action,
               CASE WHEN action LIKE 'entity%%' THEN 'entity'
                    WHEN action LIKE 'conflict%%' THEN 'conflict' ELSE 'predicate' END,
               CASE WHEN action LIKE 'entity%%' THEN (%(low)s + (i * 7919) %% %(n)s)::text
                    WHEN action LIKE 'conflict%%' THEN (i %% 1000)::text
                    ELSE 'predicate_' || i %% 80 END,
               action || ' #' || i, NULL, NULL,
               CASE WHEN action = 'drift_reject' THEN jsonb_build_object('op', 'none') END,
               now() - make_interval(secs => (i * 97) %% 7776000)
        FROM (SELECT i, (ARRAY['entity_update', 'entity_seed', 'drift_alias', 'drift_reject',
                               'predicate_update', 'predicate_alias_add', 'conflict_resolve',
                               'entity_update'])[1 + i %% 8] AS action
              FROM generate_series(0, %(events)s - 1) AS i) AS a
        """,
        {"ctx": context_id, "low": low, "n": n, "events": events},
    )
    rows = "\n".join(
        f'{{"row": {i}, "line": {i + 1}, "status": "{"error" if i % 40 == 0 else "created"}", '
        f'"entity_id": {low + i}, "message": "{"the row has no scope" if i % 40 == 0 else ""}"}}'
        for i in range(1, 2001)
    )
    report = '{"format": "csv", "notes": [], "rows": [' + rows.replace("\n", ", ") + "]}"
    cursor.execute(
        """
        INSERT INTO curation_importjob (context_id, filename, format, scope_default, content,
            size_bytes, status, total, done, created_count, matched_count, failed_count,
            report, error, task_id, worker, created_at, started_at, finished_at)
        SELECT %s, 'seed-' || i || '.csv', 'csv', 'bench/org',
               'name,type' || repeat(E'\\nx,y', 2000),
               8000, 'succeeded', 2000, 2000, 1950, 0, 50, %s::jsonb, '', '', '',
               now() - make_interval(hours => i), now() - make_interval(hours => i),
               now() - make_interval(hours => i) + interval '1 minute'
        FROM generate_series(1, 20) AS i
        """,
        [context_id, report],
    )


LONG_THREAD = "bench-long-conversation"
LONG_TURNS = 500
THREAD_TURNS = 20


def _turns(cursor: Any, context_id: int, n: int) -> None:
    """Conversations: threads of 20 turns (one turn per two entities), one thread of 500
    turns, each turn run by a run; every 10th fact came from a turn (and its run)."""
    turns = max(n // 2, 1_000)
    cursor.execute(
        """
        INSERT INTO memory_turn (context_id, scope, run_id, text, speaker, said_at, thread,
            ref, created_at, embedding_model)
        SELECT %(ctx)s, 'bench/org', r.id,
               'Turn ' || i || ': met Alice Moreau about the Atlas project roadmap.',
               (ARRAY['Alice', 'Bruno', 'Chen', 'Dana'])[1 + i %% 4],
               now() - make_interval(mins => %(turns)s - i),
               CASE WHEN i < %(long)s THEN %(long_name)s
                    ELSE 'thread-' || (i / %(per)s) END,
               'T' || i, now(), ''
        FROM generate_series(0, %(turns)s - 1) AS i
        LEFT JOIN LATERAL (
            SELECT id FROM memory_run WHERE context_id = %(ctx)s ORDER BY id
            OFFSET i %% 20 LIMIT 1
        ) r ON true
        """,
        {"ctx": context_id, "turns": turns, "long": LONG_TURNS, "long_name": LONG_THREAD,
         "per": THREAD_TURNS},
    )  # fmt: skip
    cursor.execute(
        """
        WITH t AS (
            SELECT id, run_id, row_number() OVER (ORDER BY id) - 1 AS k
            FROM memory_turn WHERE context_id = %(ctx)s
        )
        UPDATE memory_fact f SET turn_id = t.id, run_id = t.run_id, source_kind = 'run'
        FROM t
        WHERE f.context_id = %(ctx)s AND f.id %% 10 = 0 AND t.k = (f.id / 10) %% %(turns)s
        """,
        {"ctx": context_id, "turns": turns},
    )


def inspec_abstracts(limit: int) -> list[tuple[str, str]]:
    """(title, text) of the first ``limit`` Inspec abstracts (first line as the title)."""
    out: list[tuple[str, str]] = []
    if limit <= 0:
        return out
    with zipfile.ZipFile(dataset("inspec") / "Inspec.zip") as archive:
        names = sorted(
            n for n in archive.namelist() if n.startswith("Inspec/docsutf8/") and n.endswith(".txt")
        )
        for name in names[:limit]:
            text = archive.read(name).decode("utf-8", errors="replace")
            text = re.sub(r"\s+", " ", text).strip()
            title, _, rest = text.partition(". ")
            out.append((title[:200], rest or text))
    return out


def _documents(context_id: int, limit: int) -> None:
    from memory.domain.access import system_access
    from memory.models import Context
    from memory.services.ingest.documents import document_create, documents_embed

    access = system_access(Context.objects.get(pk=context_id))
    ids = [
        document_create(
            access=access,
            title=title,
            text=text,
            scope="bench/org" if i % 5 else f"bench/org/team/t{i % TEAMS}",
            embed_later=True,
        ).pk
        for i, (title, text) in enumerate(inspec_abstracts(limit))
    ]
    documents_embed(document_ids=ids)
