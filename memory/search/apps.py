from django.apps import AppConfig


class SearchConfig(AppConfig):
    """Documents' search index (BM25 postings, keywords) as its own app, with its own
    migrations, so the index can evolve without touching the memory store's schema."""

    name = "memory.search"
    label = "search"
    verbose_name = "Search index"
    default_auto_field = "django.db.models.BigAutoField"
