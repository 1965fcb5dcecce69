"""The drift item a resolution works on: its observed predicate, locked. (The subjects of
the facts a resolution moves or retracts are locked as every fact writer locks them,
``entities_lock``.)

Two curators resolving the same item race on the context lock (``registry_lock``, taken
first by every resolution); the second finds the predicate no longer observed and gets a
409.
"""

from __future__ import annotations

from memory.domain.access import ContextAccess
from memory.domain.predicate_names import predicate_normalize
from memory.kernel.errors import Conflict
from memory.models import Predicate, PredicateStatus


def drift_observed_lock(access: ContextAccess, name: str) -> Predicate:
    """The observed predicate ``name`` (normalized), row-locked; 409 when it is not open
    drift (resolved meanwhile, or never seen)."""
    canonical = predicate_normalize(name)
    predicate = (
        Predicate.objects.select_for_update().filter(context=access.context, name=canonical).first()
    )
    if predicate is None or predicate.status != PredicateStatus.OBSERVED:
        state = "not found" if predicate is None else f"already {predicate.status}"
        raise Conflict(
            f"{canonical!r} is not open drift ({state}); it may just have been resolved",
            code="drift_not_open",
        )
    return predicate
