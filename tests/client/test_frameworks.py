"""LangMem's memory tools on ``MemoryDeskStore``, driven by an agent whose model is the
scripted OpenAI-compatible server; ``MemoryDeskBlock`` inside llama-index-core's
``Memory``. Real HTTP to the live test server throughout."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from langchain_core.runnables import RunnableConfig
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent
from langmem import create_manage_memory_tool, create_search_memory_tool
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import Memory
from memorydesk.langgraph import MemoryDeskStore
from memorydesk.llama_index import MemoryDeskBlock
from pydantic import SecretStr

from memory.models import Item, Turn
from tests.client.conftest import Desk
from tests.fake_llm import FakeLLM


@pytest.fixture
def scripted() -> Iterator[FakeLLM]:
    server = FakeLLM().start()
    yield server
    server.stop()


def test_langmem_tools_manage_and_search_memories_in_the_store(
    desk: Desk, scripted: FakeLLM
) -> None:
    namespace = ("memories", "{langgraph_user_id}")
    with MemoryDeskStore(**desk.kwargs(), index={"fields": ["content"]}) as store:
        tools = [
            create_manage_memory_tool(namespace=namespace, store=store),
            create_search_memory_tool(namespace=namespace, store=store),
        ]
        model = ChatOpenAI(base_url=scripted.base_url, api_key=SecretStr("test"), model="scripted")
        agent = create_react_agent(model, tools=tools, store=store)
        config: RunnableConfig = {"configurable": {"langgraph_user_id": "alex"}}

        scripted.reply_tool_call(
            "manage_memory", {"content": "Alex prefers green tea", "action": "create"}
        )
        scripted.reply_text("I will remember that.")
        agent.invoke({"messages": [("user", "I prefer green tea")]}, config)
        (stored,) = Item.objects.all()
        assert stored.namespace == ["memories", "alex"]
        assert stored.value["content"] == "Alex prefers green tea"

        scripted.reply_tool_call("search_memory", {"query": "what tea"})
        scripted.reply_text("You prefer green tea.")
        answer = agent.invoke({"messages": [("user", "What tea do I like?")]}, config)
        found = next(m for m in answer["messages"] if m.type == "tool")
        assert "Alex prefers green tea" in found.content
        hits = json.loads(found.content) if found.content.startswith("[") else None
        assert hits is None or hits[0]["value"]["content"] == "Alex prefers green tea"
        # the tool call's result went back to the model
        assert any(
            msg.get("role") == "tool" and "green tea" in str(msg.get("content"))
            for msg in scripted.chat_requests[-1]["messages"]
        )

        key = stored.key
        scripted.reply_tool_call("manage_memory", {"action": "delete", "id": key})
        scripted.reply_text("Forgotten.")
        agent.invoke({"messages": [("user", "Forget my tea preference")]}, config)
        assert not Item.objects.exists()


def test_memory_desk_block_writes_turns_and_reads_the_context_block(desk: Desk) -> None:
    async def main() -> str:
        block = MemoryDeskBlock(scope="org/alex", thread="chat-1", infer="none", **desk.kwargs())
        memory = Memory.from_defaults(
            session_id="chat-1",
            token_limit=60,
            chat_history_token_ratio=0.5,
            token_flush_size=20,
            memory_blocks=[block],
        )
        await memory.aput_messages(
            [
                ChatMessage(role="user", content="I always drink green tea in the morning."),
                ChatMessage(role="assistant", content="Green tea every morning, noted."),
                ChatMessage(role="user", content="My sister Maria lives in Lisbon."),
                ChatMessage(role="assistant", content="Lisbon, noted."),
            ]
        )
        await memory.aput(ChatMessage(role="user", content="What do I drink in the morning?"))
        messages = await memory.aget()
        await block.aclose()
        return str(messages[0].content)

    system = asyncio.run(main())
    turns = list(Turn.objects.order_by("id").values_list("speaker", "thread", "text"))
    assert turns[0] == ("user", "chat-1", "I always drink green tea in the morning.")
    assert "<memory_desk>" in system and "green tea" in system
