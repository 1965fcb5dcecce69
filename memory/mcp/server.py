"""The MCP server object: Memory Desk's tools on the SDK's ``MCPServer``."""

from __future__ import annotations

from functools import cache

from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer

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


@cache
def mcp_server() -> MCPServer:
    """One server per process; the tools are stateless, so requests share it."""
    server: MCPServer = MCPServer(
        "memory-desk",
        title="Memory Desk",
        instructions=INSTRUCTIONS,
        version="1",
        log_level="WARNING",
    )
    for fn, name, hints in TOOLS:
        # Results are built here (text and structured content both); no output model.
        server.add_tool(fn, name=name, annotations=hints, structured_output=False)
    return server


def mcp_protocol_server() -> Server:
    """The protocol-level server under ``mcp_server`` that transports serve. The SDK's own
    in-process client reaches it the same way; ``MCPServer`` offers no public accessor."""
    return mcp_server()._lowlevel_server
