"""Synthetic data at scale for ``benchmarks/search_scale.py``: chunks, entities, facts.

- Text (``--corpus topics``, the default): a topic mixture, so words cluster in
  documents the way they do in real collections. The 200 most frequent SciFact words
  (stop words and generic words such as "cell", "study") form a background drawn with
  probability 0.4 by their real frequencies; the rest of each word slot is drawn from the
  document's topic — 500 topics of 300 words each, taken from the remaining 50k-word
  SciFact vocabulary (a word's chance to join a topic grows with its frequency^0.75),
  Zipf-weighted within the topic. ``--corpus unigram`` draws every
  word independently from SciFact's frequencies instead: the worst case, where every
  common word is spread over a large share of all chunks. 60–150 words a chunk, four
  chunks a document.
- Vectors: random but clustered like real embeddings — 1,000 topic centroids, each row
  ``normalize(centroid + 0.8·noise)`` (two rows of a topic have cosine ≈ 0.6). Embedding
  100k chunks with the local model would take over an hour on 2 cores, and the speed of
  the index does not depend on where the vectors came from.
- Scopes: ``org/bench/team-0`` … ``team-9``, one tenth of the rows each, so a filter on one
  team leaves 10% of the rows.
- Rows go in with COPY; the postings through ``postings_replace``, the code path every
  write uses; the HNSW indexes are rebuilt once after loading.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from benchmarks.datasets import dataset

TEAMS = 10
DIMENSIONS = 384
CENTROIDS = 1000
NOISE = 0.8
CHUNKS_PER_DOCUMENT = 4


@dataclass
class Generated:
    context_id: int
    chunk_ids: list[int] = field(default_factory=list)
    chunk_texts: list[str] = field(default_factory=list)
    chunk_terms: list[list[str]] = field(default_factory=list)
    chunk_teams: list[int] = field(default_factory=list)
    centroids: np.ndarray | None = None
    timings: dict[str, float] = field(default_factory=dict)


def team_scope(i: int) -> str:
    return f"org/bench/team-{i % TEAMS}"


def vocabulary(limit: int = 50_000) -> tuple[np.ndarray, np.ndarray]:
    counts: Counter[str] = Counter()
    with (dataset("scifact") / "corpus.jsonl").open() as lines:
        for line in lines:
            doc = json.loads(line)
            counts.update(re.findall(r"[a-z][a-z0-9-]*", f"{doc['title']} {doc['text']}".lower()))
    words, freq = zip(*counts.most_common(limit), strict=True)
    weights = np.array(freq, dtype=np.float64)
    return np.array(words, dtype=object), weights / weights.sum()


def unit_rows(rng: np.random.Generator, centroids: np.ndarray, n: int) -> np.ndarray:
    topics = rng.integers(0, len(centroids), size=n)
    noise = rng.standard_normal((n, DIMENSIONS)).astype(np.float32) / np.sqrt(DIMENSIONS)
    rows = centroids[topics] + NOISE * noise
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


BACKGROUND_WORDS = 200
BACKGROUND_SHARE = 0.4
TOPICS = 500
TOPIC_WORDS = 300


def _texts(
    rng: np.random.Generator, words: np.ndarray, p: np.ndarray, n: int, corpus: str
) -> Iterator[str]:
    sizes = rng.integers(60, 151, size=n)
    total = int(sizes.sum())
    if corpus == "unigram":
        drawn = rng.choice(len(words), size=total, p=p)
    else:
        background = p[:BACKGROUND_WORDS] / p[:BACKGROUND_WORDS].sum()
        # Common content words belong to more topics than rare ones (weight p^0.75).
        membership = p[BACKGROUND_WORDS:] ** 0.75
        membership /= membership.sum()
        topic_table = np.stack(
            [
                rng.choice(
                    np.arange(BACKGROUND_WORDS, len(words)),
                    TOPIC_WORDS,
                    replace=False,
                    p=membership,
                )
                for _ in range(TOPICS)
            ]
        )
        zipf = 1.0 / np.arange(1, TOPIC_WORDS + 1)
        zipf /= zipf.sum()
        doc_topics = rng.integers(0, TOPICS, size=n // CHUNKS_PER_DOCUMENT + 1)
        token_topics = np.repeat(doc_topics[np.arange(n) // CHUNKS_PER_DOCUMENT], sizes)
        drawn = topic_table[token_topics, rng.choice(TOPIC_WORDS, size=total, p=zipf)]
        is_background = rng.random(total) < BACKGROUND_SHARE
        drawn[is_background] = rng.choice(
            BACKGROUND_WORDS, size=int(is_background.sum()), p=background
        )
    start = 0
    for size in sizes:
        yield " ".join(words[drawn[start : start + size]]) + "."
        start += size


def _copy(url: str, table: str, columns: list[str], rows: Iterator[tuple[object, ...]]) -> None:
    import psycopg
    from pgvector.psycopg import register_vector

    with psycopg.connect(url) as conn:
        register_vector(conn)
        with (
            conn.cursor() as cursor,
            cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy,
        ):
            for row in rows:
                copy.write_row(row)


def _ids(table: str, context_id: int) -> list[int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM {table} WHERE context_id = %s ORDER BY id",  # noqa: S608
            [context_id],
        )
        return [row[0] for row in cursor.fetchall()]


def _sql(statement: str) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement)


def _index_batches(
    target: str, context_id: int, ids: list[int], scopes: list[str], terms: list[list[str]]
) -> None:
    from django.db import transaction

    from memory.search.bm25 import IndexItem, postings_replace
    from memory.search.models import Target

    for start in range(0, len(ids), 5000):
        with transaction.atomic():
            postings_replace(
                context_id=context_id,
                target=Target(target),
                items=[
                    IndexItem(ref_id=i, scope=s, terms=t)
                    for i, s, t in zip(
                        ids[start : start + 5000],
                        scopes[start : start + 5000],
                        terms[start : start + 5000],
                        strict=True,
                    )
                ],
            )


def generate(
    *, url: str, chunks: int, entities: int, facts: int, corpus: str = "topics", seed: int = 7
) -> Generated:
    """Load the synthetic corpus into a new context ``bench-scale``."""
    from memory.search.analyzer import analyze
    from memory.search.texts import chunk_index_text
    from memory.services.contexts import context_create

    rng = np.random.default_rng(seed)
    words, p = vocabulary()
    context = context_create(slug="bench-scale", name="Search scale benchmark")
    out = Generated(context_id=context.pk)
    centroids = rng.standard_normal((CENTROIDS, DIMENSIONS)).astype(np.float32)
    out.centroids = centroids / np.linalg.norm(centroids, axis=1, keepdims=True)
    now = "2026-01-01T00:00:00Z"

    started = time.perf_counter()
    n_docs = max(1, chunks // CHUNKS_PER_DOCUMENT)
    out.chunk_texts = list(_texts(rng, words, p, chunks, corpus))
    titles = [" ".join(rng.choice(words[:5000], size=6)) for _ in range(n_docs)]
    doc_of = [i // CHUNKS_PER_DOCUMENT for i in range(chunks)]
    out.chunk_teams = [d % TEAMS for d in doc_of]
    _copy(
        url,
        "memory_document",
        ["context_id", "scope", "title", "text", "source", "metadata", "created_at"],
        (
            (context.pk, team_scope(d), titles[d], f"document {d}", "bench", "{}", now)
            for d in range(n_docs)
        ),
    )
    doc_ids = _ids("memory_document", context.pk)
    out.chunk_terms = [
        analyze(chunk_index_text(title=titles[d], text=t))
        for d, t in zip(doc_of, out.chunk_texts, strict=True)
    ]
    vectors = unit_rows(rng, out.centroids, chunks)
    _sql("DROP INDEX IF EXISTS chunk_embedding_hnsw")
    _copy(
        url,
        "memory_chunk",
        [
            "context_id",
            "document_id",
            "scope",
            "ordinal",
            "text",
            "token_count",
            "embedding",
            "embedding_model",
        ],
        (
            (
                context.pk,
                doc_ids[doc_of[i]],
                team_scope(doc_of[i]),
                i % CHUNKS_PER_DOCUMENT,
                out.chunk_texts[i],
                len(out.chunk_terms[i]),
                vectors[i],
                "synthetic",
            )
            for i in range(chunks)
        ),
    )
    out.chunk_ids = _ids("memory_chunk", context.pk)
    out.timings["chunks_copy_s"] = time.perf_counter() - started

    started = time.perf_counter()
    _index_batches(
        "chunk",
        context.pk,
        out.chunk_ids,
        [team_scope(d) for d in doc_of],
        out.chunk_terms,
    )
    out.timings["chunk_postings_s"] = time.perf_counter() - started

    started = time.perf_counter()
    _sql(
        "CREATE INDEX chunk_embedding_hnsw ON memory_chunk USING hnsw "
        "(embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
    )
    out.timings["chunk_hnsw_build_s"] = time.perf_counter() - started

    _keywords(url=url, context_id=context.pk, doc_ids=doc_ids, out=out, rng=rng, doc_of=doc_of)
    entity_ids, names = _entities(
        url=url, context_id=context.pk, n=entities, rng=rng, words=words, out=out
    )
    _facts(
        url=url,
        context_id=context.pk,
        n=facts,
        rng=rng,
        entity_ids=entity_ids,
        names=names,
        words=words,
        out=out,
    )

    started = time.perf_counter()
    _sql("VACUUM ANALYZE")
    out.timings["vacuum_analyze_s"] = time.perf_counter() - started
    return out


def _keywords(
    *,
    url: str,
    context_id: int,
    doc_ids: list[int],
    out: Generated,
    rng: np.random.Generator,
    doc_of: list[int],
) -> None:
    """Five two-word phrases of each document's first chunk as its keywords."""
    started = time.perf_counter()
    phrases: dict[str, int] = {}
    links: list[tuple[int, int, int, str, float]] = []
    for chunk_index, (chunk_id, text) in enumerate(
        zip(out.chunk_ids, out.chunk_texts, strict=True)
    ):
        if chunk_index % CHUNKS_PER_DOCUMENT:
            continue
        tokens = text.rstrip(".").split()
        for start in rng.choice(max(len(tokens) - 1, 1), size=5, replace=False):
            phrase = " ".join(tokens[start : start + 2])
            phrases.setdefault(phrase, len(phrases))
            links.append(
                (
                    phrases[phrase],
                    doc_ids[doc_of[chunk_index]],
                    chunk_id,
                    team_scope(doc_of[chunk_index]),
                    4.0,
                )
            )
    counts = Counter(k for k, *_ in links)
    vectors = unit_rows(rng, out.centroids, len(phrases))  # type: ignore[arg-type]
    _copy(
        url,
        "memory_keyword",
        ["context_id", "text", "document_count", "embedding"],
        ((context_id, text, counts[i], vectors[i]) for text, i in phrases.items()),
    )
    keyword_ids = _ids("memory_keyword", context_id)
    _copy(
        url,
        "memory_keywordlink",
        ["keyword_id", "document_id", "chunk_id", "scope", "score"],
        ((keyword_ids[k], d, c, s, score) for k, d, c, s, score in links),
    )
    out.timings["keywords_s"] = time.perf_counter() - started


