"""Contexts and people (staff): create a context, add people to one, change their roles,
remove them. The same services as ``manage.py createcontext`` and ``adduser``."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST, require_safe

from memory.kernel.errors import DomainError
from memory.models import Context, ContextMembership, Role
from memory.services.contexts import context_create
from memory.services.people import (
    can_log_in,
    membership_remove,
    membership_set,
    person_create,
)


def _staff(request: HttpRequest) -> None:
    if not request.user.is_staff:
        raise PermissionDenied("Contexts and people is for staff")


@require_safe
@login_required
def people(request: HttpRequest) -> HttpResponse:
    """Queries: the contexts with their memberships and users (one prefetch)."""
    _staff(request)
    memberships = ContextMembership.objects.select_related("user").order_by("user__username")
    contexts = Context.objects.order_by("slug").prefetch_related(
        Prefetch("members", queryset=memberships, to_attr="people")
    )
    rows = [
        (context, [(m, can_log_in(m.user)) for m in context.people])  # type: ignore[attr-defined]
        for context in contexts
    ]
    return render(request, "curation/people.html", {"rows": rows, "roles": Role.choices})


@require_POST
@login_required
def people_context_create(request: HttpRequest) -> HttpResponse:
    _staff(request)
    slug = request.POST.get("slug", "").strip()
    try:
        # Its creator is its first admin: a context nobody may open would answer its own
        # creator "context not found".
        context = context_create(
            slug=slug, name=request.POST.get("name", "").strip(), owner=request.user
        )
    except DomainError as exc:
        messages.error(request, f"Context not created: {_message(exc)}")
    else:
        messages.success(request, f"Created context {context.slug}; you are its admin.")
    return redirect("people")


@require_POST
@login_required
def people_member_add(request: HttpRequest, ctx: str) -> HttpResponse:
    """An existing user gets the role; a new name becomes a login with a generated
    password (shown once) or, when asked, an agent for tokens."""
    _staff(request)
    context = get_object_or_404(Context, slug=ctx)
    username = request.POST.get("username", "").strip()
    role = request.POST.get("role", "")
    user = get_user_model().objects.filter(username=username).first()
    created = None
    try:
        with transaction.atomic():  # a new person and their role, or neither
            if user is None:
                created = person_create(
                    username=username, agent=request.POST.get("kind") == "agent"
                )
                user = created.user
            membership_set(context=context, user=user, role=role, actor=request.user)
    except DomainError as exc:
        messages.error(request, f"Not added: {_message(exc)}")
        return redirect("people")
    if created is not None and created.password:
        messages.success(
            request,
            f"Added {username} as {role} in {context.slug}. Their password, shown this once: "
            f"{created.password}",
        )
    else:
        messages.success(request, f"{username} is {role} in {context.slug}.")
    return redirect("people")


@require_POST
@login_required
def people_member_role(request: HttpRequest, ctx: str, user_id: int) -> HttpResponse:
    _staff(request)
    context, user = _member(ctx, user_id)
    try:
        membership_set(
            context=context, user=user, role=request.POST.get("role", ""), actor=request.user
        )
    except DomainError as exc:
        messages.error(request, f"Role not changed: {_message(exc)}")
    else:
        messages.success(request, f"{user.get_username()} is now {request.POST['role']} in {ctx}.")
    return redirect("people")


@require_POST
@login_required
def people_member_remove(request: HttpRequest, ctx: str, user_id: int) -> HttpResponse:
    _staff(request)
    context, user = _member(ctx, user_id)
    try:
        membership_remove(context=context, user=user, actor=request.user)
    except DomainError as exc:
        messages.error(request, f"Not removed: {_message(exc)}")
    else:
        messages.success(request, f"Removed {user.get_username()} from {ctx}.")
    return redirect("people")


def _member(ctx: str, user_id: int) -> tuple[Context, Any]:
    context = get_object_or_404(Context, slug=ctx)
    return context, get_object_or_404(get_user_model(), pk=user_id)


def _message(exc: DomainError) -> str:
    if isinstance(exc.details, dict):
        return "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in exc.details.items())
    if isinstance(exc.details, list):
        return f"{exc.message}: {' '.join(map(str, exc.details))}"
    return exc.message
