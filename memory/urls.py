from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from memory.api import (
    constraints_api,
    contexts,
    curation_api,
    entities,
    fact_actions_api,
    facts,
    health,
    items_api,
    memory_api,
    merges_api,
    predicates,
)
from memory.api.metrics import metrics_view
from memory.api.reconcile import extend as reconcile_extend
from memory.api.reconcile import match as reconcile_match
from memory.api.reconcile import suggest as reconcile_suggest
from memory.mcp.view import McpEndpoint
from memory.web.errors import json_error_view

ctx = "api/v1/contexts/<str:ctx>"

curation_patterns = [
    path(f"{ctx}/drift", curation_api.DriftListApi.as_view(), name="api-drift"),
    path(
        f"{ctx}/drift/<str:name>/resolve",
        curation_api.DriftResolveApi.as_view(),
        name="api-drift-resolve",
    ),
    path(f"{ctx}/conflicts", curation_api.ConflictListApi.as_view(), name="api-conflicts"),
    path(
        f"{ctx}/conflicts/<int:conflict_id>/resolve",
        curation_api.ConflictResolveApi.as_view(),
        name="api-conflict-resolve",
    ),
    path(f"{ctx}/duplicates", merges_api.DuplicateListApi.as_view(), name="api-duplicates"),
    path(
        f"{ctx}/duplicates/dismiss",
        merges_api.DuplicateDismissApi.as_view(),
        name="api-duplicates-dismiss",
    ),
    path(f"{ctx}/entities/merge", merges_api.EntityMergeApi.as_view(), name="api-entities-merge"),
    path(
        f"{ctx}/merges/<int:merge_id>/undo",
        merges_api.MergeUndoApi.as_view(),
        name="api-merge-undo",
    ),
    path(f"{ctx}/fsck", merges_api.FsckApi.as_view(), name="api-fsck"),
    path(f"{ctx}/audit", curation_api.AuditListApi.as_view(), name="api-audit"),
    path(
        f"{ctx}/audit/<int:event_id>/undo",
        curation_api.AuditUndoApi.as_view(),
        name="api-audit-undo",
    ),
]

api_patterns = [
    path("api/v1/health", health.HealthApi.as_view(), name="api-health"),
    path("api/v1/contexts", contexts.ContextListApi.as_view(), name="api-contexts"),
    path(f"{ctx}", contexts.ContextDetailApi.as_view(), name="api-context"),
    path(f"{ctx}/entities", entities.EntityListApi.as_view(), name="api-entities"),
    path(f"{ctx}/entities/bulk", entities.EntityBulkApi.as_view(), name="api-entities-bulk"),
    path(f"{ctx}/entities/<int:entity_id>", entities.EntityDetailApi.as_view(), name="api-entity"),
    path(
        f"{ctx}/entities/<int:entity_id>/history",
        entities.EntityHistoryApi.as_view(),
        name="api-entity-history",
    ),
    path(f"{ctx}/export", memory_api.MemoryExportApi.as_view(), name="api-memory-export"),
    path(f"{ctx}/import", memory_api.MemoryImportApi.as_view(), name="api-memory-import"),
    path(
        f"{ctx}/import/<int:job_id>",
        memory_api.MemoryImportJobApi.as_view(),
        name="api-memory-import-job",
    ),
    path(f"{ctx}/items", items_api.ItemListApi.as_view(), name="api-items"),
    path(f"{ctx}/items/batch", items_api.ItemBatchApi.as_view(), name="api-items-batch"),
    path(f"{ctx}/items/item", items_api.ItemDetailApi.as_view(), name="api-item"),
    path(f"{ctx}/items/search", items_api.ItemSearchApi.as_view(), name="api-items-search"),
    path(
        f"{ctx}/items/namespaces",
        items_api.ItemNamespacesApi.as_view(),
        name="api-items-namespaces",
    ),
    path(f"{ctx}/facts", facts.FactListApi.as_view(), name="api-facts"),
    path(
        f"{ctx}/facts/retract",
        fact_actions_api.FactsRetractApi.as_view(),
        name="api-facts-retract",
    ),
    path(f"{ctx}/facts/<int:fact_id>", fact_actions_api.FactDetailApi.as_view(), name="api-fact"),
    path(
        f"{ctx}/facts/<int:fact_id>/correct",
        fact_actions_api.FactCorrectApi.as_view(),
        name="api-fact-correct",
    ),
    path(
        f"{ctx}/facts/<int:fact_id>/restore",
        fact_actions_api.FactRestoreApi.as_view(),
        name="api-fact-restore",
    ),
    path(f"{ctx}/threads", fact_actions_api.ThreadListApi.as_view(), name="api-threads"),
    path(
        f"{ctx}/threads/<path:thread>",
        fact_actions_api.ThreadDetailApi.as_view(),
        name="api-thread",
    ),
    path(
        f"{ctx}/facts/<int:fact_id>/review",
        facts.FactReviewApi.as_view(),
        name="api-fact-review",
    ),
    path(f"{ctx}/facts/review", facts.FactsReviewApi.as_view(), name="api-facts-review"),
    path(f"{ctx}/predicates", predicates.PredicateListApi.as_view(), name="api-predicates"),
    path(
        f"{ctx}/predicates/canonicalize",
        predicates.PredicateCanonicalizeApi.as_view(),
        name="api-predicates-canonicalize",
    ),
    path(
        f"{ctx}/predicates/export",
        predicates.PredicateExportApi.as_view(),
        name="api-predicates-export",
    ),
    path(
        f"{ctx}/predicates/import",
        predicates.PredicateImportApi.as_view(),
        name="api-predicates-import",
    ),
    path(
        f"{ctx}/predicates/shapes",
        constraints_api.PredicateShapesApi.as_view(),
        name="api-predicates-shapes",
    ),
    path(
        f"{ctx}/constraints/violations",
        constraints_api.ConstraintViolationsApi.as_view(),
        name="api-constraint-violations",
    ),
    path(
        f"{ctx}/constraints/exceptions",
        constraints_api.ConstraintExceptionApi.as_view(),
        name="api-constraint-exceptions",
    ),
    path(
        f"{ctx}/predicates/<str:name>",
        predicates.PredicateDetailApi.as_view(),
        name="api-predicate",
    ),
    path(
        f"{ctx}/predicates/<str:name>/aliases",
        predicates.PredicateAliasApi.as_view(),
        name="api-predicate-aliases",
    ),
]


