from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from memory.domain.access import ContextAccess
from memory.kernel.errors import Conflict, ValidationFailed
from memory.models import Context, ContextMembership, Role
from memory.services.audit import audit_record
from memory.services.registry.predicates import registry_install_standard


@transaction.atomic
def context_create(
    *, slug: str, name: str = "", description: str = "", owner: Any = None, **settings: Any
) -> Context:
    """Create a context with its registry seeded from the standard predicate library.

    ``owner`` (a user) becomes its first admin.
    """
    if Context.objects.filter(slug=slug).exists():
        raise Conflict(f"context {slug!r} already exists", code="context_exists")
    context = Context(slug=slug, name=name or slug, description=description, **settings)
    _validate(context)
    context.save()
    registry_install_standard(context=context)
    if owner is not None:
        ContextMembership.objects.create(
            user=owner, context=context, role=Role.ADMIN, grants=["read,write:*"]
        )
    return context


@transaction.atomic
def context_update(*, access: ContextAccess, **fields: Any) -> Context:
    access.require_role(Role.ADMIN)
    context = Context.objects.select_for_update().get(pk=access.context.pk)
    # A setting sent with the value it has is no change: nothing saved, nothing audited.
    fields = {name: value for name, value in fields.items() if getattr(context, name) != value}
    if not fields:
        return context
    before = {name: getattr(context, name) for name in fields}
    for name, value in fields.items():
        setattr(context, name, value)
    _validate(context)
    context.save()
    audit_record(
        context=context,
        actor=access.user,
        action="context_update",
        target_type="context",
        target_id=context.slug,
        summary="changed settings: "
        + "; ".join(
            f"{name} {_setting_shown(before[name])} → {_setting_shown(fields[name])}"
            for name in sorted(fields)
        ),
        before=before,
        after=fields,
        undo={"op": "context_restore", "restore": before},
    )
    return context


def _setting_shown(value: Any) -> str:
    """A setting's value as the audit log says it: a switch on or off, text cut short."""
    if isinstance(value, bool):
        return "on" if value else "off"
    text = str(value)
    return text if len(text) <= 60 else text[:59] + "…"


def _validate(context: Context) -> None:
    if context.review_threshold > context.auto_merge_threshold:
        raise ValidationFailed(
            "review_threshold must not be above auto_merge_threshold", code="invalid_thresholds"
        )
    try:
        context.full_clean(validate_unique=False)
    except ValidationError as exc:
        raise ValidationFailed("invalid context settings", details=exc.message_dict) from exc