def _entities(
    *,
    url: str,
    context_id: int,
    n: int,
    rng: np.random.Generator,
    words: np.ndarray,
    out: Generated,
) -> tuple[list[int], list[str]]:
    from memory.search.analyzer import analyze

    started = time.perf_counter()
    common = words[:20000]
    names = [
        f"{a.title()} {b.title()} {i}"
        for i, (a, b) in enumerate(zip(rng.choice(common, n), rng.choice(common, n), strict=True))
    ]
    types = ["person", "organisation", "project", "product", "topic"]
    vectors = unit_rows(rng, out.centroids, n)  # type: ignore[arg-type]
    _sql("DROP INDEX IF EXISTS entity_embedding_hnsw")
    _copy(
        url,
        "memory_entity",
        [
            "context_id",
            "scope",
            "name",
            "type",
            "normalized_key",
            "aliases",
            "alias_keys",
            "attributes",
            "embedding",
            "embedding_model",
            "seeded",
            "created_at",
            "updated_at",
        ],
        (
            (
                context_id,
                team_scope(i),
                names[i],
                types[i % len(types)],
                names[i].lower(),
                [],
                [],
                "{}",
                vectors[i],
                "synthetic",
                False,
                "2026-01-01T00:00:00Z",
                "2026-01-01T00:00:00Z",
            )
            for i in range(n)
        ),
    )
    ids = _ids("memory_entity", context_id)
    _index_batches(
        "entity",
        context_id,
        ids,
        [team_scope(i) for i in range(n)],
        [analyze(name) for name in names],
    )
    _sql(
        "CREATE INDEX entity_embedding_hnsw ON memory_entity USING hnsw "
        "(embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
    )
    out.timings["entities_s"] = time.perf_counter() - started
    return ids, names


