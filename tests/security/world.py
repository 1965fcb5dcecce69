"""Random memories for the scope-isolation properties: a scope tree, grants, and records
written through the services, plus an oracle that says which records a caller may read.

The oracle (``can_read``) is a few lines of string logic written here on purpose: the
project's own grant matching (``memory.kernel.scopes``) is the thing under test, never the
judge. Records carry markers (``ent003q``, ``fct007q``, ``doc001q``, ``run002q``) so a
rendered page can be searched for records it must not show.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.test import Client
from hypothesis import strategies as st
from rest_framework.test import APIClient

from memory.domain.access import ContextAccess, system_access
from memory.models import (
    AuditEvent,
    Chunk,
    Context,
    ContextMembership,
    Document,
    DuplicateCandidate,
    DuplicateStatus,
    Entity,
    Fact,
    FactKind,
    FactStatus,
    Keyword,
    KeywordLink,
    Predicate,
    Role,
    Run,
    Turn,
)
from memory.models import Conflict as ConflictRecord
from memory.services.contexts import context_create
from memory.services.duplicates.finder import duplicates_scan
from memory.services.entities.writes import entity_update, entity_upsert
from memory.services.facts.conflicts import conflict_resolve
from memory.services.facts.write import fact_write
from memory.services.ingest.documents import document_create, document_delete, documents_embed
from memory.services.ingest.run import run_create
from memory.services.ingest.turns import turn_fields_clean
from memory.services.tokens import token_issue
from memory.services.vectors import vectors_compute

# --- the scope tree -----------------------------------------------------------------------

# Sibling names chosen to trip naive matching: "a" is a string prefix of "ab" (a grant on
# org/a/* must not reach org/ab); "a_b" read as a LIKE pattern would match "axb"; "A"
# differs from "a" only in case.
ORGS = ("a", "ab", "a_b", "axb", "A")
BELOW = ("", "/team/x", "/team/x/user/u", "/user/u")
SCOPES = (*(f"org/{org}{below}" for org in ORGS for below in BELOW), "org", "other")
# Every path a grant may name: the scopes and all their ancestors (org/a/team, ...).
BASES = sorted({"/".join(s.split("/")[:n]) for s in SCOPES for n in range(1, s.count("/") + 2)})
# "*" is one choice among many, so most grant sets see part of the memory.
PATTERNS = (*BASES, *(f"{base}/*" for base in BASES), "*")

# Attribute predicates: one registered and single-valued (supersession, conflicts), the
# others unregistered (drift). Relations: one registered, one drift.
TITLE = "current_title"
DRIFT_ATTRIBUTES = ("zq_orbit_alpha", "zq_orbit_beta", "zq_orbit_gamma")
RELATIONS = ("works_at", "zq_orbits_near")
# Every record's searchable text holds "orion", so this query matches them all; the whole
# phrase is also a keyword of every document, so hybrid_graph expands from keyword seeds.
QUERY = "orion nebula mapping"
# Entities with this name share it across scopes: duplicate pairs by key, and a keyword
# of every document (keyword-entity edges for hybrid_graph).
SHARED_NAME = "Orion Nebula Mapping"
PHRASES = ("deep field imaging", "spectral line catalogue")

_slugs = itertools.count(1)


def can_read(grants: list[str], scope: str) -> bool:
    """The oracle: ``read:P``, ``write:P`` (write implies read) or both, where P is ``*``
    (everything), ``B/*`` (B and below) or ``B`` (exactly B)."""
    for grant in grants:
        pattern = grant.split(":", 1)[1]
        if pattern == "*" or scope == pattern:
            return True
        if pattern.endswith("/*"):
            base = pattern[:-2]
            if scope == base or scope.startswith(base + "/"):
                return True
    return False


def in_patterns(patterns: list[str], scope: str) -> bool:
    """Whether ``scope`` matches one of a search's scope filters (same pattern grammar)."""
    return can_read([f"read:{p}" for p in patterns], scope)


# --- strategies ---------------------------------------------------------------------------

scopes = st.sampled_from(SCOPES)
# Bases whose siblings a naive match would also reach: a string prefix without the "/",
# an unescaped LIKE "_", a case-insensitive compare.
CONFUSABLE = ("org/a/*", "org/a_b/*", "org/a", "org/A")


def patterns_near(scope: str) -> list[str]:
    """``P`` and ``P/*`` for ``scope`` and each of its ancestors."""
    parts = scope.split("/")
    bases = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    return [*bases, *(f"{base}/*" for base in bases)]


@dataclass(frozen=True)
class EntitySpec:
    scope: str
    type: str
    shared_name: bool
    seeded: bool


@dataclass(frozen=True)
class FactSpec:
    subject: int
    kind: str  # "title" | "drift" | "relation"
    scope: str | None  # None: the subject's scope
    confidence: float
    object: int  # relations only
    drift: int  # which drift attribute (for a relation: which relation)
    document: int | None  # the document the fact was read from


@dataclass(frozen=True)
class WorldSpec:
    entities: list[EntitySpec]
    documents: list[tuple[str, int | None]]  # (scope, index of an extra phrase)
    facts: list[FactSpec]
    runs: list[str]
    updates: list[int]  # entities edited by a curator (audit events on entities)
    resolve_conflict: bool
    delete_document: bool


@st.composite
def worlds(draw: st.DrawFn) -> WorldSpec:
    entities = draw(
        st.lists(
            st.builds(
                EntitySpec,
                scope=scopes,
                type=st.sampled_from(("person", "organisation")),
                shared_name=st.booleans(),
                seeded=st.booleans(),
            ),
            min_size=2,
            max_size=6,
        )
    )
    documents = draw(
        st.lists(
            st.tuples(scopes, st.none() | st.integers(0, len(PHRASES) - 1)), min_size=1, max_size=3
        )
    )
    index = st.integers(0, len(entities) - 1)
    facts = draw(
        st.lists(
            st.builds(
                FactSpec,
                subject=index,
                kind=st.sampled_from(("title", "drift", "relation")),
                scope=st.none() | scopes,
                confidence=st.sampled_from((1.0, 0.9, 0.4)),
                object=index,
                drift=st.integers(0, len(DRIFT_ATTRIBUTES) - 1),
                document=st.none() | st.integers(0, len(documents) - 1),
            ),
            min_size=1,
            max_size=10,
        )
    )
    return WorldSpec(
        entities=entities,
        documents=documents,
        facts=facts,
        runs=draw(st.lists(scopes, max_size=2)),
        updates=draw(st.lists(index, max_size=2, unique=True)),
        resolve_conflict=draw(st.booleans()),
        delete_document=draw(st.booleans()),
    )


@dataclass(frozen=True)
class Scenario:
    """A memory and the callers reading it: each a grant set and a search scope filter
    (None: no filter)."""

    spec: WorldSpec
    callers: list[tuple[list[str], list[str] | None]]


@st.composite
def scenarios(draw: st.DrawFn, callers: int = 2) -> Scenario:
    """A world, then callers whose patterns come a third each from anywhere in the tree,
    from the confusable bases, and from around the scopes the world's records live in
    (so most callers see part of the memory and miss the rest)."""
    spec = draw(worlds())
    used = [e.scope for e in spec.entities] + [scope for scope, _ in spec.documents]
    used += [f.scope for f in spec.facts if f.scope is not None] + spec.runs
    near = sorted({p for scope in used for p in patterns_near(scope)})
    pattern = st.sampled_from(PATTERNS) | st.sampled_from(CONFUSABLE) | st.sampled_from(near)
    grant = st.builds(
        lambda access, pattern: f"{access}:{pattern}",
        st.sampled_from(("read", "write", "read,write")),
        pattern,
    )
    grants = st.lists(grant, min_size=1, max_size=3, unique=True)
    filters = st.none() | st.lists(pattern, min_size=1, max_size=2, unique=True)
    return Scenario(
        spec, draw(st.lists(st.tuples(grants, filters), min_size=callers, max_size=callers))
    )


# Every property also runs this one: records in each sibling a naive match would confuse,
# read by org/a/* (not org/ab, org/a_b, org/axb), org/a_b/* (not org/axb) and exactly
# org/a (not org/A), with a deleted document and shared names outside each caller's view.
CONFUSION = Scenario(
    WorldSpec(
        entities=[
            EntitySpec("org/a", "person", shared_name=False, seeded=False),
            EntitySpec("org/ab", "person", shared_name=False, seeded=False),
            EntitySpec("org/axb/team/x", "person", shared_name=True, seeded=True),
            EntitySpec("org/A", "organisation", shared_name=True, seeded=False),
            EntitySpec("org/a_b/user/u", "person", shared_name=False, seeded=True),
        ],
        documents=[("org/axb/user/u", None), ("org/a/team/x", 0), ("org/ab", 1)],
        facts=[
            FactSpec(0, "title", None, 1.0, object=1, drift=0, document=1),
            FactSpec(0, "title", None, 0.4, object=1, drift=0, document=None),
            FactSpec(1, "drift", "org/ab", 1.0, object=0, drift=0, document=2),
            FactSpec(2, "relation", "org/axb/team/x", 1.0, object=3, drift=0, document=None),
            FactSpec(4, "drift", None, 1.0, object=0, drift=1, document=0),
            FactSpec(3, "title", "org/A", 1.0, object=0, drift=0, document=None),
        ],
        runs=["org/ab", "org/a"],
        updates=[1],
        resolve_conflict=False,
        delete_document=True,
    ),
    callers=[
        (["read:org/a/*"], None),
        (["read:org/a_b/*", "write:org/A"], ["org/a_b/*", "org/A/*"]),
        (["read:org/a"], ["org/a/*"]),
    ],
)


# --- the memory, written through the services ---------------------------------------------


@dataclass
class World:
    """The context and, read back without any grant filter, every record in it."""

    context: Context
    entities: dict[int, Entity]
    facts: dict[int, Fact]
    documents: dict[int, Document]
    deleted_documents: dict[int, str]  # id → scope
    chunks: dict[int, Chunk]
    keywords: dict[int, Keyword]
    links: list[KeywordLink]
    conflicts: dict[int, ConflictRecord]
    pairs: list[DuplicateCandidate]
    runs: dict[int, Run]
    turns: dict[int, Turn]
    events: list[AuditEvent]
    observed: dict[int, Predicate]  # drift: observed predicates by id
    markers: dict[str, str] = field(default_factory=dict)  # marker → scope of its record

    def entity_marker(self, entity_id: int) -> str | None:
        name = self.entities[entity_id].name
        return name.split()[-1].lower() if name != SHARED_NAME else None


def world_build(spec: WorldSpec, *, embed: bool = True) -> World:
    """Write ``spec`` as the system would (services only), embed it, and read it back.

    Without ``embed`` only keywords get vectors (keyword search needs them; the embedder
    is the slowest part of an example)."""
    context = context_create(slug=f"iso-{next(_slugs)}", name="Isolation")
    access = system_access(context)
    entities = [_entity(access, n, e) for n, e in enumerate(spec.entities)]
    documents = [
        document_create(
            access=access,
            title=f"doc{n:03d}q",
            text=_document_text(n, phrase),
            scope=scope,
            embed_later=True,
        )
        for n, (scope, phrase) in enumerate(spec.documents)
    ]
    for n, f in enumerate(spec.facts):
        _fact(access, n, f, entities, documents)
    for n, scope in enumerate(spec.runs):
        run_create(
            access=access,
            text=f"run{n:03d}q {QUERY}",
            scope=scope,
            infer="none",
            turn=turn_fields_clean(speaker="Ann", thread=f"thread{n % 2}", ref=f"r{n}"),
        )
    duplicates_scan(context=context, use_embeddings=False)
    for n in spec.updates:
        entity_update(access=access, entity=entities[n], attributes={"checked": True})
    conflict = ConflictRecord.objects.filter(context=context).order_by("pk").first()
    if spec.resolve_conflict and conflict is not None:
        conflict_resolve(access=access, conflict=conflict, action="keep_current")
    if spec.delete_document and len(documents) > 1:
        document_delete(access=access, document=documents.pop(0))
    if embed:
        vectors_compute("entities", [e.pk for e in entities])
        fact_ids = Fact.objects.filter(context=context).values_list("pk", flat=True)
        vectors_compute("facts", list(fact_ids))
        documents_embed(document_ids=[d.pk for d in documents])
        vectors_compute(
            "turns", list(Turn.objects.filter(context=context).values_list("pk", flat=True))
        )
    else:
        keyword_ids = Keyword.objects.filter(context=context).values_list("pk", flat=True)
        vectors_compute("keywords", list(keyword_ids))
    return world_read(context)


def _entity(access: ContextAccess, n: int, spec: EntitySpec) -> Entity:
    name = SHARED_NAME if spec.shared_name else f"Orion ent{n:03d}q"
    return entity_upsert(
        access=access, name=name, type=spec.type, scope=spec.scope, seeded=spec.seeded
    ).entity


def _document_text(n: int, phrase: int | None) -> str:
    extra = f" Notes on {PHRASES[phrase]}." if phrase is not None else ""
    return f"Report doc{n:03d}q. {SHARED_NAME} is the survey.{extra}"


def _fact(
    access: ContextAccess,
    n: int,
    spec: FactSpec,
    entities: list[Entity],
    documents: list[Document],
) -> None:
    common: dict[str, Any] = {
        "access": access,
        "subject": entities[spec.subject],
        "scope": spec.scope,
        "confidence": spec.confidence,
        "document_id": documents[spec.document].pk if spec.document is not None else None,
    }
    value = f"fct{n:03d}q {QUERY}"
    if spec.kind == "title":
        fact_write(predicate=TITLE, value=value, **common)
    elif spec.kind == "drift":
        fact_write(predicate=DRIFT_ATTRIBUTES[spec.drift], value=value, **common)
    else:
        relation = RELATIONS[spec.drift % len(RELATIONS)]
        fact_write(predicate=relation, object=entities[spec.object], **common)


def _before(event: AuditEvent) -> dict[str, Any]:
    assert event.before is not None, event
    return event.before


def world_read(context: Context) -> World:
    """Every record of ``context``, unfiltered: the ground truth the oracle judges by."""
    deleted = {
        int(e.target_id): _before(e)["scope"]
        for e in AuditEvent.objects.filter(context=context, action="document_delete")
    }
    world = World(
        context=context,
        entities={e.pk: e for e in Entity.objects.filter(context=context).defer("embedding")},
        facts={
            f.pk: f
            for f in Fact.objects.filter(context=context).select_related("predicate", "subject")
        },
        documents={d.pk: d for d in Document.objects.filter(context=context)},
        deleted_documents=deleted,
        chunks={c.pk: c for c in Chunk.objects.filter(context=context).defer("embedding")},
        keywords={
            k.pk: k for k in Keyword.objects.filter(context=context).only("pk", "text", "embedding")
        },
        links=list(KeywordLink.objects.filter(keyword__context=context)),
        conflicts={c.pk: c for c in ConflictRecord.objects.filter(context=context)},
        pairs=list(DuplicateCandidate.objects.filter(context=context, status=DuplicateStatus.OPEN)),
        runs={r.pk: r for r in Run.objects.filter(context=context)},
        turns={t.pk: t for t in Turn.objects.filter(context=context).defer("embedding")},
        events=list(AuditEvent.objects.filter(context=context)),
        observed={p.pk: p for p in Predicate.objects.filter(context=context, status="observed")},
    )
    for entity in world.entities.values():
        marker = world.entity_marker(entity.pk)
        if marker:
            world.markers[marker] = entity.scope
    for fact in world.facts.values():
        if fact.kind == FactKind.ATTRIBUTE:
            world.markers[fact.value_text.split()[0]] = fact.scope
    for document in world.documents.values():
        world.markers[document.title] = document.scope
    for event in AuditEvent.objects.filter(context=context, action="document_delete"):
        world.markers[_before(event)["title"]] = _before(event)["scope"]
    for run in world.runs.values():
        world.markers[run.input_text.split()[0]] = run.scope
    return world


# --- what a caller may see ----------------------------------------------------------------


@dataclass
class Caller:
    """A viewer holding ``grants``: a token for the API, a session for the dashboard."""

    grants: list[str]
    world: World
    api: APIClient
    web: Client

    def sees(self, scope: str) -> bool:
        return can_read(self.grants, scope)

    @property
    def entities(self) -> set[int]:
        """Visible live entities."""
        return {
            pk
            for pk, e in self.world.entities.items()
            if self.sees(e.scope) and e.merged_into_id is None
        }

    @property
    def facts(self) -> set[int]:
        """Visible facts, any status."""
        return {pk for pk, f in self.world.facts.items() if self.sees(f.scope)}

    @property
    def current_facts(self) -> set[int]:
        return {pk for pk in self.facts if self.world.facts[pk].status == FactStatus.CURRENT}

    @property
    def documents(self) -> set[int]:
        return {pk for pk, d in self.world.documents.items() if self.sees(d.scope)}

    @property
    def chunks(self) -> set[int]:
        return {pk for pk, c in self.world.chunks.items() if self.sees(c.scope)}

    @property
    def turns(self) -> set[int]:
        return {pk for pk, t in self.world.turns.items() if self.sees(t.scope)}

    @property
    def conflicts(self) -> set[int]:
        return {pk for pk, c in self.world.conflicts.items() if self.sees(c.scope)}

    @property
    def runs(self) -> set[int]:
        return {pk for pk, r in self.world.runs.items() if self.sees(r.scope)}

    def keyword_documents(self) -> dict[str, set[int]]:
        """Visible keywords (those with a visible link) → the visible documents with them."""
        found: dict[str, set[int]] = {}
        for link in self.world.links:
            if self.sees(link.scope):
                found.setdefault(self.world.keywords[link.keyword_id].text, set()).add(
                    link.document_id
                )
        return found

    def pairs(self) -> list[DuplicateCandidate]:
        """Open duplicate pairs between two visible live entities."""
        live = self.entities
        return [p for p in self.world.pairs if p.entity_a_id in live and p.entity_b_id in live]

    def event_visible(self, event: AuditEvent) -> bool:
        """Registry and context events are context-wide; others follow their target."""
        if event.target_type in ("predicate", "context"):
            return True
        if event.target_type == "entity":
            entity = self.world.entities.get(int(event.target_id))
            return entity is not None and self.sees(entity.scope)
        if event.target_type == "conflict":
            return int(event.target_id) in self.conflicts
        if event.target_type == "document":
            return self.sees(_before(event)["scope"])
        raise AssertionError(f"no visibility rule for audit target {event.target_type!r}")

    def observations(self, facts: set[int]) -> int:
        """How many times these facts were seen: what usage figures count."""
        return sum(self.world.facts[pk].observed_count for pk in facts)

    def drift_names(self) -> set[str]:
        """Observed predicates with a visible fact that is not retracted (or none such
        anywhere: a predicate refused in strict mode is registry-wide)."""
        live = [f for f in self.world.facts.values() if f.status != FactStatus.RETRACTED]
        used = {f.predicate_id for f in live}
        seen = {f.predicate_id for f in live if self.sees(f.scope)}
        return {p.name for pk, p in self.world.observed.items() if pk in seen or pk not in used}

    def allowed_markers(self) -> set[str]:
        """Markers a page may show: visible records, and the entities visible facts name
        (a fact shows its subject and object by name, whatever their scope)."""
        allowed = {m for m, scope in self.world.markers.items() if self.sees(scope)}
        for pk in self.facts:
            fact = self.world.facts[pk]
            for entity_id in (fact.subject_id, fact.object_id):
                marker = self.world.entity_marker(entity_id) if entity_id else None
                if marker:
                    allowed.add(marker)
        return allowed

    def forbidden_markers(self) -> set[str]:
        return set(self.world.markers) - self.allowed_markers()


_users = itertools.count(1)


def caller_make(world: World, grants: list[str]) -> Caller:
    """A viewer of ``world.context`` whose membership and token hold ``grants``."""
    user = get_user_model().objects.create_user(
        username=f"iso-viewer-{next(_users)}", password="pw-for-tests-only"
    )
    ContextMembership.objects.create(
        user=user, context=world.context, role=Role.VIEWER, grants=grants
    )
    api = APIClient()
    raw = token_issue(user=user, context=world.context, grants=grants).raw
    api.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
    web = Client()
    web.force_login(user)
    return Caller(grants=grants, world=world, api=api, web=web)
