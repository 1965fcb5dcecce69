"""Routes under /api/v1/contexts/<ctx>/ for documents, keywords and search."""

from __future__ import annotations

from django.urls import URLPattern, path

from memory.api import context_api, search_api

urlpatterns: list[URLPattern] = [
    path("documents", search_api.DocumentListApi.as_view(), name="api-documents"),
    path(
        "documents/<int:document_id>", search_api.DocumentDetailApi.as_view(), name="api-document"
    ),
    path(
        "documents/<int:document_id>/keywords",
        search_api.DocumentKeywordsApi.as_view(),
        name="api-document-keywords",
    ),
    path("keywords", search_api.KeywordListApi.as_view(), name="api-keywords"),
    # Before keywords/<text>: "search" is this route, not a keyword.
    path("keywords/search", search_api.KeywordSearchApi.as_view(), name="api-keywords-search"),
    path("keywords/<str:text>", search_api.KeywordDetailApi.as_view(), name="api-keyword"),
    path("search", search_api.SearchApi.as_view(), name="api-search"),
    path("context", context_api.MemoryBlockApi.as_view(), name="api-context-block"),
]
