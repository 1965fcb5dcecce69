"""The MCP tools that write: ``remember``, ``add_facts``, ``correct_fact``,
``retract_fact`` and ``review_facts``. Each is a thin function over the service the REST
API calls, acting with the token's access; a write outside its grants is the service's
``scope_forbidden``."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from django.db import transaction
from pydantic import Field

from memory.kernel.errors import ValidationFailed
from memory.llm.schemas import (
    StrictActionItem,
    StrictAttributeItem,
    StrictEntityItem,
    StrictRelationItem,
    TriplesInput,
)
from memory.mcp.arguments import NO_NUL, EntityRef, FactId, Scope, Wait
from memory.mcp.calls import as_tool, current_access
from memory.mcp.shapes import fact_shape, run_shape
from memory.models.turn import MAX_REF_CHARS, MAX_SPEAKER_CHARS, MAX_THREAD_CHARS
from memory.selectors.entity_lookup import resolve_entity_name
from memory.selectors.facts import fact_get
from memory.services.facts.corrections import fact_correct
from memory.services.facts.retraction import fact_retract
from memory.services.facts.review import MAX_BULK_REVIEW, facts_review
from memory.services.ingest.run import run_create, run_enqueue, run_execute
from memory.services.ingest.turns import turn_fields_clean


def _run_answer(run: Any, *, wait: bool) -> dict[str, Any]:
    if not wait:
        run_enqueue(run=run)
        return {"run": run_shape(run), "queued": True, "result": None}
    run = run_execute(run_id=run.pk)
    return {"run": run_shape(run), "queued": False, "result": run.result}


@as_tool
def remember(
    text: Annotated[
        str,
        Field(
            description="the memory: a conversation turn or a note, in plain language",
            pattern=NO_NUL,
        ),
    ],
    scope: Scope,
    infer: Annotated[
        Literal["llm", "triples", "none"],
        Field(
            description="llm: the chat model extracts entities and facts; triples: store the "
            "given triples as they are (no model); none: keep the text as a document only",
        ),
    ] = "llm",
    triples: Annotated[
        TriplesInput | None,
        Field(description="with infer=triples: {entities, relations, attributes, actions}"),
    ] = None,
    source: Annotated[
        str,
        Field(
            description="where the text came from: user, assistant, tool, document, web, "
            "email, file (alone or as kind:detail) or an address; under the default review "
            "policy, facts from relayed text (tool, document, web, email, file, an address) "
            "wait for review (relayed_source), as with POST memories",
            max_length=300,
            pattern=NO_NUL,
        ),
    ] = "",
    speaker: Annotated[
        str, Field(description="who said it", max_length=MAX_SPEAKER_CHARS, pattern=NO_NUL)
    ] = "",
    said_at: Annotated[
        datetime | None, Field(description="when it was said (ISO 8601; no zone means UTC)")
    ] = None,
    thread: Annotated[
        str,
        Field(
            description="the conversation it belongs to (search filters turns by it)",
            max_length=MAX_THREAD_CHARS,
            pattern=NO_NUL,
        ),
    ] = "",
    ref: Annotated[
        str,
        Field(description="your own id for this turn", max_length=MAX_REF_CHARS, pattern=NO_NUL),
    ] = "",
    wait: Wait = True,
) -> dict[str, Any]:
    """Write a memory into the store, as POST memories does: the text is kept as a
    searchable turn (with its speaker, time, thread and ref) and the run records the
    input, the extraction and its outcome. Answers the run (id, outcome) and, having waited, its
    result: entities created or matched, facts created or superseded, new predicates,
    conflicts, and warnings (items refused, constraints a fact breaks). Needs a write grant
    on `scope`."""
    run = run_create(
        access=current_access(),
        text=text,
        scope=scope,
        infer=infer,
        triples=triples.model_dump(exclude_none=True) if triples is not None else None,
        source=source,
        turn=turn_fields_clean(speaker=speaker, said_at=said_at, thread=thread, ref=ref),
    )
    return _run_answer(run, wait=wait)


@as_tool
def add_facts(
    scope: Scope,
    entities: Annotated[
        list[StrictEntityItem],
        Field(description="entities to create or match: {name, type, aliases, identifiers}"),
    ] = [],  # noqa: B006 - the SDK copies defaults into its argument model
    relations: Annotated[
        list[StrictRelationItem],
        Field(description="{subject, predicate, object} between entities (named by name)"),
    ] = [],  # noqa: B006
    attributes: Annotated[
        list[StrictAttributeItem],
        Field(description="{subject, key, value}: a property of an entity"),
    ] = [],  # noqa: B006
    actions: Annotated[
        list[StrictActionItem],
        Field(description="{subject, verb, object?, at?}: something an entity did"),
    ] = [],  # noqa: B006
    text: Annotated[
        str,
        Field(
            description="optional: the text these facts came from (kept on the run)",
            pattern=NO_NUL,
        ),
    ] = "",
    wait: Wait = True,
) -> dict[str, Any]:
    """Store facts exactly as given, with no model choosing the words (a memory with
    infer=triples). Predicates are canonicalized (worksAt → works_at) and entities resolved
    like every write; the result's warnings name items refused and constraints a fact
    breaks. Needs a write grant on `scope`."""
    triples = TriplesInput(
        entities=entities, relations=relations, attributes=attributes, actions=actions
    )
    if not (entities or relations or attributes or actions):
        raise ValidationFailed(
            "give at least one entity, relation, attribute or action", code="missing_triples"
        )
    run = run_create(
        access=current_access(),
        text=text,
        scope=scope,
        infer="triples",
        triples=triples.model_dump(exclude_none=True),
        source="mcp add_facts",
    )
    return _run_answer(run, wait=wait)


@as_tool
def correct_fact(
    fact_id: FactId,
    value: Annotated[
        str | int | float | bool | None,
        Field(description="the corrected value, for an attribute fact"),
    ] = None,
    object: Annotated[
        EntityRef | None, Field(description="the corrected object entity, for a relation")
    ] = None,
    reason: Annotated[
        str, Field(description="why (kept in the audit log)", max_length=300, pattern=NO_NUL)
    ] = "",
) -> dict[str, Any]:
    """Say a current fact was wrong: the corrected fact supersedes it (same subject,
    predicate and scope; the old one stays in history), recorded in the audit log and
    undoable. Needs a write grant on the fact's scope."""
    access = current_access()
    with transaction.atomic():
        fact = fact_get(access=access, fact_id=fact_id)
        target = (
            resolve_entity_name(access=access, ref=object, prefer_scope=fact.scope).entity
            if object is not None
            else None
        )
        correction = fact_correct(
            access=access, fact=fact, value=value, object=target, reason=reason
        )
    return {
        "corrected": fact_shape(fact_get(access=access, fact_id=correction.old.pk)),
        "fact": fact_shape(fact_get(access=access, fact_id=correction.new.pk)),
        "audit_event": correction.audit_event_id,
    }


