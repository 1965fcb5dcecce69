"""Entity resolution for ingest: which existing entity does a mention name?

Cheapest first, over the scopes visible from the write scope (nearest scope wins):
1. identifier (email, domain, url, sku…), whatever the type;
2. an entity bearing exactly the mention's name, in any scope the writer may read
   (``services/entities/exact_names.py``: "Globex Corporation" means the entity named so,
   not "Globex", which only shares its key);
3. normalized key, then alias key, within the same type ("ACME Inc." → "Acme Corp");
4. embedding similarity within the same type, comparing vectors of the same model:
   at or above the context's ``auto_merge_threshold`` the mention attaches; in the review
   band down to ``review_threshold`` the optional LLM judge may attach it, otherwise a new
   entity is created and the pair becomes a DuplicateCandidate for curators;
5. otherwise a new entity in the write scope.

Attaching a mention adds its spelling to the entity's aliases; it never merges two
existing entities (that is a curator's act). Types bound every tier but identifiers:
"Apple" the organisation and "apple" the product stay apart.

Two phases, so that no model call happens inside a database transaction: this module's
``resolution_plan`` (reads, embeddings, judge), then ``resolution_apply``
(``entity_resolution_apply.py``: the writes, inside the caller's transaction, robust to a
concurrent writer creating the same key).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Literal

from django.db import connection, transaction

from memory.domain.access import ContextAccess
from memory.domain.entity_names import entity_normalize_key
from memory.infra.embeddings import embed_texts, embedding_model_id
from memory.infra.pg_arrays import array_literal
from memory.kernel.errors import ValidationFailed
from memory.llm.client import ChatCall, LLMError, chat_model_configured, chat_structured
from memory.llm.prompt import judge_prompt_render
from memory.llm.schemas import JudgeAnswer
from memory.models import Entity, EntityIdentifier, EntityType
from memory.search.texts import entity_embedding_text
from memory.services.entities.exact_names import NamedEntity, exact_name_pick
from memory.services.ingest.triples import Mention

logger = logging.getLogger(__name__)

MatchMethod = Literal["identifier", "name", "key", "alias", "embedding", "llm_judge"]
# Up to this many candidates an exact scan is cheap and exact; above it, the HNSW index.
EXACT_SCAN_LIMIT = 2_000
HNSW_EF_SEARCH = 200


@dataclass
class MentionPlan:
    mention: Mention
    entity_id: int | None = None  # attach to this live entity
    method: MatchMethod | None = None
    score: float | None = None
    vector: list[float] | None = None  # the mention's embedding, kept if it is created
    candidate_id: int | None = None  # review band: a possible duplicate of this entity
    candidate_score: float | None = None
    judge_reason: str = ""
    error: ValidationFailed | None = None


@dataclass
class ResolutionPlan:
    plans: list[MentionPlan]
    embedding_model: str = ""
    llm_calls: list[ChatCall] = field(default_factory=list)


def resolution_plan(
    *,
    access: ContextAccess,
    visible_scopes: list[str],
    mentions: list[Mention],
    use_embeddings: bool = True,
) -> ResolutionPlan:
    """Decide, without writing, what each mention resolves to (see the module doc)."""
    plans = [MentionPlan(m) for m in mentions]
    plan = ResolutionPlan(plans=plans)
    if not plans or not visible_scopes:
        return plan
    nearness = {s: i for i, s in enumerate(visible_scopes)}
    _by_identifier(access, nearness, plans)
    _by_name_key_or_alias(
        access, visible_scopes, nearness, [p for p in plans if p.entity_id is None]
    )
    pending = [
        p for p in plans if p.entity_id is None and p.error is None and p.mention.type is not None
    ]
    if use_embeddings and pending:
        _by_embedding(access, visible_scopes, pending, plan)
    return plan


def _by_identifier(
    access: ContextAccess, nearness: dict[str, int], plans: list[MentionPlan]
) -> None:
    values = {value for p in plans for _, value in p.mention.identifiers}
    if not values:
        return
    best: dict[tuple[str, str], tuple[int, int]] = {}  # (kind, value) → (nearness, entity)
    rows = EntityIdentifier.objects.filter(
        context=access.context, scope__in=list(nearness), value__in=values
    ).values_list("kind", "value", "scope", "entity_id")
    for kind, value, scope, entity_id in rows:
        rank = (nearness[scope], entity_id)
        if (kind, value) not in best or rank < best[(kind, value)]:
            best[(kind, value)] = rank
    for plan in plans:
        for pair in plan.mention.identifiers:
            if pair in best:
                plan.entity_id, plan.method, plan.score = best[pair][1], "identifier", 1.0
                break


def _by_name_key_or_alias(
    access: ContextAccess,
    lineage: list[str],
    nearness: dict[str, int],
    plans: list[MentionPlan],
) -> None:
    if not plans:
        return
    keys = {p.mention.key for p in plans}
    keys |= {entity_normalize_key(a) for p in plans for a in p.mention.aliases}
    by_key: dict[str, list[tuple[int, int, str]]] = {}  # key → (nearness, id, type)
    by_alias: dict[str, list[tuple[int, int, str]]] = {}
    named: dict[str, list[NamedEntity]] = {}  # key → readable entities, any scope
    wanted = array_literal(sorted(keys))
    # One plain statement: compiling the ORM's form of it (an OR of an IN list and an
    # array overlap) cost a small run more than running it.
    with connection.cursor() as cursor:
        cursor.execute(_BY_KEY_OR_ALIAS_SQL, [wanted, access.context.pk, wanted, access.context.pk])
        rows = cursor.fetchall()
    readable: dict[str, bool] = {}  # a bulk run's rows share a few scopes
    for pk, type_, scope, key, alias_keys, name in rows:
        if scope not in readable:
            readable[scope] = access.grants.can_read(scope)
        if not readable[scope]:
            continue
        named.setdefault(key, []).append(NamedEntity(pk, type_, scope, name))
        if scope not in nearness:
            continue  # keys and aliases match in the write's own lineage only
        entry = (nearness[scope], pk, type_)
        by_key.setdefault(key, []).append(entry)
        for alias in alias_keys:
            by_alias.setdefault(alias, []).append(entry)
    for plan in plans:
        if not _match_exact_name(plan, named, lineage, access):
            _match_key_or_alias(plan, by_key, by_alias)


def _match_exact_name(
    plan: MentionPlan,
    named: dict[str, list[NamedEntity]],
    lineage: list[str],
    access: ContextAccess,
) -> bool:
    """Attach the mention to the entity bearing exactly its name, if any; whether it did
    (or refused the mention as ambiguous)."""
    mention = plan.mention
    try:
        found = exact_name_pick(
            name=mention.name,
            type_=mention.type,
            candidates=named.get(mention.key, ()),
            lineage=lineage,
            grants=access.grants,
        )
    except ValidationFailed as exc:
        plan.error = exc
        return True
    if found is None:
        return False
    plan.entity_id, plan.method, plan.score = found.id, "name", 1.0
    return True


# Every step is an index probe whatever the planner believes of the context's size:
# each wanted key probes the key index, the aliases go through their GIN index, and each
# id found reads its row by primary key. ``OFFSET 0`` keeps a subquery from being merged
# into the query around it, so the planner cannot trade the probes for a scan of the
# context's entities. It did in a young context (no statistics yet: "one row"): a scan of
# every entity of the context, with the keys merge-joined, 4 ms at 6,000 entities for a
# 20-fact run and growing with the context (docs/decisions/0111). Every scope's rows come
# back, the few that share a key: the exact-name tier reads any scope the writer may read,
# the key tiers only the write's lineage, both told apart on the client.
_BY_KEY_OR_ALIAS_SQL = f"""
    WITH found AS MATERIALIZED (
        SELECT k.id FROM unnest(%s::varchar[]) AS w(key)
        CROSS JOIN LATERAL (
            SELECT id FROM {Entity._meta.db_table}
            WHERE context_id = %s AND normalized_key = w.key OFFSET 0
        ) k
        UNION
        SELECT a.id FROM (
            SELECT id, context_id FROM {Entity._meta.db_table}
            WHERE alias_keys && %s::varchar[] OFFSET 0
        ) a
        WHERE a.context_id = %s
    )
    SELECT e.id, e.type, e.scope, e.normalized_key, e.alias_keys, e.name
    FROM found
    CROSS JOIN LATERAL (
        SELECT id, type, scope, normalized_key, alias_keys, name, merged_into_id
        FROM {Entity._meta.db_table} WHERE id = found.id OFFSET 0
    ) e
    WHERE e.merged_into_id IS NULL
