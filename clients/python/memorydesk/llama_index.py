"""A LlamaIndex memory block backed by Memory Desk: ``MemoryDeskBlock``.

Inside llama-index-core's ``Memory``, the messages that leave short-term memory are
written to Memory Desk as turns (``POST memories``, one per message, spoken by its role,
in the block's thread), where the server extracts facts from them; when the memory is
read, the block answers with Memory Desk's context block for the latest message — the
ranked facts and passages that answer it.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import BaseMemoryBlock
from pydantic import Field, PrivateAttr

from memorydesk.aclient import AsyncMemoryDesk

__all__ = ["MemoryDeskBlock"]


def _text(message: ChatMessage) -> str:
    return (message.content or "").strip() if isinstance(message.content, str | None) else ""


class MemoryDeskBlock(BaseMemoryBlock[str]):
    """Long-term memory in a Memory Desk context.

    ``url``, ``token`` and ``context`` default to ``MEMORY_DESK_URL``, ``MEMORY_DESK_TOKEN``
    and ``MEMORY_DESK_CONTEXT``; ``scope`` is where the turns are written (the token needs
    a write grant on it). ``infer``: how the server reads each turn (``llm`` extracts
    facts with its chat model; ``none`` keeps the turn searchable only).
    """

    name: str = Field(default="memory_desk", description="The block's name in the template.")
    scope: str = Field(description="The scope the turns are written to.")
    thread: str | None = Field(default=None, description="The conversation's thread.")
    infer: str = Field(default="llm", description="How the server reads each turn.")
    budget_tokens: int = Field(default=300, description="The context block's size.")
    url: str | None = Field(default=None)
    token: str | None = Field(default=None, repr=False)
    context: str | None = Field(default=None)
    _client: AsyncMemoryDesk | None = PrivateAttr(default=None)

    def _desk(self) -> AsyncMemoryDesk:
        # One client per event loop is what httpx allows; Memory runs its blocks on the
        # caller's loop, and a new loop (asyncio.run) gets a new client.
        if self._client is None:
            self._client = AsyncMemoryDesk(
                url=self.url, token=self.token, context=self.context, scope=self.scope
            )
        return self._client

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        query = next((_text(m) for m in reversed(messages or []) if _text(m)), "")
        if not query:
            return ""
        block = await self._desk().context(
            query, budget_tokens=self.budget_tokens, scope=[self.scope]
        )
        return block.text

    async def _aput(self, messages: list[ChatMessage]) -> None:
        desk = self._desk()
        for message in messages:
            text = _text(message)
            if text:
                await desk.memories.add(
                    text,
                    speaker=str(message.role.value),
                    thread=self.thread,
                    infer=self.infer,
                    wait=True,
                )

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
