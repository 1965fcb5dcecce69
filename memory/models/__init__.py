"""Memory Desk's data model, one module per concept."""

from memory.models.access import ApiToken, ContextMembership, Role, TokenPurpose, TokenTrust
from memory.models.audit import AuditEvent
from memory.models.context import Context, FactReview, PredicateMode
from memory.models.document import Chunk, Document, Keyword, KeywordLink
from memory.models.duplicate import (
    DuplicateCandidate,
    DuplicateKey,
    DuplicateModel,
    DuplicateStatus,
)
from memory.models.entity import ENTITY_TYPES, Entity, EntityIdentifier, EntityType
from memory.models.fact import (
    Conflict,
    Fact,
    FactKind,
    FactStatus,
    FactTrust,
    SourceKind,
    TrustReason,
)
from memory.models.import_job import MEMORY_IMPORT_FORMATS, ImportJob, ImportJobStatus
from memory.models.item import Item
from memory.models.merge import Merge
from memory.models.predicate import Predicate, PredicateAlias, PredicateKind, PredicateStatus
from memory.models.run import Run, RunOutcome
from memory.models.turn import Turn
from memory.models.usage import PredicateUsage

__all__ = [
    "ENTITY_TYPES",
    "MEMORY_IMPORT_FORMATS",
    "ApiToken",
    "AuditEvent",
    "Chunk",
    "Conflict",
    "Context",
    "ContextMembership",
    "Document",
    "DuplicateCandidate",
    "DuplicateKey",
    "DuplicateModel",
    "DuplicateStatus",
    "Entity",
    "EntityIdentifier",
    "EntityType",
    "Fact",
    "FactKind",
    "FactReview",
    "FactStatus",
    "FactTrust",
    "ImportJob",
    "ImportJobStatus",
    "Item",
    "Keyword",
    "KeywordLink",
    "Merge",
    "Predicate",
    "PredicateAlias",
    "PredicateKind",
    "PredicateMode",
    "PredicateStatus",
    "PredicateUsage",
    "Role",
    "Run",
    "RunOutcome",
    "SourceKind",
    "TokenPurpose",
    "TokenTrust",
    "TrustReason",
    "Turn",
]