"""  # noqa: S608 - table names from the models, values are parameters


def _match_key_or_alias(
    plan: MentionPlan,
    by_key: dict[str, list[tuple[int, int, str]]],
    by_alias: dict[str, list[tuple[int, int, str]]],
) -> None:
    """The best match: the mention's own key on an entity key, then its other spellings
    on entity keys, then on entity aliases; within each, the nearest scope."""
    mention = plan.mention
    alias_forms = [entity_normalize_key(a) for a in mention.aliases]
    ranked: list[tuple[int, int, int, str]] = []  # (tier, nearness, id, type)
    for tier, table, forms in (
        (0, by_key, [mention.key]),
        (1, by_key, alias_forms),
        (2, by_alias, [mention.key, *alias_forms]),
    ):
        for form in forms:
            ranked += [(tier, near, pk, type_) for near, pk, type_ in table.get(form, [])]
    if mention.type is not None:
        ranked = [r for r in ranked if r[3] == mention.type]
    elif len({r[3] for r in ranked}) > 1:
        types = " and ".join(sorted({r[3] for r in ranked}))
        plan.error = ValidationFailed(
            f"{mention.name!r} names existing entities of types {types}; "
            "give subject_type/object_type",
            code="ambiguous_entity",
        )
        return
    if ranked:
        tier, _, pk, _ = min(ranked)
        plan.entity_id, plan.method, plan.score = pk, ("key" if tier == 0 else "alias"), 1.0


def _by_embedding(
    access: ContextAccess, scopes: list[str], plans: list[MentionPlan], plan: ResolutionPlan
) -> None:
    context = access.context
    model_id = embedding_model_id()
    types = sorted({str(p.mention.type) for p in plans})
    # How many there are to compare with, up to the exact scan's limit (one plain
    # statement: the ORM's compilation of it cost a small run more than the count).
    with connection.cursor() as cursor:
        cursor.execute(
            _CANDIDATES_COUNT_SQL,
            [
                context.pk,
                array_literal(scopes),
                model_id,
                array_literal(types),
                EXACT_SCAN_LIMIT + 1,
            ],
        )
        count = int(cursor.fetchone()[0])
    if count == 0:
        return  # nothing to compare with: no reason to embed now (the task will)
    texts = [
        entity_embedding_text(
            Entity(
                name=p.mention.name,
                type=p.mention.type or EntityType.OTHER,
                aliases=p.mention.aliases,
            )
        )
        for p in plans
    ]
    vectors = embed_texts(texts)
    plan.embedding_model = model_id
    nearest = _nearest_each(
        context_id=context.pk,
        scopes=scopes,
        model_id=model_id,
        queries=[(str(p.mention.type), v) for p, v in zip(plans, vectors, strict=True)],
        exact=count <= EXACT_SCAN_LIMIT,
    )
    for position, (item, vector) in enumerate(zip(plans, vectors, strict=True)):
        item.vector = vector
        if position not in nearest:
            continue
        entity_id, similarity, key = nearest[position]
        if similarity >= context.auto_merge_threshold and _same_numbers(item.mention.key, key):
            item.entity_id, item.method, item.score = entity_id, "embedding", similarity
        elif similarity >= context.review_threshold:
            if context.llm_judge_enabled and chat_model_configured():
                same, reason = _judge(item.mention, entity_id, plan)
                item.judge_reason = reason
                if same:
                    item.entity_id, item.method, item.score = entity_id, "llm_judge", similarity
                    continue
            item.candidate_id, item.candidate_score = entity_id, similarity


_CANDIDATES_COUNT_SQL = f"""
    SELECT count(*) FROM (
        SELECT 1 FROM {Entity._meta.db_table}
        WHERE context_id = %s AND merged_into_id IS NULL AND scope = ANY(%s::text[])
          AND embedding IS NOT NULL AND embedding_model = %s AND type = ANY(%s::text[])
        LIMIT %s
    ) AS candidate
