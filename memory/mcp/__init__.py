"""The MCP face of Memory Desk: an MCP server at ``/mcp`` (streamable HTTP) in the web
process, on the official ``mcp`` SDK. ``view`` bridges Django requests to the SDK,
``server`` holds the tools (listed in ``tools``: ``read_tools`` and ``write_tools``, their
argument types in ``arguments``), ``calls`` runs a tool and shapes its result or error,
``shapes`` the small dicts they answer with.

The tools are thin: each validates its arguments (the SDK, from the signature), calls the
same service or selector as the REST API with the token's access, and shapes the result.
"""
