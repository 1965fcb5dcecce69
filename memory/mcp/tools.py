"""The MCP tools Memory Desk serves, in the order ``tools/list`` shows them: the readers
in ``read_tools``, the writers in ``write_tools``, how each runs in ``calls``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp_types import ToolAnnotations

from memory.infra.replicas import mcp_read_tools_register
from memory.mcp.arguments import DESTRUCTIVE, READ_ONLY, WRITES
from memory.mcp.calls import bind_access, current_access
from memory.mcp.read_tools import (
    canonicalize_predicate,
    find_facts,
    get_context,
    get_entity,
    get_run,
    get_vocabulary,
    search,
)
from memory.mcp.write_tools import (
    add_facts,
    correct_fact,
    remember,
    retract_fact,
    review_facts,
)

TOOLS: list[tuple[Callable[..., Any], str, ToolAnnotations]] = [
    (remember, "remember", WRITES),
    (add_facts, "add_facts", WRITES),
    (search, "search", READ_ONLY),
    (get_context, "get_context", READ_ONLY),
    (get_entity, "get_entity", READ_ONLY),
    (find_facts, "find_facts", READ_ONLY),
    (get_vocabulary, "get_vocabulary", READ_ONLY),
    (canonicalize_predicate, "canonicalize_predicate", READ_ONLY),
    (correct_fact, "correct_fact", WRITES),
    (retract_fact, "retract_fact", DESTRUCTIVE),
    (review_facts, "review_facts", WRITES),
    (get_run, "get_run", READ_ONLY),
]

# Requests that call only these may read from a replica (memory.infra.replicas).
mcp_read_tools_register({name for _, name, hints in TOOLS if hints.read_only_hint})

__all__ = ["TOOLS", "bind_access", "current_access"]
