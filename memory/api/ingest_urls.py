"""Routes under /api/v1/contexts/<ctx>/ for memories, runs and vocabulary."""

from __future__ import annotations

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