"""  # noqa: S608 - table names from the models, values are parameters


# The nearest live entity of the same type and embedding model, for every mention in one
# statement. ``{order}`` is the distance itself (the HNSW index serves it) or the
# distance "+ 0", which keeps the planner on an exact scan: over a few thousand rows that
# is cheap, and an index scan followed by the scope filter could lose neighbours. The
# vectors arrive as ``vector[]``: a text cast inside the lateral would parse the mention's
# vector again for every row compared (4.3 s against 73 ms for 200 mentions over 2,000
# entities).
_NEAREST_SQL = """
SELECT m.ord - 1, e.id, e.distance, e.normalized_key
FROM unnest(%s::text[], %s::vector[]) WITH ORDINALITY AS m(type, vector, ord)
CROSS JOIN LATERAL (
    SELECT id, normalized_key, embedding <=> m.vector AS distance
    FROM memory_entity
    WHERE context_id = %s AND merged_into_id IS NULL AND embedding IS NOT NULL
      AND embedding_model = %s AND scope = ANY(%s) AND type = m.type
    ORDER BY {order}, id
    LIMIT 1
) AS e
"""


def _nearest_each(
    *,
    context_id: int,
    scopes: list[str],
    model_id: str,
    queries: list[tuple[str, list[float]]],
    exact: bool,
) -> dict[int, tuple[int, float, str]]:
    """position of the query → (entity id, cosine similarity, its normalized key)."""
    order = "(embedding <=> m.vector) + 0" if exact else "embedding <=> m.vector"
    vectors = ["[" + ",".join(f"{x:.7g}" for x in v) + "]" for _, v in queries]
    with transaction.atomic(), connection.cursor() as cursor:
        if not exact:
            # A scope filter drops HNSW candidates after the index scan: look further.
            cursor.execute(f"SET LOCAL hnsw.ef_search = {HNSW_EF_SEARCH}")
        cursor.execute(
            _NEAREST_SQL.format(order=order),
            [[t for t, _ in queries], vectors, context_id, model_id, scopes],
        )
        return {int(i): (int(pk), 1.0 - float(d), str(key)) for i, pk, d, key in cursor.fetchall()}


def _same_numbers(key: str, other: str) -> bool:
    """Whether two names carry the same numbers. Embeddings barely see digits: "Q3
    planning" and "Q4 planning", "iPhone 14" and "iPhone 15" come out nearly identical, yet
    name different things — such a pair is never attached, only suggested."""
    return re.findall(r"\d+", key) == re.findall(r"\d+", other)


def _judge(mention: Mention, entity_id: int, plan: ResolutionPlan) -> tuple[bool, str]:
    entity = Entity.objects.only("name", "type", "aliases", "attributes").get(pk=entity_id)
    messages = judge_prompt_render(
        mention={"name": mention.name, "type": mention.type, "aliases": mention.aliases},
        candidate={
            "name": entity.name,
            "type": entity.type,
            "aliases": entity.aliases[:20],
            "attributes": {k: entity.attributes[k] for k in list(entity.attributes)[:20]},
        },
    )
    try:
        answer = chat_structured(messages=messages, model=JudgeAnswer, schema_name="entity_judge")
    except LLMError as exc:
        plan.llm_calls.extend(exc.calls)
        logger.warning("entity judge unavailable, keeping the pair for review: %s", exc.message)
        return False, f"judge unavailable: {exc.message}"
    plan.llm_calls.extend(answer.calls)
    return answer.value.same, answer.value.reason
