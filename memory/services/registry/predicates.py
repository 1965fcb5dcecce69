"""Writes to the predicate registry: install the standard library, register, edit,
unregister, aliases, and the undo of those edits.

Registry edits lock the context row (``registry_lock``) so that two editors cannot both
pass the name/alias collision checks. What a fact write resolves a form to, and the drift
it records, is predicate_resolution.py; the fields and their validation are
predicate_fields.py.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from memory.domain.access import ContextAccess
from memory.domain.constraints import constraints_clean
from memory.domain.predicate_library import STANDARD_PREDICATES, StandardPredicate
from memory.domain.predicate_names import predicate_check_text, predicate_normalize
from memory.kernel.errors import Conflict, NotFound, ValidationFailed
from memory.kernel.wording import with_article
from memory.models import (
    Context,
    Fact,
    Predicate,
    PredicateAlias,
    PredicateKind,
    PredicateStatus,
    Role,
)
from memory.models.predicate import EDITABLE_FIELDS
from memory.selectors.predicates import predicate_alias_owner, registry_index_load
from memory.services.audit import audit_record
from memory.services.registry.constraint_checks import constraints_check_stored
from memory.services.registry.fields import (
    predicate_aliases_clean,
    predicate_fields_clean,
    predicate_flags_check,
)

# --- the standard library -------------------------------------------------------------


@transaction.atomic
def registry_install_standard(*, context: Context) -> int:
    """Add the standard library's missing predicates and aliases; return how many
    predicates were created. Idempotent; never changes a row that already exists (a
    curator's edits and drift records win)."""
    registry_lock(context)
    index = registry_index_load(context=context)
    taken = set(index.by_name) | set(index.alias_to_name)
    new = [_from_library(context, entry) for entry in STANDARD_PREDICATES]
    created = Predicate.objects.bulk_create([p for p in new if p.name not in taken])
    taken |= {p.name for p in created}
    by_name = {p.name: p for p in created} | {
        n: p for n, p in index.by_name.items() if p.status == PredicateStatus.REGISTERED
    }
    aliases = []
    for entry in STANDARD_PREDICATES:
        for raw in entry.aliases:
            alias = predicate_normalize(raw)
            if alias not in taken and entry.name in by_name:
                taken.add(alias)
                aliases.append(
                    PredicateAlias(context=context, predicate=by_name[entry.name], alias=alias)
                )
    # The library's inverse names start as inverse aliases (``employs`` of ``works_at``),
    # unless the name is registered itself (``manages`` / ``reports_to``) or taken.
    for entry in STANDARD_PREDICATES:
        inverse = predicate_normalize(entry.inverse) if entry.inverse else ""
        if inverse and inverse != entry.name and inverse not in taken and entry.name in by_name:
            taken.add(inverse)
            aliases.append(
                PredicateAlias(
                    context=context, predicate=by_name[entry.name], alias=inverse, inverse=True
                )
            )
    PredicateAlias.objects.bulk_create(aliases)
    return len(created)


def _from_library(context: Context, entry: StandardPredicate) -> Predicate:
    values = {field: getattr(entry, field) for field in EDITABLE_FIELDS}
    values["subject_types"] = list(entry.subject_types)
    values["object_types"] = list(entry.object_types)
    values["constraints"] = constraints_clean(list(entry.constraints))
    return Predicate(context=context, name=entry.name, status=PredicateStatus.REGISTERED, **values)


# --- registry edits -------------------------------------------------------------------


@transaction.atomic
def predicate_register(
    *, access: ContextAccess, name: str, aliases: list[str] | None = None, **fields: Any
) -> Predicate:
    """Register ``name`` (canonicalized to snake_case) with ``fields`` from EDITABLE_FIELDS.

    A name the registry holds as observed or rejected is promoted to registered, keeping
    its facts; that is the drift "promote" action, so a curator may do it. A new name
    needs an admin. Refused: a name or alias that is already another predicate's name or
    alias (Conflict "predicate_collision"), single_valued with is_aggregate
    (ValidationFailed "invalid_flags"), and malformed fields.
    """
    predicate_check_text(name)
    canonical = predicate_normalize(name)
    cleaned = predicate_fields_clean(fields)
    alias_forms = predicate_aliases_clean(aliases or [], name=canonical)
    context = registry_lock(access.context)
    existing = Predicate.objects.filter(context=context, name=canonical).first()
    access.require_role(Role.ADMIN if existing is None else Role.CURATOR)
    if existing is not None and existing.status == PredicateStatus.REGISTERED:
        raise Conflict(f"predicate {canonical!r} is already registered", code="predicate_collision")
    owner = predicate_alias_owner(context=context, form=canonical)
    if owner is not None:
        raise Conflict(
            f"{canonical!r} is already an alias of {owner.name!r}", code="predicate_collision"
        )
    before = _snapshot(existing) if existing is not None else None
    predicate = existing or Predicate(context=context, name=canonical)
    for field, value in cleaned.items():
        setattr(predicate, field, value)
    predicate_flags_check(predicate)
    if predicate.constraints:
        constraints_check_stored(predicate=predicate)
    predicate.status = PredicateStatus.REGISTERED
    try:
        # Drift recording does not take the context lock, so a fact write may insert the
        # same name between our check and this save.
        with transaction.atomic():
            predicate.save()
    except IntegrityError:
        raise Conflict(
            f"predicate {canonical!r} was just recorded by a concurrent write; try again",
            code="predicate_collision",
        ) from None
    for alias in alias_forms:
        predicate_alias_attach(context, predicate, alias)
    after = _snapshot(predicate)
    audit_record(
        context=context,
        actor=access.user,
        action="predicate_register",
        target_type="predicate",
        target_id=canonical,
        summary=(
            f"registered predicate {canonical}"
            if before is None
            else f"registered predicate {canonical} (it was {before['status']})"
        ),
        before=before,
        after=after,
        undo=(
            {"op": "predicate_unregister", "name": canonical}
            if before is None
            else {"op": "predicate_restore", "name": canonical, "state": before}
        ),
    )
    return predicate


@transaction.atomic
def predicate_update(*, access: ContextAccess, predicate: Predicate, **fields: Any) -> Predicate:
    """Change some of EDITABLE_FIELDS of a predicate (admin). The name and status are not
    editable here: use register/unregister, and the alias functions for aliases."""
    access.require_role(Role.ADMIN)
    cleaned = predicate_fields_clean(fields)
    context = registry_lock(access.context)
    current = _locked_predicate(context, predicate)
    before = _snapshot(current)
    for field, value in cleaned.items():
        setattr(current, field, value)
    predicate_flags_check(current)
    if "constraints" in cleaned or "kind" in cleaned:
        constraints_check_stored(predicate=current)
    current.save()
    after = _snapshot(current)
    changed = sorted(f for f in cleaned if before[f] != after[f])
    audit_record(
        context=context,
        actor=access.user,
        action="predicate_update",
        target_type="predicate",
        target_id=current.name,
        summary=f"edited predicate {current.name}: {', '.join(changed) or 'no change'}",
        before={f: before[f] for f in changed},
        after={f: after[f] for f in changed},
        undo={
            "op": "predicate_update",
            "name": current.name,
            "fields": {f: before[f] for f in changed},
        },
    )
    return current


@transaction.atomic
def predicate_unregister(*, access: ContextAccess, predicate: Predicate) -> None:
    """Remove a predicate from the registry (admin).

    Without facts it is deleted. With facts it becomes ``observed`` (drift) so its facts
    stay; its aliases are removed either way, since an alias only routes forms onto a
    registered predicate. The audit event keeps the full prior state for undo.
    """
    access.require_role(Role.ADMIN)
    context = registry_lock(access.context)
    current = _locked_predicate(context, predicate)
    before = _snapshot(current)
    if Fact.objects.filter(predicate=current).exists():
        current.alias_set.all().delete()
        current.status = PredicateStatus.OBSERVED
        current.save(update_fields=["status", "updated_at"])
        after: dict[str, Any] | None = _snapshot(current)
        summary = f"unregistered predicate {current.name}; its facts keep it as drift"
    else:
        current.delete()
        after = None
        summary = f"deleted predicate {before['name']}"
    audit_record(
        context=context,
        actor=access.user,
        action="predicate_unregister",
        target_type="predicate",
        target_id=before["name"],
        summary=summary,
        before=before,
        after=after,
        undo={"op": "predicate_restore", "name": before["name"], "state": before},
    )


@transaction.atomic
def predicate_alias_add(
    *, access: ContextAccess, predicate: Predicate, alias: str
) -> PredicateAlias:
    """Make ``alias`` (normalized) another form of a registered ``predicate`` (curator).

    Refused with Conflict "predicate_collision" when the form is another predicate's name
    or alias, and "predicate_exists_as_observed" when it is drift with its own facts (that
    goes through drift resolution, which rewrites those facts). Adding an alias the
    predicate already has returns it unchanged.
    """
    access.require_role(Role.CURATOR)
    predicate_check_text(alias)
    form = predicate_normalize(alias)
    context = registry_lock(access.context)
    current = _locked_predicate(context, predicate)
    if current.status != PredicateStatus.REGISTERED:
        raise ValidationFailed(
            f"{current.name!r} is {current.status}, not registered: aliases point at "
            "registered predicates",
            code="predicate_not_registered",
        )
    existing = PredicateAlias.objects.filter(context=context, alias=form).first()
    if existing is not None and existing.predicate_id == current.pk:
        return existing
    created = predicate_alias_attach(context, current, form)
    audit_record(
        context=context,
        actor=access.user,
        action="predicate_alias_add",
        target_type="predicate",
        target_id=current.name,
        summary=f"added alias {form} to predicate {current.name}",
        after={"alias": form, "predicate": current.name},
        undo={"op": "predicate_alias_remove", "name": current.name, "alias": form},
    )
    return created


def predicate_alias_attach(
    context: Context, predicate: Predicate, form: str, *, inverse: bool = False
) -> PredicateAlias:
    """Create the alias row after the namespace checks; the caller holds the context lock."""
    named = Predicate.objects.filter(context=context, name=form).first()
    if named is not None and named.pk != predicate.pk:
        if named.status == PredicateStatus.OBSERVED:
            raise Conflict(
                f"{form!r} exists as an observed predicate (drift); resolve it from the drift "
                f"page as an alias of {predicate.name!r} so its facts move too",
                code="predicate_exists_as_observed",
            )
        raise Conflict(
            f"alias {form!r} collides with the {named.status} predicate {form!r}",
            code="predicate_collision",
        )
    if named is not None:
        raise Conflict(
            f"{form!r} is the name of {predicate.name!r} itself", code="predicate_collision"
        )
    owner = predicate_alias_owner(context=context, form=form)
    if owner is not None:
        raise Conflict(
            f"alias {form!r} collides with an alias of {owner.name!r}", code="predicate_collision"
        )
    if inverse and predicate.kind != PredicateKind.RELATION:
        raise ValidationFailed(
            f"{predicate.name!r} is {with_article(predicate.kind)}: only a relation can be read "
            "backwards",
            code="inverse_not_relation",
        )
    return PredicateAlias.objects.create(
        context=context, predicate=predicate, alias=form, inverse=inverse
    )


@transaction.atomic
def predicate_alias_remove(*, access: ContextAccess, predicate: Predicate, alias: str) -> None:
    """Remove one alias (curator); later writes of that form become drift again."""
    access.require_role(Role.CURATOR)
    context = registry_lock(access.context)
    form = predicate_normalize(alias)
    deleted, _ = PredicateAlias.objects.filter(
        context=context, predicate=predicate, alias=form
    ).delete()
    if not deleted:
        raise NotFound(f"{predicate.name!r} has no alias {form!r}", code="alias_not_found")
    audit_record(
        context=context,
        actor=access.user,
        action="predicate_alias_remove",
        target_type="predicate",
        target_id=predicate.name,
        summary=f"removed alias {form} of {predicate.name}",
        before={"alias": form},
        undo={"op": "predicate_alias_add", "name": predicate.name, "alias": form},
    )


@transaction.atomic
def predicate_restore(*, access: ContextAccess, state: dict[str, Any]) -> Predicate:
    """Put a predicate back exactly as a snapshot (``_snapshot``) recorded it (undo)."""
    access.require_role(Role.ADMIN)
    context = registry_lock(access.context)
    fields = {f: state[f] for f in EDITABLE_FIELDS if f in state}
    predicate, _ = Predicate.objects.update_or_create(
        context=context, name=state["name"], defaults={**fields, "status": state["status"]}
    )
    wanted = {a: False for a in state.get("aliases", [])} | {
        a: True for a in state.get("inverse_aliases", [])
    }
    present = dict(predicate.alias_set.values_list("alias", "inverse"))
    predicate.alias_set.exclude(alias__in=list(wanted)).delete()
    for alias, inverse in wanted.items():
        if alias in present and present[alias] != inverse:
            predicate.alias_set.filter(alias=alias).update(inverse=inverse)
        elif alias not in present:
            predicate_alias_attach(context, predicate, alias, inverse=inverse)
    audit_record(
        context=context,
        actor=access.user,
        action="predicate_restore",
        target_type="predicate",
        target_id=predicate.name,
        summary=f"restored predicate {predicate.name} ({predicate.status})",
        after=_snapshot(predicate),
    )
    return predicate


# --- helpers --------------------------------------------------------------------------


def registry_lock(context: Context) -> Context:
    """Serialize registry edits of one context: collision checks read, then write."""
    return Context.objects.select_for_update().get(pk=context.pk)


def _locked_predicate(context: Context, predicate: Predicate) -> Predicate:
    try:
        return Predicate.objects.select_for_update().get(pk=predicate.pk, context=context)
    except Predicate.DoesNotExist:
        raise NotFound(
            f"no predicate {predicate.name!r} in context {context.slug!r}", code="not_found"
        ) from None


def _snapshot(predicate: Predicate) -> dict[str, Any]:
    """Everything needed to restore a predicate exactly (JSON-serializable)."""
    state: dict[str, Any] = {f: getattr(predicate, f) for f in EDITABLE_FIELDS}
    state["name"] = predicate.name
    state["status"] = predicate.status
    rows = list(predicate.alias_set.values_list("alias", "inverse")) if predicate.pk else []
    state["aliases"] = sorted(alias for alias, inverse in rows if not inverse)
    state["inverse_aliases"] = sorted(alias for alias, inverse in rows if inverse)
    return state
