"""The standard predicate library every new context's registry starts from.

44 predicates in 10 categories (see shared/reference/standard-predicates.md). Names,
categories, flags and numbers follow the published table; descriptions and examples are
ours. Type hints use this product's closed entity types and are prompt hints only.
Pure data: importable without Django.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

Kind = Literal["relation", "attribute", "action", "narrative"]
LifecycleName = Literal["stable", "stateful", "ephemeral", "episodic"]


@dataclass(frozen=True)
class StandardPredicate:
    name: str
    category: str
    kind: Kind
    description: str
    example: str
    subject_types: tuple[str, ...] = ()
    object_types: tuple[str, ...] = ()
    inverse: str = ""
    # As published. A form that normalizes onto the name itself (``worksAt``) is covered by
    # canonicalization and is not stored as an alias row.
    aliases: tuple[str, ...] = ()
    default_importance: float = 0.5
    ranking_weight: float = 1.0
    single_valued: bool = False
    is_aggregate: bool = False
    lifecycle: LifecycleName = "stable"
    default_validity_days: int | None = None
    exclude_from_prompt: bool = False
    # Property constraints (memory/domain/constraints.py); the defaults are in
    # LIBRARY_CONSTRAINTS below, by name, so the table above stays a table.
    constraints: tuple[dict[str, object], ...] = ()


_P = StandardPredicate
# The entries below are a table: one call per predicate, positional fields in the
# dataclass's order (name, category, kind, description, example, subject_types,
# object_types, inverse, aliases, default_importance, ranking_weight), the rarer flags by
# keyword. Formatting them one argument per line would hide the table.
# fmt: off
PERSON = ("person",)
ORG = ("organisation",)

_IDENTITY: tuple[StandardPredicate, ...] = (
    _P(
        "works_at", "identity", "relation",
        "the subject is employed by or works for the organisation",
        "Dana Reyes works at Northwind Logistics.",
        PERSON, ORG, "employs", ("worksAt", "employed_by", "employee_of"), 1.0, 1.5,
    ),
    _P(
        "reports_to", "identity", "relation",
        "the subject's direct line manager is the object",
        "Dana reports to Marcus Lee, the head of operations.",
        PERSON, PERSON, "manages", (), 0.9, 1.4,
    ),
    _P(
        "current_title", "identity", "attribute",
        "the subject's job title now; a new title replaces the old one",
        "Dana's title is now Senior Operations Analyst.",
        PERSON, (), "", (), 1.0, 1.5, single_valued=True, lifecycle="stateful",
    ),
    _P(
        "current_role", "identity", "attribute",
        "the function the subject currently performs, beyond the formal title",
        "Dana currently acts as the on-call lead for the warehouse system.",
        PERSON, (), "", ("current_position",), 1.0, 1.5, single_valued=True,
        lifecycle="stateful",
    ),
    _P(
        "located_in", "identity", "relation",
        "the subject is based in or situated at the object place",
        "Northwind's main depot is in Rotterdam.",
        (), (), "location_of", (), 0.6, 1.0,
    ),
    _P(
        "is_member_of", "identity", "relation",
        "the subject belongs to a group, team, club or body",
        "Dana is a member of the logistics standards working group.",
        PERSON, ORG, "has_member", (), 0.8, 1.2,
    ),
    _P(
        "founded", "identity", "relation",
        "the subject started or co-founded the organisation",
        "Priya Natarajan founded Brightloop in 2019.",
        PERSON, ORG, "founded_by", (), 1.0, 1.3,
    ),
)

_ORGANIZATIONAL: tuple[StandardPredicate, ...] = (
    _P(
        "part_of", "organizational", "relation",
        "the subject is a component, unit or section of the object",
        "The analytics team is part of the finance department.",
        (), (), "has_part", (), 0.7, 1.1,
    ),
    _P(
        "subsidiary_of", "organizational", "relation",
        "the subject company is controlled by the object company",
        "Brightloop Labs is a subsidiary of Brightloop Holdings.",
        ORG, ORG, "parent_of", (), 0.9, 1.2,
    ),
    _P(
        "manages", "organizational", "relation",
        "the subject is the line manager of the object person",
        "Marcus manages Dana and two other analysts.",
        PERSON, PERSON, "reports_to", (), 0.9, 1.4,
    ),
    _P(
        "owns", "organizational", "relation",
        "the subject holds ownership of or responsibility for the object",
        "Dana owns the quarterly capacity report.",
        (), (), "owned_by", (), 0.8, 1.1,
    ),
    _P(
        "acquired", "organizational", "relation",
        "the subject organisation bought the object organisation",
        "Northwind acquired Fastlane Couriers last spring.",
        ORG, ORG, "acquired_by", (), 0.9, 1.2,
    ),
    _P(
        "merged_with", "organizational", "relation",
        "the two organisations combined into one",
        "Fastlane merged with Parcelpoint before the acquisition.",
        ORG, ORG, "merged_with", (), 0.9, 1.1,
    ),
)

_TASK: tuple[StandardPredicate, ...] = (
    _P(
        "committed_to", "task", "relation",
        "the subject promised to deliver or do the object work",
        "Dana committed to shipping the route planner by Friday.",
        PERSON, ("project",), "committer_of", ("committed", "promised"), 0.9, 1.3,
        lifecycle="ephemeral", default_validity_days=90,
        # Kept for programmatic writers; the extraction prompt does not offer it.
        exclude_from_prompt=True,
    ),
    _P(
        "blocked_by", "task", "relation",
        "the subject work cannot proceed until the object is resolved",
        "The route planner is blocked by the missing map licence.",
        ("project",), (), "blocks", (), 0.9, 1.3,
        lifecycle="ephemeral", default_validity_days=60,
    ),
    _P(
        "depends_on", "task", "relation",
        "the subject needs the object in order to work or be finished",
        "The billing migration depends on the new customer database.",
        (), (), "dependency_of", (), 0.8, 1.2,
        lifecycle="ephemeral", default_validity_days=90,
    ),
    _P(
        "prepares_for", "task", "relation",
        "the subject work is preparation for the object event",
        "The budget review deck prepares for the March board meeting.",
        ("project",), ("event",), "prepared_by", ("prep_for", "preparation_for"), 0.8, 1.3,
        lifecycle="ephemeral", default_validity_days=90,
    ),
)

_DECISION: tuple[StandardPredicate, ...] = (
    _P(
        "decision_made", "decision", "attribute",
        "a decision the subject took or that was taken at the subject event",
        "At the planning meeting the team decided to drop the mobile app.",
        ("person", "event", "topic"), (), "",
        ("decided", "chose", "agreed_on", "agreed_to"), 0.85, 1.4,
    ),
)

_COMMUNICATION: tuple[StandardPredicate, ...] = (
    _P(
        "emailed", "communication", "relation",
        "the subject sent an email to the object person",
        "Dana emailed Marcus the revised forecast.",
        PERSON, PERSON, "", (), 0.4, 0.8, exclude_from_prompt=True, lifecycle="episodic",
        default_validity_days=30,
    ),
    _P(
        "called", "communication", "relation",
        "the subject phoned or video-called the object person",
        "Marcus called the Fastlane account manager this morning.",
        PERSON, PERSON, "", (), 0.4, 0.8, exclude_from_prompt=True, lifecycle="episodic",
        default_validity_days=30,
    ),
    _P(
        "messaged", "communication", "relation",
        "the subject sent a chat or text message to the object person",
        "Priya messaged Dana about the outage on Slack.",
        PERSON, PERSON, "", (), 0.4, 0.8, exclude_from_prompt=True, lifecycle="episodic",
        default_validity_days=30,
    ),
    _P(
        "met_with", "communication", "relation",
        "the subject had a meeting with the object person",
        "Dana met with the Parcelpoint integration team on Tuesday.",
        PERSON, PERSON, "", (), 0.6, 1.0, lifecycle="episodic", default_validity_days=90,
    ),
    _P(
        "mentioned", "communication", "relation",
        "the subject brought up the object in conversation",
        "Marcus mentioned the Rotterdam depot lease in passing.",
        PERSON, (), "", (), 0.3, 0.6, exclude_from_prompt=True, lifecycle="episodic",
        default_validity_days=30,
    ),
    _P(
        "cc_ed", "communication", "relation",
        "the subject copied the object person on a message",
        "Dana cc'ed Priya on the vendor email.",
        PERSON, PERSON, "", (), 0.2, 0.5, exclude_from_prompt=True, lifecycle="episodic",
        default_validity_days=30,
    ),
    _P(
        "responded_to", "communication", "relation",
        "the subject replied to the object message, request or person",
        "Marcus responded to the customer's complaint within an hour.",
        PERSON, (), "", (), 0.4, 0.7, exclude_from_prompt=True, lifecycle="episodic",
        default_validity_days=30,
    ),
    _P(
        "interaction_count", "communication", "attribute",
        "how many interactions the subject has had; writers supply the new total",
        "Dana and Marcus have exchanged 42 messages this quarter.",
        (), (), "", (), 0.5, 1.0, is_aggregate=True, exclude_from_prompt=True,
    ),
)

_OBSERVATION: tuple[StandardPredicate, ...] = (
    _P(
        "observed_topic", "observation", "relation",
        "the subject was seen discussing or working on the object topic",
        "Priya keeps coming back to data retention rules.",
        PERSON, ("topic",), "", (), 0.5, 0.8, lifecycle="episodic", default_validity_days=60,
    ),
    _P(
        "expressed_concern", "observation", "relation",
        "the subject voiced worry or doubt about the object",
        "Marcus expressed concern about the Q3 hiring freeze.",
        PERSON, (), "", (), 0.8, 1.1, lifecycle="ephemeral", default_validity_days=90,
    ),
    _P(
        "expressed_interest", "observation", "relation",
        "the subject showed interest in or enthusiasm for the object",
        "Dana expressed interest in the machine-learning course.",
        PERSON, (), "", (), 0.7, 1.0, lifecycle="ephemeral", default_validity_days=90,
    ),
    _P(
        "acknowledged", "observation", "relation",
        "the subject confirmed receipt or awareness of the object",
        "Priya acknowledged the security audit findings.",
        PERSON, (), "", (), 0.4, 0.7, exclude_from_prompt=True, lifecycle="episodic",
        default_validity_days=30,
    ),
    _P(
        "noted", "observation", "relation",
        "the subject remarked on or wrote down the object",
        "Dana noted that the invoices arrive late every month.",
        PERSON, (), "", (), 0.3, 0.6, exclude_from_prompt=True, lifecycle="episodic",
        default_validity_days=30,
    ),
)

_EVENT: tuple[StandardPredicate, ...] = (
    _P(
        "attended", "event", "relation",
        "the subject took part in the object event",
        "Dana attended the Logistics Summit in Hamburg.",
        PERSON, ("event",), "attended_by", (), 0.5, 0.9,
        lifecycle="episodic", default_validity_days=90,
    ),
    _P(
        "hosted", "event", "relation",
        "the subject organised or ran the object event",
        "Priya hosted the customer round-table in May.",
        PERSON, ("event",), "hosted_by", (), 0.7, 1.0,
        lifecycle="episodic", default_validity_days=90,
    ),
)

_PRIORITY: tuple[StandardPredicate, ...] = (
    _P(
        "tracks_priority", "priority", "relation",
        "the subject is responsible for following the object priority",
        "Marcus tracks the on-time delivery priority for the quarter.",
        PERSON, ("topic",), "tracked_by", (), 0.9, 1.4,
    ),
    _P(
        "priority_affects", "priority", "relation",
        "the subject priority has an effect on the object",
        "The cost-cutting priority affects the depot expansion project.",
        ("topic",), (), "affected_by_priority", (), 0.8, 1.2,
    ),
)

_DOCUMENT: tuple[StandardPredicate, ...] = (
    _P(
        "profile", "document", "narrative",
        "a current summary of who or what the subject is; the entity's profile",
        "Dana Reyes is a senior analyst at Northwind who leads route planning.",
        default_importance=1.0, ranking_weight=1.0,
    ),
    _P(
        "biography", "document", "narrative",
        "a longer account of the subject person's life and career",
        "Dana studied applied mathematics in Leiden before joining Northwind in 2017.",
        PERSON, default_importance=0.8, ranking_weight=1.0,
    ),
    _P(
        "memo", "document", "narrative",
        "a short internal note about the subject",
        "Memo: Fastlane contracts renew automatically unless cancelled by June.",
        default_importance=0.6, ranking_weight=1.0,
    ),
    _P(
        "meeting_notes", "document", "narrative",
        "notes taken during a meeting concerning the subject",
        "Notes: agreed to pilot the planner in two depots; Dana to report back.",
        default_importance=0.7, ranking_weight=1.0,
    ),
    _P(
        "research_note", "document", "narrative",
        "findings from research about the subject",
        "Research: competitors quote 48-hour delivery as standard in the region.",
        default_importance=0.6, ranking_weight=1.0,
    ),
    _P(
        "has_document", "document", "relation",
        "the subject has an attached or related document",
        "The Fastlane acquisition has the signed term sheet attached.",
        # The object is a stored document, not an entity type: no hint.
        (), (), "document_of", ("has_doc", "attached_document"), 0.7, 1.0,
        exclude_from_prompt=True,
    ),
)

_SOCIAL: tuple[StandardPredicate, ...] = (
    _P(
        "knows", "social", "relation",
        "the subject is personally acquainted with the object person",
        "Priya knows the Parcelpoint CEO from university.",
        PERSON, PERSON, "", (), 0.5, 0.8,
    ),
    _P(
        "works_with", "social", "relation",
        "the subject collaborates with the object person on shared work",
        "Dana works with Priya on the data platform.",
        PERSON, PERSON, "", (), 0.6, 0.9,
    ),
    _P(
        "colleague_of", "social", "relation",
        "the subject and the object person work in the same organisation",
        "Marcus is a colleague of Dana at Northwind.",
        PERSON, PERSON, "", (), 0.5, 0.8,
    ),
)

# fmt: on


def _c(ctype: str, status: str = "suggestion", **parameters: object) -> dict[str, object]:
    return {"type": ctype, "status": status, **parameters, "exceptions": []}


# Rules the library's meaning implies. Only what the description states is mandatory (a
# person works at an organisation); type hints that extraction bends on purpose (an agent
# knows a person, a team works at a company) are suggestions.
LIBRARY_CONSTRAINTS: dict[str, tuple[dict[str, object], ...]] = {
    "works_at": (
        _c("subject_type", types=["person", "agent"]),
        _c("value_type", "mandatory", types=["organisation"]),
    ),
    "reports_to": (_c("value_type", "mandatory", types=["person"]),),
    "manages": (_c("value_type", "mandatory", types=["person"]),),
    "current_title": (_c("single_value"), _c("subject_type", types=["person"])),
    "current_role": (_c("single_value"), _c("subject_type", types=["person"])),
    "subsidiary_of": (
        _c("subject_type", "mandatory", types=["organisation"]),
        _c("value_type", "mandatory", types=["organisation"]),
    ),
    "acquired": (_c("value_type", types=["organisation"]),),
    "merged_with": (_c("symmetric"), _c("value_type", types=["organisation"])),
    "interaction_count": (_c("range", "mandatory", min=0),),
    "works_with": (_c("symmetric"),),
    "colleague_of": (_c("symmetric"), _c("value_type", types=["person"])),
    "knows": (_c("value_type", types=["person", "agent"]),),
}


def _with_constraints(entry: StandardPredicate) -> StandardPredicate:
    rules = LIBRARY_CONSTRAINTS.get(entry.name, ())
    return replace(entry, constraints=rules) if rules else entry


STANDARD_PREDICATES: tuple[StandardPredicate, ...] = tuple(
    _with_constraints(p)
    for p in (
        *_IDENTITY,
        *_ORGANIZATIONAL,
        *_TASK,
        *_DECISION,
        *_COMMUNICATION,
        *_OBSERVATION,
        *_EVENT,
        *_PRIORITY,
        *_DOCUMENT,
        *_SOCIAL,
    )
)

CATEGORIES: tuple[str, ...] = tuple(dict.fromkeys(p.category for p in STANDARD_PREDICATES))
