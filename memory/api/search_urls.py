"""Routes under /api/v1/contexts/<ctx>/ for documents, keywords and search."""

from __future__ import annotations

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
