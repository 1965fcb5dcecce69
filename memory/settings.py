"""Django settings for Memory Desk, read from environment variables (see README)."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from memory.infra.env import env_bool, env_float, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("MEMORY_VAR_DIR", str(BASE_DIR / "var")))


def _secret_key() -> str:
    """SECRET_KEY from the environment; in development a random key kept in var/.

    Behind TLS (``MEMORY_HTTPS``, i.e. production) it must come from the environment: a key
    generated on each machine would make every web process sign sessions differently.
    """
    configured = env_str("SECRET_KEY")
    if configured:
        return configured
    if env_bool("MEMORY_HTTPS", default=False):
        raise ImproperlyConfigured("MEMORY_HTTPS is on: set SECRET_KEY in the environment")
    key_file = VAR_DIR / "secret_key"
    if not key_file.exists():
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


def _cache() -> dict[str, object]:
    """The cache holds only the API's rate-limit counters. ``local``: each process counts
    alone; ``database``: one table (``manage.py createcachetable``) shared by every web
    process, at a few small queries per API request."""
    kind = env_str("MEMORY_CACHE", "local")
    if kind == "local":
        return {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    if kind == "database":
        return {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": "memory_cache",
        }
    raise ImproperlyConfigured(f"MEMORY_CACHE must be 'local' or 'database', got {kind!r}")


def _database() -> dict[str, object]:
    url = env_str("DATABASE_URL")
    if not url:
        from memory.infra.embedded_db import embedded_database_url

        url = embedded_database_url(VAR_DIR / "pgdata")
    config = _database_config(url)
    # Django's backend with a health check that sends nothing (memory/infra/postgres).
    config["ENGINE"] = "memory.infra.postgres"
    config["TEST"] = {"NAME": env_str("MEMORY_TEST_DATABASE", "test_memorydesk")}
    return config


def _database_config(url: str) -> dict[str, object]:
    config: dict[str, object] = dict(dj_database_url.parse(url, conn_max_age=60))
    options = config.get("OPTIONS")
    if isinstance(options, dict) and "host" in options and not config.get("HOST"):
        config["HOST"] = options.pop("host")  # a Unix socket folder given as ?host=
    config["CONN_HEALTH_CHECKS"] = True
    return config


def replica_database(url: str) -> dict[str, object]:
    """A read replica's alias: the primary's settings with the replica's address. Under
    the test runner it mirrors the primary (a standby already holds every database the
    primary has, the test database included)."""
    config = _database_config(url)
    config["TEST"] = {"MIRROR": "default"}
    options = config.setdefault("OPTIONS", {})
    if isinstance(options, dict):
        # An unreachable replica is skipped after this long, not after the OS's minutes.
        options.setdefault("connect_timeout", env_int("MEMORY_REPLICA_CONNECT_TIMEOUT", 2))
    return config


SECRET_KEY = _secret_key()
DEBUG = env_bool("DEBUG", default=False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "csp",
    "template_partials",
    "django_tasks",
    "django_tasks_db",
    "memory",
    "memory.search",
    "curation",
]

MIDDLEWARE = [
    "memory.infra.metrics.RequestMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "memory.web.errors.BodyLimitMiddleware",
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "memory.api.query_check.QueryParameterCheck",
]

ROOT_URLCONF = "memory.urls"
WSGI_APPLICATION = "memory.wsgi.application"
ASGI_APPLICATION = "memory.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    }
]

DATABASES = {"default": _database()}
# Read replicas (docs/DEPLOY.md "Read replicas"): comma-separated URLs, each an alias
# replica_1, replica_2…; reads go there through memory.infra.replicas. Unset: one database.
MEMORY_REPLICA_DATABASES: list[str] = []
for _number, _url in enumerate(env_list("DATABASE_REPLICA_URLS", []), start=1):
    DATABASES[f"replica_{_number}"] = replica_database(_url)
    MEMORY_REPLICA_DATABASES.append(f"replica_{_number}")
if MEMORY_REPLICA_DATABASES:
    DATABASE_ROUTERS = ["memory.infra.replicas.ReplicaRouter"]
    MIDDLEWARE.insert(
        MIDDLEWARE.index("django.contrib.sessions.middleware.SessionMiddleware"),
        "memory.infra.replicas.ReplicaReadMiddleware",
    )
MEMORY_REPLICA_MAX_LAG_SECONDS = env_float("MEMORY_REPLICA_MAX_LAG_SECONDS", 10.0)
MEMORY_REPLICA_CHECK_SECONDS = env_float("MEMORY_REPLICA_CHECK_SECONDS", 1.0)
MEMORY_REPLICA_RETRY_SECONDS = env_float("MEMORY_REPLICA_RETRY_SECONDS", 10.0)
MEMORY_READ_YOUR_WRITES_SECONDS = env_float("MEMORY_READ_YOUR_WRITES_SECONDS", 30.0)
# A write transaction PostgreSQL breaks (deadlock, serialization failure) is run again
# inside the request, up to this many times in all, then answered 503 (docs/decisions/0119).
MEMORY_WRITE_ATTEMPTS = env_int("MEMORY_WRITE_ATTEMPTS", 3)
# /metrics answers a staff session, or a scraper sending "Authorization: Bearer <this>".
MEMORY_METRICS_TOKEN = env_str("MEMORY_METRICS_TOKEN")
CACHES = {"default": _cache()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"

# Requests bodies: a 1 MB turn must reach the validator (which refuses it with a 413
# JSON error) instead of Django's own RequestDataTooBig 400 page.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("MEMORY_MAX_REQUEST_BYTES", 8 * 1024 * 1024)

REST_FRAMEWORK: dict[str, Any] = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "memory.web.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON bodies only (bulk imports declare their own parsers): form encodings cannot
    # carry the nested and typed fields the API takes. Read and written by orjson where it
    # answers as DRF's JSON classes do (memory/web/json_codec.py, decision 0127).
    "DEFAULT_PARSER_CLASSES": ["memory.web.json_codec.FastJSONParser"],
    "DEFAULT_RENDERER_CLASSES": [
        "memory.web.json_codec.FastJSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    # `?format=` is an ordinary parameter (the bulk import's csv|jsonl), not DRF's switch
    # between renderers, which answered 404 for any value it had no renderer for.
    "URL_FORMAT_OVERRIDE": None,
    "DEFAULT_PAGINATION_CLASS": "memory.api.pagination.StandardPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "memory.api.schema.MemoryAutoSchema",
    "EXCEPTION_HANDLER": "memory.web.errors.exception_handler",
    # Counters in CACHES: per process by default; MEMORY_CACHE=database shares
    # them between web processes and machines (docs/DEPLOY.md).
    # DRF's throttles with one number a caller instead of a list of its requests
    # (memory/web/throttling.py).
    "DEFAULT_THROTTLE_CLASSES": [
        "memory.web.throttling.AnonRateThrottle",
        "memory.web.throttling.UserRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": env_str("MEMORY_API_RATE_ANON", "120/min"),
        "user": env_str("MEMORY_API_RATE_USER", "6000/min"),
        # The items API, which agents' stores call as they would a database (items_api).
        "items": env_str("MEMORY_API_RATE_ITEMS", "60000/min"),
        # Requests through one reconciliation key (memory.api.reconcile.views).
        "reconcile_key": env_str("MEMORY_API_RATE_RECONCILE_KEY", "6000/min"),
    },
    "UNAUTHENTICATED_USER": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Memory Desk API",
    "DESCRIPTION": "Knowledge-graph memory for AI agents: facts, entities, predicates, search.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI's groups, in this order (memory.api.schema tags each operation by the
    # resource its path names).
    "TAGS": [
        {"name": "memories", "description": "Write memories: LLM extraction, triples or turns."},
        {"name": "search", "description": "Search, and the prompt-ready memory block."},
        {"name": "facts", "description": "Facts: read, write, edit, correct, retract, restore."},
        {"name": "threads", "description": "Conversations: turns in order, with their facts."},
        {
            "name": "items",
            "description": "Items: exact JSON values under a namespace and a key "
            "(LangGraph's store).",
        },
        {"name": "entities", "description": "Entities: upsert, seed, edit, merge."},
        {"name": "documents", "description": "Documents and their chunks."},
        {"name": "keywords", "description": "Keyphrases of documents."},
        {"name": "predicates", "description": "The predicate registry."},
        {"name": "drift", "description": "Observed predicates not yet in the registry."},
        {"name": "duplicates", "description": "Duplicate entity candidates."},
        {"name": "conflicts", "description": "Contested single values."},
        {
            "name": "constraints",
            "description": "Property constraints: the violations report and exceptions.",
        },
        {"name": "runs", "description": "Ingest runs: reports, retry, retract."},
        {"name": "vocabulary", "description": "What the extraction prompt shows."},
        {"name": "audit", "description": "Curation history and undo."},
        {"name": "contexts", "description": "Contexts, their settings and checks."},
        {
            "name": "reconcile",
            "description": "The W3C Reconciliation API (0.2 and 1.0-draft) for OpenRefine.",
        },
        {"name": "export", "description": "A whole memory as JSON lines."},
        {"name": "import", "description": "A whole memory in: an export, mem0 or Graphiti."},
        {"name": "health", "description": "Liveness of each part."},
    ],
    "ENUM_NAME_OVERRIDES": {
        "EntityTypeEnum": "memory.models.entity.EntityType",
        "RunOutcomeEnum": "memory.models.run.RunOutcome",
        "FactKindEnum": "memory.models.fact.FactKind",
        "FactStatusEnum": "memory.models.fact.FactStatus",
        # Two result lists name their rows' kind ``type``: one enum each, by name.
        "SearchResultTypeEnum": ["chunk", "turn", "fact", "entity"],
        "MemoryBlockItemTypeEnum": ["fact", "chunk", "turn"],
        # A constraint's status (the violations report and its counts) beside a fact's.
        "ConstraintStatusEnum": "memory.domain.constraints.CONSTRAINT_STATUSES",
    },
}

TASKS = {
    "default": {
        "BACKEND": env_str("MEMORY_TASKS_BACKEND", "django_tasks_db.DatabaseBackend"),
    }
}

# LLM and embeddings (see README "Configuration").
OPENAI_API_KEY = env_str("OPENAI_API_KEY")
OPENAI_BASE_URL = env_str("OPENAI_BASE_URL")
MEMORY_CHAT_MODEL = env_str("MEMORY_CHAT_MODEL")
MEMORY_EMBED_MODEL = env_str("MEMORY_EMBED_MODEL", "local:all-MiniLM-L6-v2-int8")
MEMORY_LLM_TIMEOUT_SECONDS = env_float("MEMORY_LLM_TIMEOUT_SECONDS", 60.0)
MEMORY_LLM_MAX_RETRIES = env_int("MEMORY_LLM_MAX_RETRIES", 3)
# The dashboard's search hides results found only by vector similarity below this cosine
# (all-MiniLM-L6-v2 puts unrelated English texts at about 0.0-0.2); 0 shows everything.
MEMORY_SEARCH_VECTOR_FLOOR = env_float("MEMORY_SEARCH_VECTOR_FLOOR", 0.25)
MEMORY_MAX_TEXT_BYTES = env_int("MEMORY_MAX_TEXT_BYTES", 256 * 1024)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "memory": {"handlers": ["console"], "level": env_str("MEMORY_LOG_LEVEL", "INFO")},
        "django.request": {"handlers": ["console"], "level": "ERROR"},
    },
}

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"

# Behind TLS (production): secure cookies, HSTS and redirects. Off by default so the demo
# works on http://127.0.0.1; `MEMORY_HTTPS=1 manage.py check --deploy` is clean.
MEMORY_HTTPS = env_bool("MEMORY_HTTPS", default=False)
SESSION_COOKIE_SECURE = MEMORY_HTTPS
CSRF_COOKIE_SECURE = MEMORY_HTTPS
SECURE_SSL_REDIRECT = MEMORY_HTTPS
SECURE_HSTS_SECONDS = 31_536_000 if MEMORY_HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = MEMORY_HTTPS
SECURE_HSTS_PRELOAD = MEMORY_HTTPS
if env_bool("MEMORY_BEHIND_PROXY", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Content Security Policy: scripts only from this origin (htmx is served by django-htmx,
# Swagger UI by the sidecar, its init script by the split view), so no inline script runs.
# Inline styles stay allowed: htmx's indicator styles and Swagger UI set them.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}
