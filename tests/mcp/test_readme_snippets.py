"""The README's MCP snippets are the ones that work: the agent session runs as its own
process against the live server, and the client configuration's URL and header connect."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from mcp import Client

from tests.mcp.conftest import World, with_mcp

README = Path(settings.BASE_DIR) / "README.md"


def _mcp_section() -> str:
    text = README.read_text()
    start = text.index("## MCP: connecting an agent")
    return text[start : text.index("\n## ", start + 1)]


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", _mcp_section(), flags=re.DOTALL)


def test_the_readme_agent_session_remembers_searches_then_gets_the_context(
    mcp_url: str, token_for: Callable[..., str], world: World
) -> None:
    (snippet,) = _blocks("python")
    env = {
        **os.environ,
        "MEMORY_DESK_MCP": mcp_url,
        "MEMORY_DESK_TOKEN": token_for(["read,write:org/acme/*"]),
    }
    done = subprocess.run(
        [sys.executable, "-c", snippet], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found, context = done.stdout.split("# Memory context (mcp-test)")
    # The search finds the remembered turn and its fact, each typed.
    assert "turn Alex Rivera leads Project Phoenix." in found
    assert "fact Alex Rivera leads Project Phoenix" in found
    # The block's first fact answers the question.
    facts = context.split("## Facts (best first)\n")[1].splitlines()
    assert facts[0].startswith("- Alex Rivera leads Project Phoenix [fact ")
    assert "scope org/acme" in facts[0]


def test_the_readme_says_to_export_every_variable_the_agent_session_reads() -> None:
    (snippet,) = _blocks("python")
    (exports,) = _blocks("bash")
    read = set(re.findall(r"os\.environ\[[\"'](\w+)[\"']\]", snippet))
    exported = dict(re.findall(r"^export (\w+)=(\S+)$", exports, flags=re.MULTILINE))
    assert read == {"MEMORY_DESK_MCP", "MEMORY_DESK_TOKEN"} and set(exported) == read
    assert exported["MEMORY_DESK_MCP"] == "http://127.0.0.1:8000/mcp"


def test_the_readme_client_configuration_connects(
    mcp_url: str, token_for: Callable[..., str], world: World
) -> None:
    cursor = json.loads(_blocks("json")[0])["mcpServers"]["memory-desk"]
    token = token_for(["read:*"])
    assert cursor["url"] == "http://127.0.0.1:8000/mcp"
    assert cursor["headers"] == {"Authorization": "Token md_your_token"}
    url = cursor["url"].replace("http://127.0.0.1:8000", mcp_url.removesuffix("/mcp"))
    header = cursor["headers"]["Authorization"].replace("md_your_token", token)

    async def work(client: Client) -> Any:
        return (await client.list_tools()).tools

    tools = with_mcp(url, header.removeprefix("Token "), work)
    assert "get_context" in {t.name for t in tools}
    (claude_code,) = _blocks("sh")
    assert "--transport http memory-desk http://127.0.0.1:8000/mcp" in claude_code
    assert '--header "Authorization: Token md_your_token"' in claude_code