@as_tool
def retract_fact(fact_id: FactId) -> dict[str, Any]:
    """Withdraw a fact: it stops being current and stays in history (as DELETE facts/{id}).
    Needs a write grant on the fact's scope."""
    access = current_access()
    fact = fact_retract(access=access, fact=fact_get(access=access, fact_id=fact_id))
    return {"fact": fact_shape(fact_get(access=access, fact_id=fact.pk))}


@as_tool
def review_facts(
    fact_ids: Annotated[
        list[FactId],
        Field(description="the pending facts to review", min_length=1, max_length=MAX_BULK_REVIEW),
    ],
    action: Annotated[
        Literal["accept", "reject"],
        Field(description="accept (agents are told it) or reject (it stays refused)"),
    ],
    note: Annotated[
        str, Field(description="why (kept in the audit log)", max_length=500, pattern=NO_NUL)
    ] = "",
) -> dict[str, Any]:
    """A curator's review of pending facts (as POST facts/review): all or nothing, each
    audited and undoable. Needs the curator role through a trusted token."""
    access = current_access()
    reviewed = facts_review(access=access, fact_ids=fact_ids, action=action, note=note)
    return {
        "results": [
            {
                "action": r.action,
                "fact": fact_shape(fact_get(access=access, fact_id=r.fact.pk)),
                "superseded": r.superseded.pk if r.superseded else None,
                "audit_event": r.audit_event.pk,
            }
            for r in reviewed
        ]
    }