def _facts(
    *,
    url: str,
    context_id: int,
    n: int,
    rng: np.random.Generator,
    entity_ids: list[int],
    names: list[str],
    words: np.ndarray,
    out: Generated,
) -> None:
    from memory.models import Predicate
    from memory.search.analyzer import analyze

    started = time.perf_counter()
    relations = list(
        Predicate.objects.filter(context_id=context_id, kind="relation").values_list("id", "name")
    )
    attributes = list(
        Predicate.objects.filter(context_id=context_id, kind="attribute").values_list("id", "name")
    )
    subjects = rng.integers(0, len(entity_ids), size=n)
    objects = rng.integers(0, len(entity_ids), size=n)
    value_words = rng.choice(words[:20000], size=(n, 3))
    rows: list[tuple[object, ...]] = []
    terms: list[list[str]] = []
    scopes: list[str] = []
    for i in range(n):
        s = int(subjects[i])
        o: int | None
        if i % 2:
            pred_id, pred = relations[i % len(relations)]
            o = int(objects[i])
            value, kind, text = None, "relation", names[o]
        else:
            pred_id, pred = attributes[i % len(attributes)]
            o = None
            text = " ".join(value_words[i])
            value, kind = json.dumps(text), "attribute"
        scope = team_scope(s)
        rows.append(
            (
                context_id,
                scope,
                entity_ids[s],
                pred_id,
                pred,
                kind,
                entity_ids[o] if o is not None else None,
                value,
                text if o is None else "",
                0.9,
                0.5,
                "2026-01-01T00:00:00Z",
                "2026-01-01T00:00:00Z",
                1,
                "current",
                False,
                "api",
                "",
            )
        )
        terms.append(analyze(f"{names[s]} {pred} {text}"))
        scopes.append(scope)
    _copy(
        url,
        "memory_fact",
        [
            "context_id",
            "scope",
            "subject_id",
            "predicate_id",
            "raw_predicate",
            "kind",
            "object_id",
            "value",
            "value_text",
            "confidence",
            "importance",
            "recorded_at",
            "last_seen_at",
            "observed_count",
            "status",
            "single_valued",
            "source_kind",
            "source_ref",
        ],
        iter(rows),
    )
    out.timings["facts_copy_s"] = time.perf_counter() - started
    started = time.perf_counter()
    _index_batches("fact", context_id, _ids("memory_fact", context_id), scopes, terms)
    out.timings["fact_postings_s"] = time.perf_counter() - started


def load_existing(*, seed: int = 7) -> Generated:
    """The handle of a corpus loaded by an earlier run (``--keep``), to measure it again."""
    from memory.models import Chunk, Context
    from memory.search.analyzer import analyze
    from memory.search.texts import chunk_index_text

    context = Context.objects.get(slug="bench-scale")
    out = Generated(context_id=context.pk)
    rng = np.random.default_rng(seed)
    centroids = rng.standard_normal((CENTROIDS, DIMENSIONS)).astype(np.float32)  # first draw
    out.centroids = centroids / np.linalg.norm(centroids, axis=1, keepdims=True)
    rows = (
        Chunk.objects.filter(context=context)
        .order_by("pk")
        .values_list("pk", "text", "scope", "document__title")
    )
    for pk, text, scope, title in rows.iterator(chunk_size=5000):
        out.chunk_ids.append(pk)
        out.chunk_texts.append(text)
        out.chunk_teams.append(int(scope.rsplit("-", 1)[1]))
        out.chunk_terms.append(analyze(chunk_index_text(title=title, text=text)))
    return out