def _reconcile_patterns(root: str, suffix: str) -> list[Any]:
    """The reconciliation service's routes below ``root`` (the header one, or the one
    with a key in its path)."""
    routes = [
        ("", reconcile_match.ReconcileRootApi, "api-reconcile"),
        ("/match", reconcile_match.ReconcileMatchApi, "api-reconcile-match"),
        ("/extend", reconcile_extend.ReconcileExtendApi, "api-reconcile-extend"),
        ("/extend/propose", reconcile_extend.ReconcileProposeApi, "api-reconcile-propose"),
        (
            "/suggest/entity",
            reconcile_suggest.ReconcileSuggestEntityApi,
            "api-reconcile-suggest-entity",
        ),
        ("/suggest/type", reconcile_suggest.ReconcileSuggestTypeApi, "api-reconcile-suggest-type"),
        (
            "/suggest/property",
            reconcile_suggest.ReconcileSuggestPropertyApi,
            "api-reconcile-suggest-property",
        ),
        ("/preview", reconcile_suggest.ReconcilePreviewApi, "api-reconcile-preview"),
    ]
    return [path(f"{root}{sub}", view.as_view(), name=name + suffix) for sub, view, name in routes]


reconcile_patterns = [
    *_reconcile_patterns(f"{ctx}/reconcile", ""),
    *_reconcile_patterns(f"{ctx}/reconcile/k/<str:key>", "-key"),
]

urlpatterns = [
    *reconcile_patterns,
    *api_patterns,
    *curation_patterns,
    path(f"{ctx}/", include("memory.api.ingest_urls")),
    path(f"{ctx}/", include("memory.api.search_urls")),
    # MCP (streamable HTTP), in this process: the same tokens, grants and services.
    path("mcp", McpEndpoint.as_view(), name="mcp"),
    path("metrics", metrics_view, name="metrics"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("admin/", admin.site.urls),
    # Browsers ask for /favicon.ico whatever the page links; the icon is an SVG.
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("", include("curation.urls")),
]

handler400 = json_error_view(400, "bad_request", "the request could not be read")
handler404 = json_error_view(404, "not_found", "no such resource")
handler500 = json_error_view(500, "server_error", "internal error; it has been logged")
