"""The MCP tools' argument types and limits: one description each, shared by the tools
that take them (the SDK turns them into each tool's JSON schema), and the tools' hints."""

from __future__ import annotations

from typing import Annotated

from mcp_types import ToolAnnotations
from pydantic import Field

from memory.domain.predicate_names import MAX_PREDICATE_LENGTH
from memory.kernel.scopes import MAX_SCOPE_LENGTH

MAX_TOOL_K = 100
MAX_FIND_FACTS = 200
MAX_SCOPE_FILTERS = 50
MAX_TEXT_CHARS = 10_000
NO_NUL = r"^[^\x00]*$"  # PostgreSQL text cannot hold NUL

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)

Scope = Annotated[
    str,
    Field(
        description="a scope path inside the context, e.g. org/acme or org/acme/user/alex",
        min_length=1,
        max_length=MAX_SCOPE_LENGTH,
    ),
]
ScopeFilters = Annotated[
    list[Annotated[str, Field(max_length=MAX_SCOPE_LENGTH + 2)]] | None,
    Field(
        description="narrow the token's read grants to these scope patterns: P (exactly P), "
        "P/* (P and below) or *; default: everything the token may read",
        max_length=MAX_SCOPE_FILTERS,
    ),
]
EntityRef = Annotated[
    int | str,
    Field(
        description="an entity id, or a name: its canonical name, an alias or an identifier "
        "(alex@acme.example, email:alex@acme.example)",
    ),
]
Predicate = Annotated[
    str,
    Field(
        description="a predicate in any form: worksAt, works-at, works at or an alias all "
        "mean works_at",
        min_length=1,
        max_length=MAX_PREDICATE_LENGTH,
    ),
]
Wait = Annotated[
    bool,
    Field(
        description="true: run now and answer with the result; false: queue the run for the "
        "task worker and answer with its id (poll get_run)",
    ),
]


FactId = Annotated[int, Field(description="the fact's id (from find_facts, get_entity…)", ge=1)]
