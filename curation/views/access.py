"""What every dashboard screen shares: the caller's access to a context, rendering a page
or one of its partials, and turning refusals into clear 4xx pages (never a 500)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, wraps
from typing import Any, Concatenate, ParamSpec

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.utils.cache import patch_vary_headers
from django.utils.http import url_has_allowed_host_and_scheme
from django_htmx.middleware import HtmxDetails

from memory.domain.access import ContextAccess, context_access_resolve
from memory.infra.embeddings import embedder_loading
from memory.kernel.errors import DomainError, NotFound
from memory.kernel.wording import with_article
from memory.models import Role
from memory.selectors.contexts import context_list
from memory.selectors.review import pending_count

P = ParamSpec("P")


class HtmxHttpRequest(HttpRequest):
    """A request as HtmxMiddleware leaves it (for type checking)."""

    htmx: HtmxDetails


# HttpResponseBase: a view may also stream (StreamingHttpResponse is not an HttpResponse).
View = Callable[Concatenate[HtmxHttpRequest, P], HttpResponseBase]


def _get_context_for_user(
    request: HtmxHttpRequest, ctx: str, *, role: Role | None = None
) -> ContextAccess:
    """The user's access to context ``ctx``: Http404 when they may not see it at all,
    PermissionDenied when they may see it but lack ``role``."""
    try:
        access = context_access_resolve(user=request.user, slug=ctx)
    except NotFound:
        raise Http404(f"context {ctx[:100]!r} not found") from None
    if role is not None and not access.has_role(role):
        raise PermissionDenied(
            f"this needs the {role} role in {access.context.slug}; you are "
            f"{with_article(str(access.role))}"
        )
    return access


def dashboard_view(view: View[P]) -> View[P]:
    """Login required; refusals from the access helper or a service become a 4xx page,
    a dependency that is down a 503 page (or, for htmx, a message swapped into the
    page's flash area)."""

    @login_required
    @wraps(view)
    def wrapped(request: HtmxHttpRequest, *args: P.args, **kwargs: P.kwargs) -> HttpResponseBase:
        try:
            return view(request, *args, **kwargs)
        except Http404 as exc:
            return error_response(request, 404, str(exc) or "Not found.")
        except PermissionDenied as exc:
            return error_response(request, 403, str(exc) or "You may not do this.")
        except DomainError as exc:  # the engine's refusals, mapped once by their status
            return error_response(request, exc.status, exc.message)

    return wrapped  # type: ignore[return-value]


TITLES = {
    400: "Not valid",
    403: "Not allowed",
    404: "Not found",
    409: "Changed meanwhile",
    502: "Bad answer",
    503: "Unavailable",
}


def error_response(request: HtmxHttpRequest, status: int, message: str) -> HttpResponse:
    if request.htmx:
        response = render(
            request,
            "curation/error.html#message",
            {"status": status, "message": message, "title": TITLES.get(status, "Error")},
            status=status,
        )
        response["HX-Retarget"] = "#flash"
        response["HX-Reswap"] = "innerHTML"
        return response
    return render(
        request,
        "curation/error.html",
        {"status": status, "message": message, "title": TITLES.get(status, "Error")},
        status=status,
    )


def wants_partial(request: HtmxHttpRequest) -> bool:
    """An htmx swap wants a partial; a history restore or a boosted link wants the page."""
    htmx = request.htmx
    return bool(htmx) and not htmx.history_restore_request and not htmx.boosted


def render_screen(
    request: HtmxHttpRequest,
    template: str,
    access: ContextAccess,
    context: dict[str, Any],
    *,
    section: str,
    partial: str | None = None,
    status: int = 200,
) -> HttpResponse:
    """The whole page, or only ``template#partial`` when htmx asks for a swap."""
    name = f"{template}#{partial}" if partial and wants_partial(request) else template
    data = {
        "ctx": access.context,
        "access": access,
        "can_curate": access.has_role(Role.CURATOR),
        "can_administer": access.has_role(Role.ADMIN),
        "section": section,
        "embedder_loading": embedder_loading(),
        # Lazy: only the full page (its context switcher) runs this query.
        "contexts": context_list(user=request.user),
        # Lazy too: the navigation's count of facts waiting for review.
        "pending_review": cache(lambda: pending_count(access=access)),
        **context,
    }
    response = render(request, name, data, status=status)
    patch_vary_headers(response, ("HX-Request",))
    return response


def form_problems(form: Any) -> list[str]:
    """A form's error messages as plain text, field errors and non-field errors alike."""
    return [str(error) for errors in form.errors.values() for error in errors]


def next_url(request: HtmxHttpRequest, default: str) -> str:
    """Where a POST returns to: the form's ``next`` if it stays on this site."""
    target = request.POST.get("next") or ""
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return default


def audit_mark(access: ContextAccess) -> int:
    """The newest audit event id of the context now: ``undo_tag`` finds what came after."""
    from memory.models import AuditEvent

    return (
        AuditEvent.objects.filter(context=access.context)
        .order_by("-pk")
        .values_list("pk", flat=True)
        .first()
        or 0
    )


def undo_tag(access: ContextAccess, since: int) -> str:
    """The flash message tag (``undo:<id>``) of the undoable change this user just made
    (the newest event after ``since``), or "" when the change recorded none: every
    message of an undoable action then offers its Undo."""
    from memory.models import AuditEvent

    events = AuditEvent.objects.filter(
        context=access.context, pk__gt=since, undo__isnull=False, undone_at__isnull=True
    )
    if getattr(access.user, "is_authenticated", False):
        events = events.filter(actor=access.user)
    newest = events.order_by("-pk").values_list("pk", flat=True).first()
    return f"undo:{newest}" if newest else ""


# htmx stops polling when the answer has this status (and still swaps it in).
STOP_POLLING = 286


def polled(request: HtmxHttpRequest, response: HttpResponse, *, finished: bool) -> HttpResponse:
    """A page htmx polls while a job runs: once the job is finished, its answer to a poll
    tells htmx to stop."""
    if finished and wants_partial(request):
        response.status_code = STOP_POLLING
    return response
