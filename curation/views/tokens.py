"""API tokens (admins): the context's tokens, creating one (shown once) and revoking."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from curation.forms.tokens import ReconcileKeyForm, TokenCreateForm
from curation.views.access import (
    HtmxHttpRequest,
    _get_context_for_user,
    dashboard_view,
    render_screen,
)
from memory.domain.access import ContextAccess
from memory.kernel.errors import ValidationFailed
from memory.models import Role
from memory.selectors.tokens import token_list, token_members
from memory.services.tokens import reconcile_key_create, token_create, token_revoke


def _members(access: ContextAccess) -> list[tuple[int, str]]:
    return [
        (m.user_id, f"{m.user.get_username()} ({m.role})") for m in token_members(access=access)
    ]


def _page(
    request: HtmxHttpRequest,
    access: ContextAccess,
    *,
    form: TokenCreateForm | None = None,
    key_form: ReconcileKeyForm | None = None,
    raw: str = "",
    reconcile_url: str = "",
    status: int = 200,
) -> HttpResponse:
    """Queries: the tokens with their users; the members for the form."""
    return render_screen(
        request,
        "curation/tokens.html",
        access,
        {
            "tokens": list(token_list(access=access)),
            "form": form or TokenCreateForm(members=_members(access)),
            "raw": raw,
            "key_form": key_form or ReconcileKeyForm(prefix="key"),
            "reconcile_url": reconcile_url,
            "service_url": request.build_absolute_uri(
                reverse("api-reconcile", kwargs={"ctx": access.context.slug})
            ),
        },
        section="tokens",
        status=status,
    )


@require_safe
@dashboard_view
def tokens(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    return _page(request, _get_context_for_user(request, ctx, role=Role.ADMIN))


@require_POST
@dashboard_view
def token_create_view(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    """The raw token is in this response only (not a redirect: nothing keeps it)."""
    access = _get_context_for_user(request, ctx, role=Role.ADMIN)
    form = TokenCreateForm(request.POST, members=_members(access))
    if form.is_valid():
        data = form.cleaned_data
        try:
            issued = token_create(
                access=access,
                user_id=data["user"],
                grants=data["grants"],
                name=data["name"],
                trust=data["trust"],
            )
        except ValidationFailed as exc:
            form.add_error("grants" if exc.code == "invalid_grants" else None, exc.message)
        else:
            fresh = TokenCreateForm(members=_members(access))
            response = _page(request, access, form=fresh, raw=issued.raw, status=201)
            response["Cache-Control"] = "no-store"  # the one copy of the secret
            return response
    return _page(request, access, form=form, status=400)


@require_POST
@dashboard_view
def reconcile_key_create_view(request: HtmxHttpRequest, ctx: str) -> HttpResponse:
    """The key's URL is in this response only, like a token."""
    access = _get_context_for_user(request, ctx, role=Role.ADMIN)
    form = ReconcileKeyForm(request.POST, prefix="key")
    if form.is_valid():
        data = form.cleaned_data
        try:
            issued = reconcile_key_create(access=access, scope=data["scope"], name=data["name"])
        except ValidationFailed as exc:
            form.add_error("scope" if exc.code == "invalid_grants" else None, exc.message)
        else:
            url = request.build_absolute_uri(
                reverse("api-reconcile-key", kwargs={"ctx": access.context.slug, "key": issued.raw})
            )
            response = _page(request, access, reconcile_url=url, status=201)
            response["Cache-Control"] = "no-store"
            return response
    return _page(request, access, key_form=form, status=400)


@require_POST
@dashboard_view
def token_revoke_view(request: HtmxHttpRequest, ctx: str, token_id: int) -> HttpResponse:
    access = _get_context_for_user(request, ctx, role=Role.ADMIN)
    token = token_revoke(access=access, token_id=token_id)
    messages.success(
        request,
        f"Revoked token {token.prefix}… of {token.user.get_username()}: it no longer works.",
    )
    return redirect("tokens", access.context.slug)
