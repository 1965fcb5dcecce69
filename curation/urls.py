"""Dashboard URLs. Included at the site root: ``path("", include("curation.urls"))``.

Screens live under ``/c/<ctx>/``; every action is a POST to its own URL that redirects
back (or answers htmx with the partial it changed).
"""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import include, path

from curation import views
from curation.views import (
    audit,
    conflicts,
    constraints,
    conversations,
    documents,
    drift,
    duplicates,
    entities,
    facts,
    memory_transfer,
    overview,
    people,
    registry,
    review,
    runs,
    search,
    seeding,
    tokens,
)

context_patterns = [
    path("", overview.overview, name="overview"),
    path("drift/", drift.drift, name="drift"),
    path("review/", review.review, name="review"),
    path("review/decide", review.review_decide, name="review-decide"),
    path("review/policy", review.review_policy, name="review-policy"),
    path("drift/bulk", drift.drift_bulk, name="drift-bulk"),
    path("drift/<str:name>/resolve", drift.drift_resolve_view, name="drift-resolve"),
    path("drift/<str:name>/promote", drift.drift_promote, name="drift-promote"),
    path("drift/<str:name>/definition", drift.drift_definition, name="drift-definition"),
    path("duplicates/", duplicates.duplicates, name="duplicates"),
    path("duplicates/preview", duplicates.duplicates_preview, name="duplicates-preview"),
    path("duplicates/merge", duplicates.duplicates_merge, name="duplicates-merge"),
    path("duplicates/dismiss", duplicates.duplicates_dismiss_view, name="duplicates-dismiss"),
    path("duplicates/scan", duplicates.duplicates_scan_view, name="duplicates-scan"),
    path("merges/<int:merge_id>/undo", duplicates.merge_undo_view, name="merge-undo"),
    path("conflicts/", conflicts.conflicts, name="conflicts"),
    path("constraints/", constraints.constraints, name="constraints"),
    path("constraints/retract", constraints.constraint_retract, name="constraint-retract"),
    path("constraints/correct", constraints.constraint_correct, name="constraint-correct"),
    path("constraints/except", constraints.constraint_except, name="constraint-except"),
    path(
        "conflicts/<int:conflict_id>/resolve",
        conflicts.conflict_resolve_view,
        name="conflict-resolve",
    ),
    path("registry/", registry.registry, name="registry"),
    path("registry/export.json", registry.registry_export, name="registry-export"),
    path("registry/import", registry.registry_import_view, name="registry-import"),
    path("registry/<str:name>/", registry.predicate_detail, name="predicate"),
    path("registry/<str:name>/edit", registry.predicate_edit, name="predicate-edit"),
    path(
        "registry/<str:name>/constraints",
        constraints.predicate_constraints_edit,
        name="predicate-constraints",
    ),
    path("registry/<str:name>/aliases", registry.predicate_alias_add_view, name="alias-add"),
    path(
        "registry/<str:name>/aliases/remove",
        registry.predicate_alias_remove_view,
        name="alias-remove",
    ),
    path("registry/<str:name>/flags", registry.predicate_flag, name="predicate-flag"),
    path(
        "registry/<str:name>/unregister",
        registry.predicate_unregister_view,
        name="predicate-unregister",
    ),
    path("entities/", entities.entities, name="entities"),
    path("entities/seed/", seeding.seed, name="seed"),
    path("entities/seed/one", seeding.seed_one, name="seed-one"),
    path("entities/seed/upload", seeding.seed_upload, name="seed-upload"),
    path("entities/seed/jobs/<int:job_id>/", seeding.seed_job, name="seed-job"),
    path("entities/seed/jobs/<int:job_id>/retry", seeding.seed_job_retry, name="seed-job-retry"),
    path(
        "entities/seed/jobs/<int:job_id>/report.json",
        seeding.seed_job_report,
        name="seed-job-report",
    ),
    path("entities/<int:entity_id>/", entities.entity_detail, name="entity"),
    path("entities/<int:entity_id>/edit", entities.entity_edit, name="entity-edit"),
    path("entities/<int:entity_id>/delete", entities.entity_delete_view, name="entity-delete"),
    path("facts/", facts.facts, name="facts"),
    path("facts/retract", facts.facts_retract_view, name="facts-retract"),
    path("facts/<int:fact_id>/", facts.fact_page, name="fact"),
    path("facts/<int:fact_id>/retract", facts.fact_retract_view, name="fact-retract"),
    path("facts/<int:fact_id>/restore", facts.fact_restore_view, name="fact-restore"),
    path("facts/<int:fact_id>/correct", facts.fact_correct_view, name="fact-correct"),
    path("facts/<int:fact_id>/edit", facts.fact_edit_view, name="fact-edit"),
    path("conversations/", conversations.conversations, name="conversations"),
    path("conversations/<path:thread>/", conversations.conversation, name="conversation"),
    path("turns/<int:turn_id>/retract", conversations.turn_retract_view, name="turn-retract"),
    path("documents/", documents.documents, name="documents"),
    path("documents/add", documents.document_add, name="document-add"),
    path("documents/<int:document_id>/", documents.document_detail, name="document"),
    path(
        "documents/<int:document_id>/delete",
        documents.document_delete_view,
        name="document-delete",
    ),
    path("search/", search.search_view, name="search"),
    path("runs/", runs.runs, name="runs"),
    path("runs/<int:run_id>/", runs.run_detail, name="run"),
    path("runs/<int:run_id>/retry", runs.run_retry_view, name="run-retry"),
    path("runs/<int:run_id>/retract", runs.run_retract_view, name="run-retract"),
    path("memory/", memory_transfer.memory, name="memory"),
    path("memory/export.jsonl", memory_transfer.memory_export_download, name="memory-export"),
    path("memory/import", memory_transfer.memory_import_upload, name="memory-import"),
    path("memory/jobs/<int:job_id>/", memory_transfer.memory_job, name="memory-job"),
    path(
        "memory/jobs/<int:job_id>/retry", memory_transfer.memory_job_retry, name="memory-job-retry"
    ),
    path("tokens/", tokens.tokens, name="tokens"),
    path("tokens/create", tokens.token_create_view, name="token-create"),
    path("tokens/reconcile", tokens.reconcile_key_create_view, name="reconcile-key-create"),
    path("tokens/<int:token_id>/revoke", tokens.token_revoke_view, name="token-revoke"),
    path("audit/", audit.audit, name="audit"),
    path("audit/<int:event_id>/undo", audit.audit_undo_view, name="audit-undo"),
]

urlpatterns = [
    path("", views.home, name="home"),
    path("c/<str:ctx>/", include(context_patterns)),
    path("people/", people.people, name="people"),
    path("people/contexts", people.people_context_create, name="people-context-create"),
    path("people/<str:ctx>/members", people.people_member_add, name="people-member-add"),
    path(
        "people/<str:ctx>/members/<int:user_id>/role",
        people.people_member_role,
        name="people-member-role",
    ),
    path(
        "people/<str:ctx>/members/<int:user_id>/remove",
        people.people_member_remove,
        name="people-member-remove",
    ),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(next_page="login"), name="logout"),
]
