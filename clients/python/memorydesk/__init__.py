"""Memory Desk's Python client: ``MemoryDesk`` and ``AsyncMemoryDesk``.

``memorydesk.langgraph`` holds LangGraph stores over the items API, and
``memorydesk.llama_index`` a LlamaIndex memory block; each needs its framework installed.
"""

from memorydesk.aclient import AsyncMemoryDesk
from memorydesk.client import MemoryDesk
from memorydesk.errors import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    ItemNotFoundError,
    MemoryDeskError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitError,
    ScopeForbiddenError,
    ServerError,
    ServiceUnavailableError,
    TransportError,
)
from memorydesk.types import (
    Action,
    ContextBlock,
    Entity,
    EntityRef,
    Fact,
    FactWrite,
    ImportJob,
    Item,
    Run,
    SearchHit,
    SearchResults,
)

__version__ = "0.1.0"

__all__ = [
    "Action",
    "AsyncMemoryDesk",
    "AuthenticationError",
    "BadRequestError",
    "ConflictError",
    "ContextBlock",
    "Entity",
    "EntityRef",
    "Fact",
    "FactWrite",
    "ImportJob",
    "Item",
    "ItemNotFoundError",
    "MemoryDesk",
    "MemoryDeskError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "RateLimitError",
    "Run",
    "ScopeForbiddenError",
    "SearchHit",
    "SearchResults",
    "ServerError",
    "ServiceUnavailableError",
    "TransportError",
]
