"""The landing page: the contexts this user may open."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from memory.selectors.contexts import context_list


@require_safe
@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The contexts this user may open (memberships; every context for a superuser)."""
    contexts = context_list(user=request.user)
    return render(request, "curation/home.html", {"contexts": contexts})
