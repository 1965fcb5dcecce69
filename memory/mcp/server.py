"""The MCP server object: Memory Desk's tools on the SDK's ``MCPServer``."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp_types import ToolAnnotations
from pydantic import ConfigDict, ValidationError

from memory.mcp.calls import error_text
from memory.mcp.tools import TOOLS

INSTRUCTIONS = (
    "Memory Desk: long-term memory for agents, as a knowledge graph (entities and "
    "subject-predicate-object facts with history) plus documents and passages. The token "
    "you connect with belongs to one memory context and limits which scopes you may read "
    "and write. Write with `remember` (a turn; the model extracts facts) or `add_facts` "
    "(triples as given). Before answering, call `get_context` with the user's question: it "
    "returns a prompt-ready block of the best facts and passages, each with its id, scope "
    "and source. Use `get_entity`, `find_facts` and `search` to look closer; "
    "`correct_fact` and `retract_fact` to fix what is wrong."
)


class _Tool(Tool):
    """A tool whose argument errors read like every other tool error: the JSON error body
    (``invalid_arguments``) naming each argument and what is wrong with it in plain words,
    not the validation library's report (model names, error types, links)."""

    async def run(
        self, arguments: dict[str, Any], context: Any, convert_result: bool = False
    ) -> Any:
        try:
            return await super().run(arguments, context, convert_result)
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            problems = {_where(e["loc"]): _said(e) for e in exc.__cause__.errors()}
            named = "; ".join(f"{where}: {said}" for where, said in problems.items())
            raise ToolError(
                error_text("invalid_arguments", f"{self.name}: {named}", problems)
            ) from exc.__cause__


def _where(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or "arguments"


def _said(error: Any) -> str:
    if error["type"] == "extra_forbidden":
        return "not an argument of this tool"
    if error["type"] == "missing":
        return "required"
    message = str(error["msg"])
    return message[:1].lower() + message[1:]


def _strict_tool(fn: Callable[..., Any], name: str, hints: ToolAnnotations) -> Tool:
    """The SDK's tool for ``fn``, refusing arguments it does not take (the SDK's argument
    models ignore them): a misspelt ``limit`` is an error naming it, as in the REST API,
    not a call that silently runs with the default. The schema says so too
    (``additionalProperties: false``)."""
    # Results are built in memory.mcp.calls (text and structured content both): no
    # output model.
    tool = _Tool.from_function(fn, name=name, annotations=hints, structured_output=False)
    loose = tool.fn_metadata.arg_model
    strict: type[ArgModelBase] = type(
        loose.__name__,
        (loose,),
        {"model_config": ConfigDict(**{**loose.model_config, "extra": "forbid"})},
    )
    tool.fn_metadata.arg_model = strict
    tool.parameters = strict.model_json_schema(by_alias=True)
    return tool


@cache
def mcp_server() -> MCPServer:
    """One server per process; the tools are stateless, so requests share it."""
    return MCPServer(
        "memory-desk",
        title="Memory Desk",
        instructions=INSTRUCTIONS,
        version="1",
        log_level="WARNING",
        tools=[_strict_tool(fn, name, hints) for fn, name, hints in TOOLS],
    )


def mcp_protocol_server() -> Server:
    """The protocol-level server under ``mcp_server`` that transports serve. The SDK's own
    in-process client reaches it the same way; ``MCPServer`` offers no public accessor."""
    return mcp_server()._lowlevel_server
