from __future__ import annotations

from rest_framework.pagination import LimitOffsetPagination


class StandardPagination(LimitOffsetPagination):
    """``?limit=&offset=`` with a cap, returning ``{count, next, previous, results}``."""

    default_limit = 50
    max_limit = 500
