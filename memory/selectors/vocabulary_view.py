"""The vocabulary lists as callers see them (``GET vocabulary`` and the MCP
``get_vocabulary`` tool): exactly what the next extraction prompt for a write into a
scope would show, with that part of the prompt rendered."""

from __future__ import annotations

from typing import Any

from memory.domain.access import ContextAccess
from memory.infra.embeddings import embed_for_request
from memory.kernel.scopes import scope_validate
from memory.llm.prompt import vocabulary_render
from memory.selectors.vocabulary import vocabulary_gather

VOCABULARY_HINT = "the vocabulary without `text` still works"


def vocabulary_listing(*, access: ContextAccess, scope: str, text: str = "") -> dict[str, Any]:
    """The four lists for a write into ``scope`` (which the caller must be able to read).
    ``text`` (a turn) puts the entities it names or resembles first when there are more
    than 500; that needs the embedder (503 ``embedder_unavailable`` when it is down)."""
    scope = scope_validate(scope)
    access.require_read(scope)
    vocabulary = vocabulary_gather(
        context=access.context,
        scope=scope,
        grants=access.grants,
        text=text,
        embed=lambda t: embed_for_request([t], hint=VOCABULARY_HINT)[0],
    )
    return {
        "scope": vocabulary.scope,
        "visible_scopes": list(vocabulary.visible_scopes),
        "entities": [
            {"id": e.id, "name": e.name, "type": e.type, "why": e.why} for e in vocabulary.entities
        ],
        "entities_truncated": vocabulary.entities_truncated,
        "relation_labels": list(vocabulary.relation_labels),
        "attribute_keys": list(vocabulary.attribute_keys),
        "action_verbs": list(vocabulary.action_verbs),
        "prompt_section": vocabulary_render(vocabulary),
    }
