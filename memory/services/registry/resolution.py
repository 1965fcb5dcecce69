"""Which registry predicate a fact written with a given form is stored under, and the
drift records that writing unregistered forms leaves.

Recording drift (``predicate_observe``) does not take the registry lock that edits take
(predicates.py): it runs inside fact writes and relies on the unique (context, name)
constraint.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from memory.domain.predicate_names import predicate_check_text, predicate_normalize
from memory.domain.screening import secret_name, secret_refusal
from memory.infra.pg_arrays import int_array_literal
from memory.infra.pg_overlap import execute_overlapped
from memory.kernel.errors import DomainError, ValidationFailed
from memory.models import Context, Predicate, PredicateMode, PredicateStatus
from memory.selectors.predicates import (
    RegistryIndex,
    Via,
    predicate_alias_owner,
    predicate_canonicalize,
    registry_index_for_write,
)


class UnknownPredicate(ValidationFailed):
    """A strict-mode context refused a predicate that is not registered."""

    code = "unknown_predicate"

    def __init__(self, message: str, *, canonical: str) -> None:
        super().__init__(message, details={"canonical": canonical})
        self.canonical = canonical


@dataclass(frozen=True)
class ResolvedPredicate:
    predicate: Predicate
    canonical: str
    via: Via
    registered: bool
    # Written through an inverse alias: store with subject and object swapped.
    inverse: bool = False


def predicate_observe(*, context: Context, name: str) -> Predicate:
    """The registry row for the normalized form of ``name``, created as ``observed`` when
    new, with first/last seen stamped. Safe against concurrent writers (get_or_create
    retries the read after losing the insert race). A form that is an alias returns the
    aliased predicate rather than shadowing it; an existing row keeps its status."""
    predicate_check_text(name)
    form = predicate_normalize(name)
    aliased = predicate_alias_owner(context=context, form=form)
    if aliased is not None:
        return aliased
    now = timezone.now()
    predicate, created = Predicate.objects.get_or_create(
        context=context,
        name=form,
        defaults={
            "status": PredicateStatus.OBSERVED,
            "first_seen_at": now,
            "last_seen_at": now,
        },
    )
    if not created:
        predicate.first_seen_at = predicate.first_seen_at or now
        predicate.last_seen_at = now
        Predicate.objects.filter(pk=predicate.pk).update(
            first_seen_at=predicate.first_seen_at, last_seen_at=now
        )
    return predicate


def predicate_resolve_for_write(*, context: Context, raw: str) -> ResolvedPredicate:
    """The predicate a fact written with ``raw`` is stored under (one form of
    ``predicates_resolve_for_write``): raises what that function reports for the form."""
    resolved, _ = predicates_resolve_for_write(context=context, raws={raw})
    outcome = resolved[raw]
    if isinstance(outcome, DomainError):
        raise outcome
    return outcome


# No savepoint of its own (two round trips a batch): only a database error escapes, and
# it aborts the caller's transaction whole, as the fact batch's own block does.
@transaction.atomic(savepoint=False)
def predicates_resolve_for_write(
    *, context: Context, raws: set[str], index: RegistryIndex | None = None
) -> tuple[dict[str, ResolvedPredicate | DomainError], list[str]]:
    """The predicate facts written with each form in ``raws`` are stored under, each
    distinct form once from one registry load; and the forms a strict context refused.

    Per form, instead of a predicate: hostile text gives ValidationFailed
    "invalid_predicate"; a rejected predicate "rejected_predicate" in both modes; an
    unregistered form UnknownPredicate in a strict context (listed in the refused forms:
    the caller records them afterwards with predicate_record_refused, outside the
    transaction the refusal rolls back) and an observed predicate in a permissive one.
    Drift the registry already holds has its last-seen stamp written once for the call.

    ``index``: a registry load to reuse (an ingest run's, from its refusal check), read
    only; without it the registry is loaded here. Forms the call observes for the first
    time are created in the database, not in ``index``, so a retried transaction
    creates them again.
    """
    if index is None:
        index = registry_index_for_write(context=context)
    out: dict[str, ResolvedPredicate | DomainError] = {}
    refused: list[str] = []
    seen_drift: set[int] = set()
    for raw in sorted(raws):
        try:
            out[raw] = _resolve_form(context, raw, index, seen_drift)
        except UnknownPredicate as exc:
            out[raw] = exc
            refused.append(raw)
        except ValidationFailed as exc:
            out[raw] = exc
    if seen_drift:
        # One plain statement (the ORM's compilation of this update cost more than it).
        # Nothing reads its result: in an ingest's overlap window it runs on the server
        # while the run builds its facts, instead of waiting there for the statements
        # sent before it (decision 0112).
        now = timezone.now()
        execute_overlapped(
            f"UPDATE {Predicate._meta.db_table} SET last_seen_at = %s, "  # noqa: S608
            "first_seen_at = COALESCE(first_seen_at, %s) WHERE id = ANY(%s::bigint[])",
            [now, now, int_array_literal(sorted(seen_drift))],
        )
    return out, refused


def _resolve_form(
    context: Context, raw: str, index: RegistryIndex, seen_drift: set[int]
) -> ResolvedPredicate:
    result = predicate_canonicalize(context=context, name=raw, index=index)
    known = result.predicate
    if result.registered and known is not None:
        return ResolvedPredicate(known, result.canonical, result.via, True, result.inverse)
    if known is not None and known.status == PredicateStatus.REJECTED:
        raise _rejected(result.canonical)
    if context.predicate_mode == PredicateMode.STRICT:
        raise _unknown(context, raw, result.canonical)
    if known is not None and known.status == PredicateStatus.OBSERVED:
        seen_drift.add(known.pk)  # drift the registry holds: stamped once, in bulk
        return ResolvedPredicate(known, known.name, "none", False)
    predicate = predicate_observe(context=context, name=result.canonical)
    return ResolvedPredicate(predicate, result.canonical, "none", False)


def _unknown(context: Context, raw: str, canonical: str) -> UnknownPredicate:
    return UnknownPredicate(
        f"unknown predicate {raw[:80]!r} (as {canonical!r}): context "
        f"{context.slug!r} accepts only registered predicates and their aliases",
        canonical=canonical,
    )


def _rejected(canonical: str) -> ValidationFailed:
    return ValidationFailed(
        f"predicate {canonical!r} was rejected by a curator in this context",
        code="rejected_predicate",
        details={"canonical": canonical},
    )


def predicate_refusal_check(*, context: Context, index: RegistryIndex) -> Callable[[str], None]:
    """A check, from the registry load ``index``, that raises for a predicate form every
    write refuses whatever its entities are — hostile text (``invalid_predicate``), a
    predicate curators rejected (``rejected_predicate``), a name whose values are secrets
    (``secret_refused``: ``password``, ``api_key``) or, in a strict context, one that is
    not registered (``unknown_predicate``) — with the write's own error, so an ingest
    can refuse such an item before it resolves (and creates) its entities and before its
    form becomes drift (a strict refusal is recorded as drift by the caller, as ever)."""

    # A bulk turn states each form many times: each is canonicalized once, and a form
    # that refuses refuses every time with the error it raised first.
    verdicts: dict[str, ValidationFailed | None] = {}

    def check(raw: str) -> None:
        if raw not in verdicts:
            verdicts[raw] = _refusal(raw)
        refusal = verdicts[raw]
        if refusal is not None:
            raise refusal

    def _refusal(raw: str) -> ValidationFailed | None:
        try:
            result = predicate_canonicalize(context=context, name=raw, index=index)
        except ValidationFailed as exc:
            return exc
        if secret_name(raw) or secret_name(result.canonical):
            return secret_refusal(what=f"a value of {result.canonical!r}")
        if result.registered:
            return None
        known = result.predicate
        if known is not None and known.status == PredicateStatus.REJECTED:
            return _rejected(result.canonical)
        if context.predicate_mode == PredicateMode.STRICT:
            return _unknown(context, raw, result.canonical)
        return None

    return check


@transaction.atomic
def predicate_record_refused(*, context: Context, raw: str) -> None:
    """Record drift for a predicate a strict context refused. Hostile text and forms that
    have become registered meanwhile record nothing."""
    try:
        result = predicate_canonicalize(context=context, name=raw)
    except ValidationFailed:
        return
    if not result.registered:
        predicate_observe(context=context, name=result.canonical)
